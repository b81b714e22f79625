/* Output assembled in a buffer and written in large pieces: a stdio call per frame name
 * costs more than all the copying. Internal to views/. */
#ifndef APERTURE_VIEWS_WRITER_H
#define APERTURE_VIEWS_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct writer {
	FILE *out;
	size_t len;
	char buf[65536];
};

/* NULL when out of memory. */
struct writer *writer_new(FILE *out);
/* Flushes and frees; returns 0, or -EIO if the stream had an error. */
int writer_close(struct writer *w);

void writer_put(struct writer *w, const char *data, size_t len);
void writer_str(struct writer *w, const char *s);
void writer_u64(struct writer *w, uint64_t v);
/* v with 0 to 3 decimals, rounded, as printf's %.Nf writes it but faster. */
void writer_fixed(struct writer *w, double v, int decimals);
void writer_printf(struct writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as XML character data or attribute text, with bytes that are not UTF-8 as U+FFFD; at
 * most max_chars characters, ending in ".." when cut. */
void writer_xml(struct writer *w, const char *s, size_t max_chars);
/* Whether s is all valid UTF-8. */
bool utf8_valid(const char *s);
/* s as UTF-8 with each invalid byte replaced by U+FFFD, into a new string (NULL: no memory). */
char *utf8_clean(const char *s);

#endif
