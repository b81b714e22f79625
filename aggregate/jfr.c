/* A bounded reader of Java Flight Recorder recordings: the JDK's own (-XX:StartFlightRecording)
 * and async-profiler's, as pyroscope-java sends them (POST /ingest?format=jfr).
 *
 * A recording is chunks; a chunk is a 68-byte big-endian header ("FLR\0", version, size,
 * the offsets of its last constant pool and of its metadata, times, features) and events,
 * each `size type fields...` with LEB128-like integers (at most 9 bytes, the 9th whole).
 * The metadata event (type 0) is a string table and a tree of elements: each `class` (its
 * id, name) with its `field`s (name, type id, constantPool, dimension). Constant pool events
 * (type 1) hold, per type, entries `key value`; a field marked constantPool holds such a key,
 * other fields their value inline (a class's fields in order; arrays a count, then each).
 *
 * Two passes over each chunk: the first indexes every constant pool entry by (type, key) at
 * its offset, the second reads the events Aperture keeps, resolving a stack trace through
 * the pools only when asked: jdk.StackTrace.frames[].method -> jdk.types.Method.{type ->
 * java.lang.Class.name, name} -> jdk.types.Symbol.string. Every read is checked against the
 * end of its event, every count against the bytes left, recursion is bounded and so is the
 * total work, so any bytes end in a result or a reason. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include "aggregate/jfr.h"

#define JFR_HEADER 68
#define JFR_MAX_DEPTH 12         /* nesting of inline values, and of metadata elements */
#define JFR_MAX_ARRAY 65536
#define JFR_MAX_FRAMES 512
#define JFR_MAX_CLASSES 8192
#define JFR_MAX_FIELDS 256       /* a class's */
#define JFR_MAX_WORK (1u << 27)  /* values read or skipped in one recording */
#define JFR_NAME_MAX 1024

enum prim { P_CLASS, P_BOOLEAN, P_BYTE, P_CHAR, P_SHORT, P_INT, P_LONG, P_FLOAT, P_DOUBLE,
	    P_STRING };

struct field {
	uint64_t type_id;
	int cls;           /* index into classes, resolved after the metadata */
	const char *name;
	bool cp, array;
};

struct cls {
	uint64_t id;
	const char *name;
	enum prim prim;
	struct field *fields;
	uint32_t nfields;
};

struct cp_entry {
	uint64_t type, key;
	size_t off;        /* of the value, in the chunk */
};

struct class_id {
	uint64_t id;
	int index;
};

struct jfr {
	const uint8_t *chunk;
	size_t chunk_len;
	char **strings;    /* the metadata's */
	size_t nstrings;
	struct cls *classes;
	size_t nclasses;
	struct class_id *by_id; /* classes by id, for the pools and the fields' types */
	int string_cls;    /* java.lang.String's index, -1 */
	struct cp_entry *cp;
	size_t ncp, cp_cap;
	uint64_t work;
	char why[256];
};

struct rd {
	const uint8_t *p, *end;
	bool bad;
};

static int fail(struct jfr *j, const char *what)
{
	if (!j->why[0])
		snprintf(j->why, sizeof(j->why), "JFR: %s", what);
	return -EINVAL;
}

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;

	for (int i = 0; i < 9; i++) {
		uint8_t b;

		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		b = *r->p++;
		if (i == 8)
			return v | (uint64_t)b << 56;
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80))
			return v;
	}
	return v;
}

static uint8_t rd_u8(struct rd *r)
{
	if (r->p >= r->end) {
		r->bad = true;
		return 0;
	}
	return *r->p++;
}

static void rd_skip(struct rd *r, uint64_t n)
{
	if (n > (uint64_t)(r->end - r->p)) {
		r->bad = true;
		r->p = r->end;
		return;
	}
	r->p += n;
}

/* A count of things each at least min_size bytes: no more than the bytes left hold. */
static uint64_t rd_count(struct rd *r, uint64_t max, size_t min_size)
{
	uint64_t n = rd_varint(r);

	if (n > max || (min_size && n > (uint64_t)(r->end - r->p) / min_size))
		r->bad = true;
	return r->bad ? 0 : n;
}

static bool spend(struct jfr *j, struct rd *r)
{
	if (++j->work > JFR_MAX_WORK)
		r->bad = true;
	return !r->bad;
}

