/* Kernel text symbols from /proc/kallsyms, for naming kernel stack addresses.
 *
 * kallsyms gives no sizes: a text symbol covers addresses up to the next symbol of any kind.
 * Non-text symbols are kept only as boundaries so an address past the end of text is not
 * blamed on the last function. Immutable once built, so lookups need no lock. Compact, as the
 * kernel has ~120,000 symbols: one block of names, one sorted array of 16-byte entries, and
 * no entry for the __pfx_ symbols that name the padding before each function. */
#ifndef APERTURE_SYMBOLS_KALLSYMS_H
#define APERTURE_SYMBOLS_KALLSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kallsyms;

/* Builds a table from kallsyms text. A text whose addresses are all zero (kptr_restrict, or
 * read without CAP_SYSLOG) gives an empty table, not an error. Returns 0, -EINVAL for a
 * malformed line, or -ENOMEM. */
int kallsyms_parse(const char *text, size_t len, struct kallsyms **out);

/* The same, from a file such as "/proc/kallsyms". Returns 0 or -errno. */
int kallsyms_load(const char *path, struct kallsyms **out);

void kallsyms_free(struct kallsyms *k);

/* Name of the text symbol covering addr (without any "[module]" tag) into buf: 0, -ENOENT
 * when none does, -ENOSPC when len is too short. *stale (if not NULL): the answer may be out
 * of date, since code loaded after the text was read can be there: no symbol covers addr, or
 * it is in a BPF program. */
int kallsyms_name(const struct kallsyms *k, uint64_t addr, char *buf, size_t len, bool *stale);

/* Text symbols in the table. */
size_t kallsyms_count(const struct kallsyms *k);

#endif
