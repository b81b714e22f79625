// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/addr_table.h"
#include "symbols/alias.h"
#include "symbols/kallsyms.h"

/* The last symbol has no successor to end it; kernel functions past this size are rare, and a
 * JIT'd BPF program or trampoline loaded after we read kallsyms lands beyond the last symbol,
 * where naming it after that symbol would be a lie. */
#define LAST_SYMBOL_SPAN (64 * 1024)

struct ksym {
	uint64_t addr;		/* first: see addr_table.h */
	uint32_t name;		/* offset into names; text symbols only */
	uint8_t text : 1;
	uint8_t bpf : 1;	/* tagged [bpf]: BPF programs, trampolines, dispatchers */
	uint8_t bind : 2;	/* enum alias_binding */
	/* Bytes of padding before the symbol that kallsyms names __pfx_NAME (kernels built
	 * with function padding give every function one): half the kernel's symbols, kept as
	 * this count rather than as entries and names of their own. */
	uint8_t pfx;
};

struct kallsyms {
	struct ksym *syms;	/* sorted by addr, one per address */
	size_t n;
	size_t ntext;
	char *names;		/* NUL-separated names of text symbols */
};

#define KSYM_NAME_MAX 512 /* the kernel's KSYM_NAME_LEN */
#define PFX "__pfx_"
#define PFX_LEN (sizeof(PFX) - 1)

struct kallsyms_builder {
	struct ksym *syms;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	/* A __pfx_ symbol just read, folded into the next one if that is the function it
	 * pads (kallsyms lists it right before), else added as itself. */
	bool pending;
	struct ksym pending_sym;
	char pending_name[KSYM_NAME_MAX];
};

static int add_name(struct kallsyms_builder *b, const char *name, size_t len, uint32_t *off)
{
	if (b->names_len + len + 1 > UINT32_MAX)
		return -ENOMEM;
	while (b->names_len + len + 1 > b->names_cap) {
		size_t cap = b->names_cap ? b->names_cap * 2 : 65536;
		char *grown = realloc(b->names, cap);

		if (!grown)
			return -ENOMEM;
		b->names = grown;
		b->names_cap = cap;
	}
	memcpy(b->names + b->names_len, name, len);
	b->names[b->names_len + len] = '\0';
	*off = b->names_len;
	b->names_len += len + 1;
	return 0;
}

static int add_sym(struct kallsyms_builder *b, const struct ksym *sym)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		struct ksym *grown = reallocarray(b->syms, cap, sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		b->syms = grown;
		b->cap = cap;
	}
	b->syms[b->n++] = *sym;
	return 0;
}

/* Adds sym, and its name if it is text. */
static int add(struct kallsyms_builder *b, struct ksym *sym, const char *name, size_t len)
{
	if (sym->text) {
		int err = add_name(b, name, len, &sym->name);

		if (err)
			return err;
	}
	return add_sym(b, sym);
}

static int flush_pending(struct kallsyms_builder *b)
{
	if (!b->pending)
		return 0;
	b->pending = false;
	return add(b, &b->pending_sym, b->pending_name, strlen(b->pending_name));
}

/* Adds sym, holding a __pfx_ symbol back to fold it into the function it pads. */
static int add_folding_pfx(struct kallsyms_builder *b, struct ksym *sym, const char *name,
			   size_t len)
{
	int err;

	if (b->pending) {
		uint64_t pad = sym->addr - b->pending_sym.addr;

		if (sym->text && pad > 0 && pad <= UINT8_MAX &&
		    len == strlen(b->pending_name) - PFX_LEN &&
		    !memcmp(name, b->pending_name + PFX_LEN, len)) {
			sym->pfx = pad;
			b->pending = false;
		} else if ((err = flush_pending(b))) {
			return err;
		}
	}
	if (sym->text && len > PFX_LEN && len < sizeof(b->pending_name) &&
	    !memcmp(name, PFX, PFX_LEN)) {
		b->pending = true;
		b->pending_sym = *sym;
		memcpy(b->pending_name, name, len);
		b->pending_name[len] = '\0';
		return 0;
	}
	return add(b, sym, name, len);
}

/* "ffffffff821f94a0 T schedule" or "ffffffffc0201000 t name\t[module]". */
static int parse_line(struct kallsyms_builder *b, const char *p, const char *end)
{
	struct ksym sym = {};
	const char *name;
	char type;
	int digits = 0;

	for (; p < end && *p != ' '; p++, digits++) {
		unsigned int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			return -EINVAL;
		sym.addr = sym.addr << 4 | d;
	}
	if (digits == 0 || digits > 16 || end - p < 4 || p[2] != ' ')
		return -EINVAL;
	type = p[1];
	name = p + 3;
	for (p = name; p < end && *p != '\t' && *p != ' '; p++)
		;
	if (p == name)
		return -EINVAL;
	sym.bpf = end - p == 6 && !memcmp(p + 1, "[bpf]", 5);

	switch (type) {
	case 'a': case 'A':	/* absolute values (per-CPU offsets), not addresses */
	case 'u': case 'U':
		return 0;
	case 'T':
		sym.bind = ALIAS_GLOBAL;
		sym.text = true;
		break;
	case 'W': case 'w':	/* without CONFIG_KALLSYMS_ALL only text is listed weak */
		sym.bind = ALIAS_WEAK;
		sym.text = true;
		break;
	case 't':
		sym.bind = ALIAS_LOCAL;
		sym.text = true;
		break;
	default:
		sym.text = false;
		break;
	}
	return add_folding_pfx(b, &sym, name, p - name);
}

