/* One ELF file, parsed once: where its file offsets sit in its virtual address space, and its
 * function symbols sorted for lookup by address.
 *
 * Each file gets its own Dwfl with the file reported at bias 0, so module addresses are the
 * ELF's own virtual addresses (verified for ET_DYN and ET_EXEC). libdwfl finds the symbols
 * (.symtab, else .dynsym plus .gnu_debugdata, or a separate debug file by build-id or
 * .gnu_debuglink) and later work can ask the same Dwfl for line info and inline frames. We
 * copy the symbols into a sorted table rather than calling dwfl_module_addrinfo per address
 * because that scans the whole symbol table on every call, and a profiler names thousands of
 * addresses a second in binaries with 100,000 symbols.
 *
 * Immutable once elf_file_load_symbols returns, so lookups need no lock. */
#ifndef APERTURE_SYMBOLS_ELF_FILE_H
#define APERTURE_SYMBOLS_ELF_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

struct elf_file;

/* What makes two open files the same file for the cache. */
struct elf_file_key {
	const uint8_t *build_id;	/* NULL if the file has no GNU build-id note */
	size_t build_id_len;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

/* Opens the ELF file on fd, which is consumed (closed on failure, else held until
 * elf_file_free so the file stays readable after the process that mapped it is gone).
 * debug_path: where the file can be found now, for finding separate debug files next to it
 * (/proc/<pid>/root/... for a process in a container). Cheap: reads the headers and the
 * build-id note only. Returns 0, -ENOEXEC if it is not an ELF file, or -errno. */
int elf_file_open(int fd, const char *debug_path, struct elf_file **out);

/* Finds and sorts the symbols; the expensive part, so callers can check a cache first.
 * Returns 0 or -ENOMEM; a file without symbols is not an error. */
int elf_file_load_symbols(struct elf_file *f);

void elf_file_free(struct elf_file *f);

const struct elf_file_key *elf_file_key(const struct elf_file *f);

/* Function symbols in the table. */
size_t elf_file_symbol_count(const struct elf_file *f);

/* Name of the function covering the byte at this file offset, or NULL. The string lives as
 * long as f. */
const char *elf_file_lookup(const struct elf_file *f, uint64_t file_offset);

/* A function in DWARF: the one an address is in, or one inlined there. Strings live as long
 * as the file; any may be NULL (unknown). */
struct elf_scope {
	const char *name;  /* linkage name (mangled) if the DIE has one, else its name */
	const char *file;  /* where the function is defined */
	uint32_t line;
	uint32_t at_line;  /* the line executing in it at the address: the line table's for the
			      innermost, the call's (DW_AT_call_line) for each outer one */
};

/* Functions elf_file_scopes gives per address: deeper inlining loses its innermost ones. */
#define ELF_SCOPES_MAX 8

/* The DWARF functions at the byte at this file offset, outermost first: out[0] is the
 * out-of-line function, out[1..] the functions inlined into it down to the innermost.
 * Returns how many were stored (at most max), 0 without debug info there. Locked inside:
 * libdw's lazy loading is not thread-safe. */
int elf_file_scopes(const struct elf_file *f, uint64_t file_offset, struct elf_scope *out, int max);

/* The ELF virtual address of a file offset, through the PT_LOAD segment that contains it.
 * Returns 0 or -ENOENT if no segment holds that offset. */
int elf_file_vaddr(const struct elf_file *f, uint64_t file_offset, uint64_t *vaddr);

#endif
