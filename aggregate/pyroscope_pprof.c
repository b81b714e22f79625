/* pprof profiles (gzip'd or not) into Aperture's profiles, for Pyroscope's push APIs. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/pyroscope.h"
#include "fs/tree.h"
#include "sync/wire.h"
#include "views/profile.pb-c.h"

#define PYRO_MAX_PPROF (64u << 20) /* decompressed */

struct profile *pyro_push_profile(struct pyro_push *ps, enum target_profile t)
{
	if (!ps->p[t])
		ps->p[t] = profile_new(tree_profiles[t].unit);
	return ps->p[t];
}

int pyro_gunzip(const uint8_t **body, size_t *len, size_t max, uint8_t **raw, char *why,
		size_t why_size)
{
	size_t raw_len;
	int err;

	*raw = NULL;
	if (*len < 2 || (*body)[0] != 0x1f || (*body)[1] != 0x8b)
		return 0;
	err = wire_gunzip(*body, *len, max, raw, &raw_len, why, why_size);
	if (!err) {
		*body = *raw;
		*len = raw_len;
	}
	return err;
}

void pyro_push_free(struct pyro_push *ps)
{
	for (int t = 0; t < TARGET_PROFILE_NR; t++)
		if (ps->p[t])
			profile_unref(ps->p[t]);
}

/* pprof sample types Aperture has a type for; scale divides (nanoseconds to microseconds). */
static const struct {
	const char *type;
	enum target_profile to;
	int64_t scale;
} pprof_types[] = {
	{ "samples", TARGET_PROFILE_CPU, 1 },
	{ "alloc_space", TARGET_PROFILE_JVM_ALLOC, 1 },
	{ "alloc_objects", TARGET_PROFILE_JVM_ALLOC_OBJECTS, 1 },
	{ "delay", TARGET_PROFILE_LOCKS, 1000 },
};

/* Locations and functions by id: both start with their uint64_t id after the base. */
static const void *find_id(void *const *sorted, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		uint64_t m = *(const uint64_t *)((const char *)sorted[mid] +
						 sizeof(ProtobufCMessage));

		if (m == id)
			return sorted[mid];
		if (m < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int cmp_location(const void *a, const void *b)
{
	const Perftools__Profiles__Location *x = *(void *const *)a, *y = *(void *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_function(const void *a, const void *b)
{
	const Perftools__Profiles__Function *x = *(void *const *)a, *y = *(void *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static const char *pp_string(const Perftools__Profiles__Profile *pp, int64_t i)
{
	return i >= 0 && (size_t)i < pp->n_string_table ? pp->string_table[i] : "";
}

/* One sample's frames, root first under the app's frame, into ids (cap of them). */
static int sample_frames(const Perftools__Profiles__Profile *pp, const Perftools__Profiles__Sample *sm,
			 struct profile *p, const char *app, uint32_t *ids, size_t cap,
			 size_t *depth)
{
	size_t n = 0;
	int err = profile_frame_id(p, app, &ids[n++]);

	/* location_id is leaf first; a location's lines are callee first, caller last. */
	for (size_t i = sm->n_location_id; !err && i-- > 0;) {
		const Perftools__Profiles__Location *loc =
			find_id((void *const *)pp->location, pp->n_location, sm->location_id[i]);
		char addr[32];

		if (!loc)
			return -EINVAL;
		if (!loc->n_line) {
			snprintf(addr, sizeof(addr), "0x%" PRIx64, loc->address);
			if (n < cap)
				err = profile_frame_id(p, addr, &ids[n++]);
			continue;
		}
		for (size_t l = loc->n_line; !err && l-- > 0;) {
			const Perftools__Profiles__Function *f =
				find_id((void *const *)pp->function, pp->n_function,
					loc->line[l]->function_id);
			const char *name = f ? pp_string(pp, f->name) : "";

			if (n < cap)
				err = profile_frame_id(p, *name ? name : "[unknown]", &ids[n++]);
		}
	}
	*depth = n;
	return err;
}

int pyro_parse_pprof(struct pyro_push *ps, const char *app, const uint8_t *body, size_t len,
		     int64_t sec, int64_t *time_s, char *why, size_t why_size)
{
	enum { MAX_DEPTH = 512 };
	Perftools__Profiles__Profile *pp;
	uint8_t *raw = NULL;
	int col[TARGET_PROFILE_NR], found = 0, err = 0;
	uint32_t ids[MAX_DEPTH];

	*time_s = 0;
	err = pyro_gunzip(&body, &len, PYRO_MAX_PPROF, &raw, why, why_size);
	if (err)
		return err;
	pp = perftools__profiles__profile__unpack(NULL, len, body);
	free(raw);
	if (!pp) {
		snprintf(why, why_size, "the body is not a pprof profile (gzip'd or not)");
		return -EINVAL;
	}
	*time_s = pp->time_nanos > 0 ? pp->time_nanos / 1000000000 : 0;
	for (int t = 0; t < TARGET_PROFILE_NR; t++)
		col[t] = -1;
	for (size_t i = 0; i < pp->n_sample_type; i++) {
		const char *type = pp_string(pp, pp->sample_type[i]->type);

		for (size_t k = 0; k < sizeof(pprof_types) / sizeof(pprof_types[0]); k++)
			if (!strcmp(type, pprof_types[k].type) && col[pprof_types[k].to] < 0) {
				col[pprof_types[k].to] = i;
				found++;
			}
	}
	if (!found) {
		snprintf(why, why_size, "no sample type Aperture keeps (samples, alloc_space, "
			 "alloc_objects, delay)");
		err = -ENOTSUP;
		goto out;
	}
	if (pp->n_location) /* none: NULL, which qsort may not be given */
		qsort(pp->location, pp->n_location, sizeof(*pp->location), cmp_location);
	if (pp->n_function)
		qsort(pp->function, pp->n_function, sizeof(*pp->function), cmp_function);
	for (int t = 0; !err && t < TARGET_PROFILE_NR; t++) {
		struct profile *p;
		int64_t scale = 1;

		if (col[t] < 0)
			continue;
		for (size_t k = 0; k < sizeof(pprof_types) / sizeof(pprof_types[0]); k++)
			if (pprof_types[k].to == (enum target_profile)t)
				scale = pprof_types[k].scale;
		p = pyro_push_profile(ps, t);
		if (!p) {
			err = -ENOMEM;
			break;
		}
		for (size_t i = 0; !err && i < pp->n_sample; i++) {
			const Perftools__Profiles__Sample *sm = pp->sample[i];
			int64_t v = (size_t)col[t] < sm->n_value ? sm->value[col[t]] / scale : 0;
			size_t depth;

			if (v <= 0)
				continue;
			err = sample_frames(pp, sm, p, app, ids, MAX_DEPTH, &depth);
			if (err == -EINVAL)
				snprintf(why, why_size, "sample %zu names a location the profile "
					 "does not have", i);
			if (!err)
				err = profile_add(p, sec, ids, depth, v);
		}
	}
out:
	perftools__profiles__profile__free_unpacked(pp, NULL);
	return err;
}

