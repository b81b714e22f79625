// SPDX-License-Identifier: GPL-2.0
/* pprof: a gzip'd profile.proto, encoded by protobuf-c from views/profile.proto.
 *
 * One function per frame name (start_line: where it is defined), one location per frame name
 * and source line executing in it (Line.line; 0 unknown), one sample per stack and lines,
 * one mapping per module the frames' infos name (with its build id). The thread-name frame becomes a "thread" label on the sample,
 * as pprof's own profiles label threads, rather than a function. Samples carry the count
 * and, for sampled profiles, the count times the period ("cpu"/"nanoseconds"), as Go's cpu
 * profiles do, so pprof shows time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <zlib.h>

#include "views/profile.pb-c.h"
#include "views/views.h"
#include "views/writer.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

struct str_entry {
	UT_hash_handle hh;
	int64_t index;
	char s[]; /* valid UTF-8: proto3 strings must be */
};

struct module_entry {
	UT_hash_handle hh;
	uint64_t id;
	const char *path;
};

struct location_key {
	uint32_t frame;
	uint32_t line;
};

struct location_entry {
	UT_hash_handle hh;
	struct location_key key;
	uint64_t id;
};

struct pprof {
	Profile p;
	struct str_entry *strs;
	struct module_entry *modules;
	ValueType types[2], period_type;
	ValueType *type_ptrs[2];
	Sample *samples;
	Sample **sample_ptrs;
	Label *labels;
	Label **label_ptrs;
	uint64_t *location_ids;
	int64_t *values;
	Mapping *mappings;
	Mapping **mapping_ptrs;
	/* Grown as locations are made; the pointers into them are set once all are made. */
	Location *locations;
	Location **location_ptrs;
	Line *lines;
	Line **line_ptrs;
	size_t locations_cap;
	struct location_entry *loc_index;
	Function *functions;
	Function **function_ptrs;
	uint64_t *func_of; /* frame id -> function id, 0 until used */
};

/* The index of s in the string table, added if new; -ENOMEM. */
static int64_t intern(struct pprof *b, const char *s)
{
	char *clean = utf8_clean(s), **table;
	struct str_entry *e;
	int64_t index;

	if (!clean)
		return -ENOMEM;
	HASH_FIND_STR(b->strs, clean, e);
	if (e) {
		index = e->index;
		goto out;
	}
	index = -ENOMEM;
	e = malloc(sizeof(*e) + strlen(clean) + 1);
	table = realloc(b->p.string_table, (b->p.n_string_table + 1) * sizeof(*table));
	if (table)
		b->p.string_table = table;
	if (!e || !table) {
		free(e);
		goto out;
	}
	strcpy(e->s, clean);
	index = e->index = b->p.n_string_table;
	table[b->p.n_string_table++] = e->s;
	HASH_ADD_STR(b->strs, s, e);
out:
	free(clean);
	return index;
}

static int64_t mapping_of(struct pprof *b, const struct frame_info *info)
{
	struct module_entry *m;
	Mapping *map;
	int64_t file, build_id = 0;

	if (!info || !info->module)
		return 0;
	HASH_FIND_STR(b->modules, info->module, m);
	if (m)
		return m->id;
	file = intern(b, info->module);
	if (info->build_id)
		build_id = intern(b, info->build_id);
	m = malloc(sizeof(*m));
	if (file < 0 || build_id < 0 || !m) {
		free(m);
		return -ENOMEM;
	}
	map = &b->mappings[b->p.n_mapping];
	perftools__profiles__mapping__init(map);
	map->id = b->p.n_mapping + 1;
	map->filename = file;
	map->build_id = build_id;
	map->has_functions = 1;
	map->has_filenames = info->file != NULL;
	b->mapping_ptrs[b->p.n_mapping++] = map;
	m->id = map->id;
	m->path = info->module;
	HASH_ADD_KEYPTR(hh, b->modules, m->path, strlen(m->path), m);
	return m->id;
}

/* The function of frame id, made on first use; -ENOMEM. */
static int64_t function_of(struct pprof *b, const struct profile_snapshot *s, uint32_t id)
{
	const struct frame_info *info = s->infos ? s->infos[id] : NULL;
	size_t n = b->p.n_function;
	int64_t name, file = 0;

	if (b->func_of[id])
		return b->func_of[id];
	name = intern(b, s->names[id]);
	if (info && info->file)
		file = intern(b, info->file);
	if (name < 0 || file < 0)
		return -ENOMEM;
	perftools__profiles__function__init(&b->functions[n]);
	b->functions[n].id = n + 1;
	b->functions[n].name = name;
	b->functions[n].system_name = name;
	b->functions[n].filename = file;
	b->functions[n].start_line = info ? info->line : 0;
	b->function_ptrs[n] = &b->functions[n];
	b->p.n_function = n + 1;
	return b->func_of[id] = n + 1;
}

