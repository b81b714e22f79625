/* Parsed ELF files shared by every process that maps them.
 *
 * A file is found again by its device+inode+size+mtime (one fstat, no parsing), else by its
 * build-id (the same library seen through another path or container layer), and parsed only
 * when neither matches. References keep a file alive for the proc_syms that map it. */
#ifndef APERTURE_SYMBOLS_FILE_CACHE_H
#define APERTURE_SYMBOLS_FILE_CACHE_H

#include <stddef.h>

struct elf_file;
struct file_cache;
struct cached_file;

/* idle_max: how many files that nothing references are kept for reuse. */
int file_cache_new(size_t idle_max, struct file_cache **out);

/* Frees every cached file; no reference may be held any more. */
void file_cache_free(struct file_cache *c);

/* A new reference to the ELF file open on fd; fd is consumed. debug_path as for
 * elf_file_open. Returns 0, -ENOEXEC if fd is not an ELF file, or -errno. */
int file_cache_get(struct file_cache *c, int fd, const char *debug_path,
		   struct cached_file **out);

/* Another reference to a file the caller holds one of. */
struct cached_file *file_cache_ref(struct file_cache *c, struct cached_file *cf);

/* Drops a reference; NULL is ignored. */
void file_cache_put(struct file_cache *c, struct cached_file *cf);

/* Frees every file nothing references. */
void file_cache_drop_idle(struct file_cache *c);

/* Files cached, referenced or idle. */
size_t file_cache_count(struct file_cache *c);

/* The parsed file; valid while the reference is held. */
const struct elf_file *cached_file_elf(const struct cached_file *cf);

#endif