/* By address; at one address text first, then the better alias first, so that dedup keeps
 * the first entry of each address. */
static int ksym_cmp(const void *pa, const void *pb, void *names)
{
	const struct ksym *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->text != b->text)
		return a->text ? -1 : 1;
	if (!a->text)
		return 0;
	return alias_cmp((char *)names + a->name, a->bind, (char *)names + b->name, b->bind);
}

static void builder_free(struct kallsyms_builder *b)
{
	free(b->syms);
	free(b->names);
}

/* The table from what b read, b's arrays cut to what they hold; b is spent either way. */
static int builder_finish(struct kallsyms_builder *b, struct kallsyms **out)
{
	struct kallsyms *k;
	size_t i, first;
	void *fit;
	int err;

	err = flush_pending(b);
	if (err || !(k = calloc(1, sizeof(*k)))) {
		builder_free(b);
		return err ? err : -ENOMEM;
	}
	/* Hidden addresses all read 0: nothing can be named. */
	if (b->n && b->syms[0].addr == 0 && b->syms[b->n - 1].addr == 0)
		b->n = 0;
	if (b->n) /* an empty text leaves syms NULL, which qsort_r must not get */
		qsort_r(b->syms, b->n, sizeof(*b->syms), ksym_cmp, b->names);
	/* The padding belongs to the address, whichever alias dedup keeps. */
	for (i = 1, first = 0; i < b->n; i++) {
		if (b->syms[i].addr != b->syms[first].addr)
			first = i;
		else if (b->syms[i].pfx > b->syms[first].pfx)
			b->syms[first].pfx = b->syms[i].pfx;
	}
	k->n = addr_table_dedup(b->syms, b->n, sizeof(*b->syms));
	for (i = 0; i < k->n; i++)
		k->ntext += b->syms[i].text;
	/* Grown by doubling: up to half of each array is slack. */
	if (k->n && (fit = reallocarray(b->syms, k->n, sizeof(*b->syms))))
		b->syms = fit;
	if (b->names_len && (fit = realloc(b->names, b->names_len)))
		b->names = fit;
	k->syms = b->syms;
	k->names = b->names;
	*out = k;
	return 0;
}

int kallsyms_parse(const char *text, size_t len, struct kallsyms **out)
{
	struct kallsyms_builder b = {};
	const char *p = text, *end = text + len;
	int err;

	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		const char *line_end = nl ? nl : end;

		if (line_end > p) {
			err = parse_line(&b, p, line_end);
			if (err) {
				builder_free(&b);
				return err;
			}
		}
		p = nl ? nl + 1 : end;
	}
	return builder_finish(&b, out);
}

/* Line by line: /proc/kallsyms is ~5 MB of text, several times what the table keeps. */
int kallsyms_load(const char *path, struct kallsyms **out)
{
	struct kallsyms_builder b = {};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int err = 0;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* Fewer reads of /proc: each one walks the kernel's table to its position. */
	setvbuf(f, NULL, _IOFBF, 64 << 10);
	while ((len = getline(&line, &cap, f)) > 0 && !err) {
		if (line[len - 1] == '\n')
			len--;
		if (len)
			err = parse_line(&b, line, line + len);
	}
	if (!err && ferror(f))
		err = -EIO;
	free(line);
	fclose(f);
	if (err) {
		builder_free(&b);
		return err;
	}
	return builder_finish(&b, out);
}

void kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k);
}

int kallsyms_name(const struct kallsyms *k, uint64_t addr, char *buf, size_t len, bool *stale)
{
	size_t lo = addr_table_upper_bound(k->syms, k->n, sizeof(*k->syms), addr);
	const struct ksym *sym = lo ? &k->syms[lo - 1] : NULL, *next = lo < k->n ? &k->syms[lo] : NULL;
	const char *prefix = "";
	int n;

	if (next && next->pfx && addr >= next->addr - next->pfx) {
		sym = next;
		prefix = PFX;
	} else if (!sym || !sym->text || (lo == k->n && addr - sym->addr >= LAST_SYMBOL_SPAN)) {
		sym = NULL;
	}
	/* BPF programs are packed into shared pages, a new one beside older ones: past an
	 * older program's symbol may be a program loaded since. */
	if (stale)
		*stale = !sym || sym->bpf;
	if (!sym)
		return -ENOENT;
	n = snprintf(buf, len, "%s%s", prefix, k->names + sym->name);
	return n < (int)len ? 0 : -ENOSPC;
}

size_t kallsyms_count(const struct kallsyms *k)
{
	return k->ntext;
}