static int grow_locations(struct pprof *b)
{
	size_t cap = b->locations_cap ? 2 * b->locations_cap : 256;
	Location *locations = reallocarray(b->locations, cap, sizeof(*locations));
	Line *lines;

	if (!locations)
		return -ENOMEM;
	b->locations = locations;
	lines = reallocarray(b->lines, cap, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	b->lines = lines;
	b->locations_cap = cap;
	return 0;
}

/* The location of frame id running line, made on first use; -ENOMEM. */
static int64_t location_of(struct pprof *b, const struct profile_snapshot *s, uint32_t id,
			   uint32_t line)
{
	const struct frame_info *info = s->infos ? s->infos[id] : NULL;
	struct location_key key = { .frame = id, .line = line };
	size_t n = b->p.n_location;
	struct location_entry *e;
	int64_t function, mapping;

	HASH_FIND(hh, b->loc_index, &key, sizeof(key), e);
	if (e)
		return e->id;
	function = function_of(b, s, id);
	mapping = mapping_of(b, info);
	if (function < 0 || mapping < 0)
		return -ENOMEM;
	if (n == b->locations_cap && grow_locations(b))
		return -ENOMEM;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = key;
	e->id = n + 1;
	HASH_ADD(hh, b->loc_index, key, sizeof(e->key), e);
	perftools__profiles__line__init(&b->lines[n]);
	b->lines[n].function_id = function;
	b->lines[n].line = line;
	perftools__profiles__location__init(&b->locations[n]);
	b->locations[n].id = n + 1;
	b->locations[n].mapping_id = mapping;
	b->locations[n].n_line = 1;
	b->p.n_location = n + 1;
	return e->id;
}

/* Points the locations at their lines, now that the arrays stop moving. */
static int link_locations(struct pprof *b)
{
	size_t n = b->p.n_location;

	b->location_ptrs = calloc(n ? n : 1, sizeof(*b->location_ptrs));
	b->line_ptrs = calloc(n ? n : 1, sizeof(*b->line_ptrs));
	if (!b->location_ptrs || !b->line_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		b->line_ptrs[i] = &b->lines[i];
		b->locations[i].line = &b->line_ptrs[i];
		b->location_ptrs[i] = &b->locations[i];
	}
	b->p.location = b->location_ptrs;
	return 0;
}

static int alloc_all(struct pprof *b, const struct profile_snapshot *s, size_t nstacks,
		     size_t nframes, int nvalues)
{
	size_t n = s->nnames ? s->nnames : 1, ns = nstacks ? nstacks : 1;

#define ALLOC(field, count) (b->field = calloc(count, sizeof(*b->field)))
	if (!ALLOC(samples, ns) || !ALLOC(sample_ptrs, ns) || !ALLOC(labels, ns) ||
	    !ALLOC(label_ptrs, ns) || !ALLOC(location_ids, nframes ? nframes : 1) ||
	    !ALLOC(values, ns * nvalues) || !ALLOC(mappings, n) || !ALLOC(mapping_ptrs, n) ||
	    !ALLOC(functions, n) || !ALLOC(function_ptrs, n) || !ALLOC(func_of, n))
		return -ENOMEM;
#undef ALLOC
	return 0;
}

static void free_all(struct pprof *b)
{
	struct str_entry *e, *etmp;
	struct module_entry *m, *mtmp;
	struct location_entry *l, *ltmp;

	HASH_ITER(hh, b->loc_index, l, ltmp) {
		HASH_DEL(b->loc_index, l);
		free(l);
	}
	HASH_ITER(hh, b->strs, e, etmp) {
		HASH_DEL(b->strs, e);
		free(e);
	}
	HASH_ITER(hh, b->modules, m, mtmp) {
		HASH_DEL(b->modules, m);
		free(m);
	}
	free(b->p.string_table);
	free(b->samples);
	free(b->sample_ptrs);
	free(b->labels);
	free(b->label_ptrs);
	free(b->location_ids);
	free(b->values);
	free(b->mappings);
	free(b->mapping_ptrs);
	free(b->locations);
	free(b->location_ptrs);
	free(b->lines);
	free(b->line_ptrs);
	free(b->functions);
	free(b->function_ptrs);
	free(b->func_of);
}

static int add_types(struct pprof *b, const struct profile_snapshot *s,
		     const struct view_meta *m)
{
	const char *unit = strcmp(s->unit, "samples") ? s->unit : "count";
	int64_t t = intern(b, m->sample_type ? m->sample_type : s->unit), u = intern(b, unit);

	if (t < 0 || u < 0)
		return -ENOMEM;
	b->p.n_sample_type = 1;
	b->p.sample_type = b->type_ptrs;
	perftools__profiles__value_type__init(&b->types[0]);
	b->types[0].type = t;
	b->types[0].unit = u;
	b->type_ptrs[0] = &b->types[0];
	if (!m->period_type)
		return 0;
	t = intern(b, m->period_type);
	u = intern(b, m->period_unit);
	if (t < 0 || u < 0)
		return -ENOMEM;
	perftools__profiles__value_type__init(&b->types[1]);
	b->types[1].type = t;
	b->types[1].unit = u;
	b->type_ptrs[1] = &b->types[1];
	b->p.n_sample_type = 2;
	b->period_type = b->types[1];
	b->p.period_type = &b->period_type;
	b->p.period = m->period;
	return 0;
}

/* One sample per stack of stacks, from snapshot s. */
static int add_samples(struct pprof *b, const struct profile_snapshot *s,
		       const struct profile_stack *stacks, size_t nstacks)
{
	uint64_t *loc = b->location_ids;
	int64_t *val = b->values, thread_key = intern(b, "thread"), id;
	size_t i, nv = b->p.n_sample_type;
	uint32_t j;

	if (thread_key < 0)
		return -ENOMEM;
	for (i = 0; i < nstacks; i++) {
		const struct profile_stack *st = &stacks[i];
		Sample *sm = &b->samples[i];

		perftools__profiles__sample__init(sm);
		sm->location_id = loc;
		for (j = st->depth; j-- > 1;) {
			id = location_of(b, s, st->frames[j], st->lines ? st->lines[j] : 0);
			if (id < 0)
				return -ENOMEM;
			*loc++ = id;
		}
		sm->n_location_id = loc - sm->location_id;
		sm->value = val;
		sm->n_value = nv;
		val[0] = st->count;
		if (nv > 1)
			val[1] = st->count * b->p.period;
		val += nv;
		perftools__profiles__label__init(&b->labels[i]);
		b->labels[i].key = thread_key;
		b->labels[i].str = intern(b, s->names[st->frames[0]]);
		if (b->labels[i].str < 0)
			return -ENOMEM;
		b->label_ptrs[i] = &b->labels[i];
		sm->label = &b->label_ptrs[i];
		sm->n_label = 1;
		b->sample_ptrs[i] = sm;
	}
	b->p.sample = b->sample_ptrs;
	b->p.n_sample = nstacks;
	b->p.function = b->function_ptrs;
	b->p.mapping = b->mapping_ptrs;
	return link_locations(b);
}

/* Compresses len bytes of data as one gzip member into out. */
static int write_gzip(const uint8_t *data, size_t len, FILE *out)
{
	unsigned char buf[65536];
	z_stream z = {0};
	int ret;

	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (uint8_t *)data;
	z.avail_in = len;
	do {
		z.next_out = buf;
		z.avail_out = sizeof(buf);
		ret = deflate(&z, Z_FINISH);
		fwrite(buf, 1, sizeof(buf) - z.avail_out, out);
	} while (ret == Z_OK);
	deflateEnd(&z);
	if (ret != Z_STREAM_END)
		return -EIO;
	return ferror(out) ? -EIO : 0;
}

int view_pprof(const struct profile_snapshot *s, const struct view_meta *m, FILE *out)
{
	struct pprof b = { .p = PERFTOOLS__PROFILES__PROFILE__INIT };
	uint8_t *packed = NULL;
	/* By stack and lines, unless the snapshot was made without them. */
	const struct profile_stack *stacks = s->nlined ? s->lined : s->stacks;
	size_t i, nstacks = s->nlined ? s->nlined : s->nstacks, nframes = 0, len;
	int err;

	for (i = 0; i < nstacks; i++)
		nframes += stacks[i].depth;
	err = alloc_all(&b, s, nstacks, nframes, m->period_type ? 2 : 1);
	if (!err && intern(&b, "") != 0)
		err = -ENOMEM;
	if (!err)
		err = add_types(&b, s, m);
	if (!err)
		err = add_samples(&b, s, stacks, nstacks);
	if (err)
		goto out;
	b.p.time_nanos = s->since * 1000000000;
	b.p.duration_nanos = (m->now > s->since ? m->now - s->since : 0) * 1000000000;
	len = perftools__profiles__profile__get_packed_size(&b.p);
	packed = malloc(len ? len : 1);
	if (!packed) {
		err = -ENOMEM;
		goto out;
	}
	perftools__profiles__profile__pack(&b.p, packed);
	err = write_gzip(packed, len, out);
out:
	free(packed);
	free_all(&b);
	return err;
}