static int cmp_cp(const void *a, const void *b)
{
	const struct cp_entry *x = a, *y = b;

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* The pools are sorted once indexed (parse_chunk). */
static const struct cp_entry *cp_find(const struct jfr *j, uint64_t type, uint64_t key)
{
	const struct cp_entry k = { .type = type, .key = key };

	return j->ncp ? bsearch(&k, j->cp, j->ncp, sizeof(k), cmp_cp) : NULL;
}

static int cmp_class_id(const void *a, const void *b)
{
	const struct class_id *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int class_index(const struct jfr *j, uint64_t id)
{
	const struct class_id key = { .id = id }, *c = j->nclasses ?
		bsearch(&key, j->by_id, j->nclasses, sizeof(key), cmp_class_id) : NULL;

	return c ? c->index : -1;
}

static int class_named(const struct jfr *j, const char *name)
{
	for (size_t i = 0; i < j->nclasses; i++)
		if (!strcmp(j->classes[i].name, name))
			return i;
	return -1;
}

/* What rd_string does with a reference to the pool of strings (encoding 2). */
enum { STR_NO_REF = -1, /* refused: the metadata's strings */
       STR_SKIP = -2,   /* read past, not resolved */
       STR_RESOLVE = 0 };

/* A string value into out (NUL-terminated, cut at size; NULL as ""). */
static void rd_string(struct jfr *j, struct rd *r, int refs, char *out, size_t size)
{
	uint8_t enc = rd_u8(r);
	size_t n = 0;
	uint64_t len;

	out[0] = 0;
	switch (enc) {
	case 0: /* null */
	case 1: /* "" */
		return;
	case 2: { /* a constant pool reference */
		const struct cp_entry *e;
		struct rd s;

		len = rd_varint(r);
		if (refs == STR_NO_REF)
			r->bad = true;
		if (refs != STR_RESOLVE || j->string_cls < 0 || r->bad)
			return;
		e = cp_find(j, j->classes[j->string_cls].id, len);
		if (!e)
			return; /* an unknown string: "" */
		s = (struct rd){ .p = j->chunk + e->off, .end = j->chunk + j->chunk_len };
		rd_string(j, &s, STR_NO_REF, out, size); /* no reference to a reference */
		if (s.bad)
			out[0] = 0;
		return;
	}
	case 3: /* UTF-8 */
	case 5: /* Latin-1: kept as its bytes, which ASCII names are */
		len = rd_count(r, UINT32_MAX, 1);
		n = len < size - 1 ? len : size - 1;
		if (!r->bad)
			memcpy(out, r->p, n);
		rd_skip(r, len);
		break;
	case 4: /* UTF-16 units, each a varint: ASCII kept, the rest '?' */
		len = rd_count(r, UINT32_MAX, 1);
		for (uint64_t i = 0; i < len && !r->bad; i++) {
			uint64_t c = rd_varint(r);

			if (n < size - 1)
				out[n++] = c < 0x80 && c >= 0x20 ? (char)c : '?';
		}
		break;
	default:
		r->bad = true;
		return;
	}
	out[r->bad ? 0 : n] = 0;
}

static void skip_value(struct jfr *j, struct rd *r, int cls, int depth);

static void skip_one(struct jfr *j, struct rd *r, const struct field *f, int depth)
{
	if (f->cp)
		rd_varint(r);
	else
		skip_value(j, r, f->cls, depth + 1);
}

static void skip_field(struct jfr *j, struct rd *r, const struct field *f, int depth)
{
	uint64_t n;

	if (!f->array) {
		skip_one(j, r, f, depth);
		return;
	}
	n = rd_count(r, JFR_MAX_ARRAY, 0);
	for (uint64_t i = 0; i < n && spend(j, r); i++)
		skip_one(j, r, f, depth);
}

static void skip_value(struct jfr *j, struct rd *r, int cls, int depth)
{
	const struct cls *c = &j->classes[cls];
	char scratch[2];

	if (depth > JFR_MAX_DEPTH || !spend(j, r)) {
		r->bad = true;
		return;
	}
	switch (c->prim) {
	case P_BOOLEAN:
	case P_BYTE:
		rd_skip(r, 1);
		return;
	case P_CHAR:
	case P_SHORT:
	case P_INT:
	case P_LONG:
		rd_varint(r);
		return;
	case P_FLOAT:
		rd_skip(r, 4);
		return;
	case P_DOUBLE:
		rd_skip(r, 8);
		return;
	case P_STRING:
		rd_string(j, r, STR_SKIP, scratch, sizeof(scratch));
		return;
	case P_CLASS:
		break;
	}
	for (uint32_t i = 0; i < c->nfields && !r->bad; i++)
		skip_field(j, r, &c->fields[i], depth);
}

/* ---- metadata ------------------------------------------------------------------------- */

static const char *attr(const struct jfr *j, const uint64_t (*attrs)[2], uint64_t n,
			const char *key)
{
	for (uint64_t i = 0; i < n; i++)
		if (!strcmp(j->strings[attrs[i][0]], key))
			return j->strings[attrs[i][1]];
	return NULL;
}

static const struct {
	const char *name;
	enum prim prim;
} prims[] = {
	{ "boolean", P_BOOLEAN }, { "byte", P_BYTE }, { "char", P_CHAR }, { "short", P_SHORT },
	{ "int", P_INT }, { "long", P_LONG }, { "float", P_FLOAT }, { "double", P_DOUBLE },
	{ "java.lang.String", P_STRING },
};

static int add_class(struct jfr *j, const char *id, const char *name)
{
	struct cls *c, *bigger;

	if (!id || !name || j->nclasses == JFR_MAX_CLASSES)
		return fail(j, "a class without id or name, or too many classes");
	bigger = realloc(j->classes, (j->nclasses + 1) * sizeof(*j->classes));
	if (!bigger)
		return -ENOMEM;
	j->classes = bigger;
	c = &j->classes[j->nclasses++];
	*c = (struct cls){ .id = strtoull(id, NULL, 10), .name = name };
	for (size_t i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
		if (!strcmp(name, prims[i].name))
			c->prim = prims[i].prim;
	return 0;
}

static int add_field(struct jfr *j, struct cls *c, const uint64_t (*attrs)[2], uint64_t n)
{
	const char *name = attr(j, attrs, n, "name"), *type = attr(j, attrs, n, "class");
	const char *cp = attr(j, attrs, n, "constantPool"), *dim = attr(j, attrs, n, "dimension");
	struct field *bigger;

	if (!name || !type || c->nfields == JFR_MAX_FIELDS)
		return fail(j, "a field without name or class, or too many fields");
	bigger = realloc(c->fields, (c->nfields + 1) * sizeof(*c->fields));
	if (!bigger)
		return -ENOMEM;
	c->fields = bigger;
	c->fields[c->nfields++] = (struct field){
		.type_id = strtoull(type, NULL, 10), .name = name,
		.cp = cp && !strcmp(cp, "true"), .array = dim && strcmp(dim, "0"),
	};
	return 0;
}

/* An element: name, attributes, children. A class's fields are its `field` children. */
static int parse_element(struct jfr *j, struct rd *r, int depth, int cls)
{
	uint64_t (*attrs)[2] = NULL, name, nattrs, nchildren;
	const char *ename;
	int err = 0;

	if (depth > JFR_MAX_DEPTH)
		return fail(j, "metadata nested too deep");
	name = rd_varint(r);
	nattrs = rd_count(r, 1024, 2);
	if (r->bad || name >= j->nstrings)
		return fail(j, "metadata element out of bounds");
	attrs = calloc(nattrs ? nattrs : 1, sizeof(*attrs));
	if (!attrs)
		return -ENOMEM;
	for (uint64_t i = 0; i < nattrs; i++) {
		attrs[i][0] = rd_varint(r);
		attrs[i][1] = rd_varint(r);
		if (r->bad || attrs[i][0] >= j->nstrings || attrs[i][1] >= j->nstrings) {
			err = fail(j, "metadata attribute out of bounds");
			goto out;
		}
	}
	ename = j->strings[name];
	if (!strcmp(ename, "class")) {
		err = add_class(j, attr(j, attrs, nattrs, "id"), attr(j, attrs, nattrs, "name"));
		cls = j->nclasses - 1;
	} else if (!strcmp(ename, "field") && cls >= 0 && depth == 3) {
		err = add_field(j, &j->classes[cls], attrs, nattrs);
	}
	nchildren = rd_count(r, UINT32_MAX, 3);
	for (uint64_t i = 0; !err && i < nchildren; i++)
		err = parse_element(j, r, depth + 1, cls);
	if (!err && r->bad)
		err = fail(j, "metadata truncated");
out:
	free(attrs);
	return err;
}

static int parse_metadata(struct jfr *j, size_t off)
{
	struct rd r = { .p = j->chunk + off, .end = j->chunk + j->chunk_len };
	uint64_t size = rd_varint(&r), n;
	int err;

	if (r.bad || size > j->chunk_len - off || rd_varint(&r) != 0)
		return fail(j, "the metadata offset is not a metadata event");
	r.end = j->chunk + off + size;
	rd_varint(&r); /* start */
	rd_varint(&r); /* duration */
	rd_varint(&r); /* metadata id */
	n = rd_count(&r, UINT32_MAX, 1);
	if (r.bad)
		return fail(j, "metadata truncated");
	j->strings = calloc(n ? n : 1, sizeof(*j->strings));
	if (!j->strings)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		char s[JFR_NAME_MAX];

		rd_string(j, &r, STR_NO_REF, s, sizeof(s));
		if (r.bad)
			return fail(j, "a metadata string is malformed");
		j->strings[i] = strdup(s);
		if (!j->strings[i])
			return -ENOMEM;
		j->nstrings = i + 1;
	}
	err = parse_element(j, &r, 0, -1);
	if (err)
		return err;
	j->by_id = calloc(j->nclasses ? j->nclasses : 1, sizeof(*j->by_id));
	if (!j->by_id)
		return -ENOMEM;
	for (size_t c = 0; c < j->nclasses; c++)
		j->by_id[c] = (struct class_id){ .id = j->classes[c].id, .index = c };
	qsort(j->by_id, j->nclasses, sizeof(*j->by_id), cmp_class_id);
	j->string_cls = class_named(j, "java.lang.String");
	for (size_t c = 0; c < j->nclasses; c++)
		for (uint32_t f = 0; f < j->classes[c].nfields; f++) {
			struct field *fd = &j->classes[c].fields[f];

			fd->cls = class_index(j, fd->type_id);
			if (fd->cls < 0)
				return fail(j, "a field of a type the metadata does not declare");
		}
	return 0;
}

/* ---- constant pools ------------------------------------------------------------------- */

static int parse_pool(struct jfr *j, struct rd *r)
{
	uint64_t npools;

	rd_varint(r); /* start */
	rd_varint(r); /* duration */
	rd_varint(r); /* delta to the previous pool */
	rd_u8(r);     /* flush */
	npools = rd_count(r, UINT32_MAX, 2);
	for (uint64_t p = 0; p < npools && !r->bad; p++) {
		uint64_t type = rd_varint(r), n = rd_count(r, UINT32_MAX, 1);
		int cls = class_index(j, type);

		if (cls < 0)
			return fail(j, "a constant pool of a type the metadata does not declare");
		for (uint64_t i = 0; i < n && !r->bad; i++) {
			struct cp_entry *e;

			if (j->ncp == j->cp_cap) {
				size_t cap = j->cp_cap ? 2 * j->cp_cap : 1024;
				struct cp_entry *bigger = realloc(j->cp, cap * sizeof(*bigger));

				if (!bigger)
					return -ENOMEM;
				j->cp = bigger;
				j->cp_cap = cap;
			}
			e = &j->cp[j->ncp++];
			e->type = type;
			e->key = rd_varint(r);
			e->off = r->p - j->chunk;
			skip_value(j, r, cls, 0);
		}
	}
	return r->bad ? fail(j, "a constant pool is malformed") : 0;
}


/* ---- values through the pools --------------------------------------------------------- */

static int field_index(const struct cls *c, const char *name)
{
	for (uint32_t i = 0; i < c->nfields; i++)
		if (!strcmp(c->fields[i].name, name))
			return i;
	return -1;
}

/* Positions r at field `name` of the value of class cls at r; NULL when it has none. */
static const struct field *seek_field(struct jfr *j, struct rd *r, int cls, const char *name)
{
	const struct cls *c = &j->classes[cls];
	int f = field_index(c, name);

	if (f < 0 || c->prim != P_CLASS)
		return NULL;
	for (int i = 0; i < f && !r->bad; i++)
		skip_field(j, r, &c->fields[i], 0);
	return r->bad ? NULL : &c->fields[f];
}

/* The object one (non-array) field refers to: *cls and a reader at its value. -ENOENT for
 * a null or unknown reference. */
static int deref(struct jfr *j, struct rd *r, const struct field *f, int *cls, struct rd *out)
{
	*cls = f->cls;
	if (!f->cp) {
		*out = *r;
		return 0;
	}
	const struct cp_entry *e = cp_find(j, f->type_id, rd_varint(r));

	if (!e || r->bad)
		return -ENOENT;
	*out = (struct rd){ .p = j->chunk + e->off, .end = j->chunk + j->chunk_len };
	return 0;
}

/* Follows a path of field names from the value at r (class cls) to the object at its end. */
static int follow(struct jfr *j, struct rd r, int cls, const char *const *path, int *out_cls,
		  struct rd *out)
{
	for (; *path; path++) {
		const struct field *f = seek_field(j, &r, cls, *path);

		if (!f || f->array || deref(j, &r, f, &cls, &r))
			return -ENOENT;
	}
	*out_cls = cls;
	*out = r;
	return 0;
}

/* The string field `name` of the object at r, through the pools. */
static int string_at(struct jfr *j, struct rd r, int cls, const char *const *path,
		     char *out, size_t size)
{
	struct rd s;
	int c;

	out[0] = 0;
	if (follow(j, r, cls, path, &c, &s) || j->classes[c].prim != P_STRING)
		return -ENOENT;
	rd_string(j, &s, STR_RESOLVE, out, size);
	return s.bad ? -ENOENT : 0;
}

/* A frame's name: package.Class.method. */
static void frame_name(struct jfr *j, struct rd frame, int frame_cls, char *out, size_t size)
{
	static const char *const class_name[] = { "method", "type", "name", "string", NULL };
	static const char *const method_name[] = { "method", "name", "string", NULL };
	char method[JFR_NAME_MAX];
	size_t n;

	if (string_at(j, frame, frame_cls, class_name, out, size))
		snprintf(out, size, "[unknown class]");
	for (char *c = out; *c; c++)
		if (*c == '/')
			*c = '.';
	if (string_at(j, frame, frame_cls, method_name, method, sizeof(method)))
		snprintf(method, sizeof(method), "[unknown]");
	/* class.method, cut at size */
	n = strlen(out);
	if (n < size - 1)
		out[n++] = '.';
	for (const char *m = method; *m && n < size - 1; m++)
		out[n++] = *m;
	out[n] = 0;
}

/* The stack trace an event's field stackTrace names, root first under app, into ids. */
static int resolve_stack(struct jfr *j, struct rd ev, int ev_cls, struct profile *p,
			 const char *app, uint32_t *ids, size_t *depth)
{
	static const char *const path[] = { "stackTrace", NULL };
	const struct field *frames, *tf;
	struct rd st, t;
	uint64_t n;
	bool truncated = false;
	int st_cls, err;
	size_t d = 0, first, keep;

	err = profile_frame_id(p, app, &ids[d++]);
	if (!err && follow(j, ev, ev_cls, path, &st_cls, &st)) {
		/* no stack: counted all the same, as the event says */
		err = profile_frame_id(p, "[no stack]", &ids[d++]);
		*depth = d;
		return err;
	}
	t = st;
	tf = seek_field(j, &t, st_cls, "truncated");
	if (tf && !tf->cp && !tf->array && j->classes[tf->cls].prim == P_BOOLEAN)
		truncated = rd_u8(&t);
	frames = seek_field(j, &st, st_cls, "frames");
	if (!frames || !frames->array)
		return fail(j, "a stack trace without frames");
	n = rd_count(&st, JFR_MAX_ARRAY, 0);
	if (truncated || n > JFR_MAX_FRAMES - 2)
		err = profile_frame_id(p, "[truncated]", &ids[d++]);
	/* frames are leaf first: each is read in order, named into place from the end */
	first = d;
	keep = n < JFR_MAX_FRAMES - 2 ? n : JFR_MAX_FRAMES - 2;

	for (uint64_t i = 0; !err && i < n && spend(j, &st); i++) {
		char name[JFR_NAME_MAX];
		struct rd fr;
		int fr_cls;

		if (deref(j, &st, frames, &fr_cls, &fr)) {
			snprintf(name, sizeof(name), "[unknown]");
		} else {
			frame_name(j, fr, fr_cls, name, sizeof(name));
			if (!frames->cp) /* inline: the next frame follows it */
				skip_value(j, &st, fr_cls, 0);
		}
		if (i < keep)
			err = profile_frame_id(p, name, &ids[first + keep - 1 - i]);
	}
	if (st.bad)
		return fail(j, "a stack trace is malformed");
	*depth = first + keep;
	return err;
}

/* Stacks already named in one profile, by their constant pool key: a recording refers to a
 * few thousand stacks from many more events. */
struct stack_cache {
	uint64_t key;
	uint32_t depth;
	uint32_t *ids;
	UT_hash_handle hh;
};

static void stack_cache_free(struct stack_cache **cache)
{
	struct stack_cache *c, *tmp;

	HASH_ITER(hh, *cache, c, tmp) {
		HASH_DEL(*cache, c);
		free(c);
	}
}

static int event_stack(struct jfr *j, struct rd ev, int ev_cls, struct stack_cache **cache,
		       struct profile *p, const char *app, uint32_t *ids, size_t *depth)
{
	struct rd t = ev;
	const struct field *f = seek_field(j, &t, ev_cls, "stackTrace");
	struct stack_cache *c;
	uint64_t key;
	int err;

	if (!f || !f->cp || f->array)
		return resolve_stack(j, ev, ev_cls, p, app, ids, depth);
	key = rd_varint(&t);
	HASH_FIND(hh, *cache, &key, sizeof(key), c);
	if (c) {
		memcpy(ids, c->ids, c->depth * sizeof(*ids));
		*depth = c->depth;
		return 0;
	}
	err = resolve_stack(j, ev, ev_cls, p, app, ids, depth);
	if (err)
		return err;
	c = malloc(sizeof(*c) + *depth * sizeof(*ids));
	if (!c)
		return -ENOMEM;
	*c = (struct stack_cache){ .key = key, .depth = *depth, .ids = (uint32_t *)(c + 1) };
	memcpy(c->ids, ids, *depth * sizeof(*ids));
	HASH_ADD(hh, *cache, key, sizeof(c->key), c);
	return 0;
}

/* The integer field name of an event, or 0. */
static uint64_t event_long(struct jfr *j, struct rd ev, int cls, const char *name)
{
	const struct field *f = seek_field(j, &ev, cls, name);

	return f && !f->cp && !f->array && j->classes[f->cls].prim == P_LONG ? rd_varint(&ev) : 0;
}

struct kept_event {
	const char *name;
	int cls;
};

static int parse_events(struct jfr *j, struct pyro_push *ps, const char *app, int64_t sec,
			uint64_t *kept)
{
	enum { CPU, NEW_TLAB, OUTSIDE_TLAB, ALLOC_SAMPLE, NR };
	/* the bytes each allocation event stands for */
	static const char *const bytes_field[NR] = {
		[NEW_TLAB] = "tlabSize", [OUTSIDE_TLAB] = "allocationSize",
		[ALLOC_SAMPLE] = "weight",
	};
	/* by profile: cpu, alloc_objects, alloc */
	struct stack_cache *cache[3] = {0};
	struct kept_event ev[NR] = {
		[CPU] = { "jdk.ExecutionSample" }, [NEW_TLAB] = { "jdk.ObjectAllocationInNewTLAB" },
		[OUTSIDE_TLAB] = { "jdk.ObjectAllocationOutsideTLAB" },
		[ALLOC_SAMPLE] = { "jdk.ObjectAllocationSample" }, /* JDK 16+, throttled */
	};
	struct rd r = { .p = j->chunk + JFR_HEADER, .end = j->chunk + j->chunk_len };
	uint32_t ids[JFR_MAX_FRAMES];
	int err = 0;

	for (int i = 0; i < NR; i++)
		ev[i].cls = class_named(j, ev[i].name);
	while (!err && r.p < r.end) {
		const uint8_t *start = r.p;
		uint64_t size = rd_varint(&r), type;
		struct rd body;
		size_t depth;
		int k;

		if (r.bad || size < 2 || size > (uint64_t)(r.end - start)) {
			err = fail(j, "an event's size runs past its chunk");
			break;
		}
		body = (struct rd){ .p = r.p, .end = start + size };
		type = rd_varint(&body);
		r.p = start + size;
		for (k = 0; k < NR; k++)
			if (ev[k].cls >= 0 && j->classes[ev[k].cls].id == type)
				break;
		if (k == NR || body.bad)
			continue;
		if (k == CPU) {
			struct profile *p = pyro_push_profile(ps, TARGET_PROFILE_CPU);

			err = p ? event_stack(j, body, ev[k].cls, &cache[0], p, app, ids, &depth) :
				  -ENOMEM;
			if (!err)
				err = profile_add(p, sec, ids, depth, 1);
		} else {
			uint64_t bytes = event_long(j, body, ev[k].cls, bytes_field[k]);
			struct profile *b = pyro_push_profile(ps, TARGET_PROFILE_JVM_ALLOC);
			struct profile *o = pyro_push_profile(ps, TARGET_PROFILE_JVM_ALLOC_OBJECTS);

			err = b && o ? event_stack(j, body, ev[k].cls, &cache[1], o, app, ids,
						   &depth) : -ENOMEM;
			if (!err)
				err = profile_add(o, sec, ids, depth, 1);
			if (!err && bytes)
				err = event_stack(j, body, ev[k].cls, &cache[2], b, app, ids,
						  &depth);
			if (!err && bytes)
				err = profile_add(b, sec, ids, depth, bytes);
		}
		(*kept)++;
	}
	for (int i = 0; i < 3; i++)
		stack_cache_free(&cache[i]);
	return err;
}

static void jfr_reset(struct jfr *j)
{
	for (size_t i = 0; i < j->nstrings; i++)
		free(j->strings[i]);
	free(j->strings);
	for (size_t i = 0; i < j->nclasses; i++)
		free(j->classes[i].fields);
	free(j->classes);
	free(j->cp);
	free(j->by_id);
	j->strings = NULL;
	j->classes = NULL;
	j->cp = NULL;
	j->by_id = NULL;
	j->nstrings = j->nclasses = j->ncp = j->cp_cap = 0;
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static int parse_chunk(struct jfr *j, struct pyro_push *ps, const char *app, int64_t sec,
		       uint64_t *kept)
{
	uint64_t meta = be64(j->chunk + 24);
	uint32_t features = (uint32_t)j->chunk[64] << 24 | j->chunk[65] << 16 |
			    j->chunk[66] << 8 | j->chunk[67];
	struct rd r = { .p = j->chunk + JFR_HEADER, .end = j->chunk + j->chunk_len };
	int err;

	if (j->chunk[4] != 0 || j->chunk[5] != 2)
		return fail(j, "only version 2 recordings (JDK 11 and later, async-profiler)");
	if (!(features & 1))
		return fail(j, "a chunk without compressed integers");
	if (meta < JFR_HEADER || meta >= j->chunk_len)
		return fail(j, "the metadata offset is outside its chunk");
	err = parse_metadata(j, meta);
	/* every constant pool, in the order written: a later entry of a key is as good */
	while (!err && r.p < r.end) {
		const uint8_t *start = r.p;
		uint64_t size = rd_varint(&r);
		struct rd body;

		if (r.bad || size < 2 || size > (uint64_t)(r.end - start))
			return fail(j, "an event's size runs past its chunk");
		body = (struct rd){ .p = r.p, .end = start + size };
		if (rd_varint(&body) == 1)
			err = parse_pool(j, &body);
		r.p = start + size;
	}
	if (err)
		return err;
	if (j->ncp)
		qsort(j->cp, j->ncp, sizeof(*j->cp), cmp_cp);
	return parse_events(j, ps, app, sec, kept);
}

int jfr_parse(struct pyro_push *ps, const char *app, const uint8_t *buf, size_t len,
	      int64_t sec, char *why, size_t why_size)
{
	struct jfr j = { .string_cls = -1 };
	uint64_t kept = 0;
	size_t off = 0;
	int err = 0;

	if (len < JFR_HEADER || memcmp(buf, "FLR", 4)) {
		snprintf(why, why_size, "not a JFR recording (no FLR magic)");
		return -EINVAL;
	}
	while (!err && off < len) {
		uint64_t size;

		if (len - off < JFR_HEADER || memcmp(buf + off, "FLR", 4)) {
			err = fail(&j, "a chunk header is truncated or lacks its magic");
			break;
		}
		size = be64(buf + off + 8);
		if (size < JFR_HEADER || size > len - off) {
			err = fail(&j, "a chunk's size runs past the recording");
			break;
		}
		j.chunk = buf + off;
		j.chunk_len = size;
		err = parse_chunk(&j, ps, app, sec, &kept);
		jfr_reset(&j);
		off += size;
	}
	if (!err && !kept) {
		snprintf(j.why, sizeof(j.why), "JFR: no jdk.ExecutionSample nor allocation event");
		err = -ENOTSUP;
	}
	if (err == -EINVAL || err == -ENOTSUP)
		snprintf(why, why_size, "%s", j.why);
	jfr_reset(&j);
	return err;
}
