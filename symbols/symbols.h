/* Address to name, for user and kernel addresses.
 *
 * struct symbolizer holds what does not depend on a process: ELF files (each parsed once,
 * cached by build-id, else by device+inode+size+mtime, however many processes map it), the
 * kernel's symbols (kernel_syms.h) and the vDSO. struct proc_syms is one process's address
 * space as read at one moment: its mappings, each tied to a cached file, so its addresses can
 * still be named after the process has exited or exec'd.
 *
 * Names are function names as perf shows them (no offset, no symbol version, NAME@plt for a
 * PLT stub), or MODULE+0xOFFSET (the file's base name and the file offset) when the address
 * is in a file but no symbol covers it. Knows nothing of BPF or FUSE. Thread-safe. */
#ifndef APERTURE_SYMBOLS_H
#define APERTURE_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct symbolizer;
struct proc_syms;

int symbolizer_new(struct symbolizer **out);
void symbolizer_free(struct symbolizer *s);

/* Kernel address to name (no suffix; the caller adds "_[k]"). An address kallsyms does not
 * cover is named "[kernel]+0xADDRESS". Returns 0 or -ENOSPC if len is too small. */
int symbolizer_kernel_name(struct symbolizer *s, uint64_t addr, char *buf, size_t len);

/* Number of ELF files currently cached. */
size_t symbolizer_cached_files(struct symbolizer *s);

/* Reads /proc/<pid>/maps now and opens every file-backed executable mapping's file now
 * (through /proc/<pid>/map_files/, else /proc/<pid>/root/<path>), so that naming works later
 * even if the process is gone. Returns 0, -ESRCH if the process does not exist, or -errno. */
int proc_syms_new(struct symbolizer *s, pid_t pid, struct proc_syms **out);

/* Re-reads the mappings of a live process (after a dlopen, say). Files already cached are not
 * parsed again. Returns 0, -ESRCH if the process is gone (the old mappings stay usable). */
int proc_syms_refresh(struct proc_syms *ps);

void proc_syms_free(struct proc_syms *ps);

/* Name of a user address. is_return: the address is a return address, so the call site
 * (addr - 1) is looked up and, unnamed, reported, as perf does; the leaf frame's address is
 * exact. Returns 0 with the name in buf; -ENOENT if no mapping covers addr (the caller may
 * refresh and retry, then write "[unknown]"); -ENOSPC if len is too small. Anonymous
 * executable memory is named from the process's perf map, "NAME_[j]" (perf_map.h), else
 * "[anon]+0xADDRESS". */
int proc_syms_name(struct proc_syms *ps, uint64_t addr, bool is_return, char *buf, size_t len);

#define SYMS_NAME_MAX 512
#define SYMS_INLINE_MAX 8

/* One function at a user address. */
struct sym_frame {
	char name[SYMS_NAME_MAX]; /* as proc_syms_name names it; inlined ones end in "_[i]" */
	const char *file;         /* source file of its definition, NULL if unknown */
	uint32_t line;            /* line of its definition, 0 if unknown */
	uint32_t at_line;         /* the line executing in it there, 0 if unknown: the line of
				     the address (a caller's: of its call instruction), or for a
				     function an inlined one is in, the line of that inlined call */
};

/* Every function at a user address: what proc_syms_name gives, and from DWARF (where the
 * file or its separate debug file has it) the functions inlined at that address, where
 * each is defined and which of its lines runs there. Strings stay valid until the next proc_syms_refresh or proc_syms_free. */
struct sym_frames {
	int n;
	struct sym_frame f[SYMS_INLINE_MAX]; /* f[0] out of line, then inlined ones, innermost last */
	const char *module;                  /* path of the mapped file, NULL for none */
	char build_id[65];                   /* its GNU build id in hex, "" if none */
};

/* Returns 0, or -ENOENT as proc_syms_name. */
int proc_syms_frames(struct proc_syms *ps, uint64_t addr, bool is_return,
		     struct sym_frames *out);

/* Directories searched for separate debug files before the standard places, ':' between
 * them (each as DIR/.build-id/xx/rest.debug and DIR/<.gnu_debuglink name>); copied. Files
 * already parsed keep what they found. 0 or -ENOMEM. */
int symbolizer_set_debug_dirs(struct symbolizer *s, const char *dirs);

/* Whether C++ and Rust names are demangled (the default) or left as in the symbol table. */
void symbolizer_set_demangle(struct symbolizer *s, bool on);

#endif
