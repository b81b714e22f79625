// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/addr_table.h"
#include "symbols/alias.h"
#include "symbols/kallsyms.h"
#include "symbols/read_file.h"

/* The last symbol has no successor to end it; kernel functions past this size are rare, and a
 * JIT'd BPF program or trampoline loaded after we read kallsyms lands beyond the last symbol,
 * where naming it after that symbol would be a lie. */
#define LAST_SYMBOL_SPAN (64 * 1024)

struct ksym {
	uint64_t addr;		/* first: see addr_table.h */
	uint32_t name;		/* offset into names; text symbols only */
	bool text;
	bool bpf;		/* tagged [bpf]: BPF programs, trampolines, dispatchers */
	enum alias_binding bind;
};

struct kallsyms {
	struct ksym *syms;	/* sorted by addr, one per address */
	size_t n;
	size_t ntext;
	char *names;		/* NUL-separated names of text symbols */
};

struct kallsyms_builder {
	struct ksym *syms;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
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
	if (sym.text) {
		int err = add_name(b, name, p - name, &sym.name);

		if (err)
			return err;
	}
	return add_sym(b, &sym);
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

int kallsyms_parse(const char *text, size_t len, struct kallsyms **out)
{
	struct kallsyms_builder b = {};
	const char *p = text, *end = text + len;
	struct kallsyms *k;
	size_t i;
	int err;

	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		const char *line_end = nl ? nl : end;

		if (line_end > p) {
			err = parse_line(&b, p, line_end);
			if (err)
				goto err_free;
		}
		p = nl ? nl + 1 : end;
	}

	k = calloc(1, sizeof(*k));
	if (!k) {
		err = -ENOMEM;
		goto err_free;
	}
	/* Hidden addresses all read 0: nothing can be named. */
	if (b.n && b.syms[0].addr == 0 && b.syms[b.n - 1].addr == 0)
		b.n = 0;
	if (b.n) /* an empty text leaves syms NULL, which qsort_r must not get */
		qsort_r(b.syms, b.n, sizeof(*b.syms), ksym_cmp, b.names);
	k->n = addr_table_dedup(b.syms, b.n, sizeof(*b.syms));
	for (i = 0; i < k->n; i++)
		k->ntext += b.syms[i].text;
	k->syms = b.syms;
	k->names = b.names;
	*out = k;
	return 0;

err_free:
	free(b.syms);
	free(b.names);
	return err;
}

int kallsyms_load(const char *path, struct kallsyms **out)
{
	char *text;
	size_t len;
	int err;

	err = read_file(path, &text, &len);
	if (err)
		return err;
	err = kallsyms_parse(text, len, out);
	free(text);
	return err;
}

void kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k);
}

const char *kallsyms_lookup(const struct kallsyms *k, uint64_t addr, bool *stale)
{
	size_t lo = addr_table_upper_bound(k->syms, k->n, sizeof(*k->syms), addr);
	const struct ksym *sym = lo ? &k->syms[lo - 1] : NULL;
	const char *name = NULL;

	if (sym && sym->text && (lo < k->n || addr - sym->addr < LAST_SYMBOL_SPAN))
		name = k->names + sym->name;
	/* BPF programs are packed into shared pages, a new one beside older ones: past an
	 * older program's symbol may be a program loaded since. */
	if (stale)
		*stale = !name || sym->bpf;
	return name;
}

size_t kallsyms_count(const struct kallsyms *k)
{
	return k->ntext;
}
