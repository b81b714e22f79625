/* Pyroscope's push APIs, so agents people already run (pyroscope-go, pyroscope-java, the npm
 * @pyroscope/nodejs client, Grafana Alloy) feed the aggregator:
 *
 *   POST /ingest?name=APP[.TYPE]{k=v,...}&from=UNIX&until=UNIX&format=folded|pprof|jfr
 *                &sampleRate=HZ&spyName=...
 *   POST /push.v1.PusherService/Push          (a PushRequest: aggregate/pyroscope_push.c)
 *
 * A push becomes one batch of the token's node (a node token, e.g. `<token> node pyroscope`),
 * applied through the same checks and store as a node's: each series (app name and labels) is
 * a target of that node with a made-up pid (a hash of the series, below 2^22 like a real one),
 * its comm and its `service` label the app name, so its profiles appear under
 * services/<app>/ beside Aperture's own. All of a push's counts go to its `from` second.
 * Stacks get the app's name as their first frame, where Aperture's have the thread's name.
 *
 * Profile types: folded bodies take theirs from the name's suffix (cpu, itimer, wall: cpu;
 * alloc_space: alloc; alloc_objects; mutex_duration, block_duration: locks); pprof bodies
 * from their sample types (samples: cpu; alloc_space; alloc_objects; delay: locks). In-use
 * memory, goroutines and plain counts have no Aperture type: 422. JFR recordings from their
 * events (aggregate/jfr.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "aggregate/aggregator.h"
#include "aggregate/jfr.h"
#include "aggregate/pyroscope.h"
#include "store/folded_parse.h"

#define PYRO_DEFAULT_HZ 100
#define PYRO_PID_SPACE ((1 << 22) - 1)

static const char *const suffixes[] = {
	"cpu", "itimer", "wall", "alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
	"mutex_count", "mutex_duration", "block_count", "block_duration", "lock_count",
	"lock_duration", "goroutines", "exceptions",
};

static char *trim(char *s)
{
	char *e;

	while (*s == ' ')
		s++;
	e = s + strlen(s);
	while (e > s && e[-1] == ' ')
		*--e = 0;
	return s;
}

/* APP[.SUFFIX]{k=v,...}: -EINVAL with why for what Pyroscope answers 400. */
static int parse_name(const char *name, struct pyro_series *s, char *why, size_t why_size)
{
	char *brace, *dot, *p, *next;

	*s = (struct pyro_series){ .suffix = "" };
	if (!name || !*name) {
		snprintf(why, why_size, "name is required: APP.TYPE{k=v,...}");
		return -EINVAL;
	}
	s->buf = strdup(name);
	if (!s->buf)
		return -ENOMEM;
	brace = strchr(s->buf, '{');
	if (brace) {
		size_t len = strlen(brace);

		if (brace[len - 1] != '}') {
			snprintf(why, why_size, "name %s: labels must end with }", name);
			return -EINVAL;
		}
		brace[len - 1] = 0;
		*brace++ = 0;
		for (p = brace; p && *p; p = next) {
			char *eq;

			next = strchr(p, ',');
			if (next)
				*next++ = 0;
			if (!*trim(p))
				continue;
			eq = strchr(p, '=');
			if (!eq || s->nlabels == PYRO_MAX_LABELS) {
				snprintf(why, why_size, "name %s: labels are k=v, at most %d", name,
					 PYRO_MAX_LABELS);
				return -EINVAL;
			}
			*eq = 0;
			s->keys[s->nlabels] = trim(p);
			s->values[s->nlabels++] = trim(eq + 1);
		}
	}
	s->app = trim(s->buf);
	dot = strrchr(s->buf, '.');
	for (size_t i = 0; dot && i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (!strcmp(dot + 1, suffixes[i])) {
			*dot = 0;
			s->suffix = suffixes[i];
		}
	if (!agg_valid_name(s->app)) {
		snprintf(why, why_size, "name %s: the app name must be a file name (no '/')", name);
		return -EINVAL;
	}
	return 0;
}

/* The made-up pid of a series: FNV-1a of its app and labels, 1..2^22-1. */
static pid_t series_pid(const struct pyro_series *s)
{
	uint64_t h = 1469598103934665603ULL;
	const char *parts[2 * PYRO_MAX_LABELS + 1];
	size_t n = 0;

	parts[n++] = s->app;
	for (size_t i = 0; i < s->nlabels; i++) {
		parts[n++] = s->keys[i];
		parts[n++] = s->values[i];
	}
	for (size_t i = 0; i < n; i++)
		for (const char *c = parts[i]; ; c++) {
			h = (h ^ (unsigned char)*c) * 1099511628211ULL;
			if (!*c)
				break;
		}
	return 1 + (pid_t)(h % PYRO_PID_SPACE);
}

/* Folded text, each line under the app's frame. */
static int parse_folded(struct pyro_push *ps, const struct pyro_series *s, enum target_profile t,
			const uint8_t *body, size_t len, int64_t sec, char *why, size_t why_size)
{
	struct profile *p = pyro_push_profile(ps, t);
	size_t applen = strlen(s->app), cap = len + 64, n = 0, bad = 0;
	char *text;
	int err;

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		if (body[i] == '\n')
			cap += applen + 1;
	text = malloc(cap + applen + 1);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < len;) {
		const uint8_t *nl = memchr(body + i, '\n', len - i);
		size_t l = nl ? (size_t)(nl - (body + i)) : len - i;

		if (l && !(l == 1 && body[i] == '\r')) {
			memcpy(text + n, s->app, applen);
			text[n + applen] = ';';
			n += applen + 1;
			memcpy(text + n, body + i, l);
			n += l;
			text[n++] = '\n';
		}
		i += l + 1;
	}
	err = folded_parse(p, text, n, sec, &bad);
	free(text);
	if (err == -EINVAL)
		snprintf(why, why_size, "folded line %zu: want frame;frame;... COUNT", bad);
	return err;
}

/* The batch of one push: one target, its profiles at one second. Everything it points to
 * lives in bt. */
struct batch_build {
	WireBatch b;
	Aperture__Sync__V1__Target target, *targets[1];
	Aperture__Sync__V1__Label labels[PYRO_MAX_LABELS + 1], *label_ptrs[PYRO_MAX_LABELS + 1];
	Aperture__Sync__V1__Profile profiles[TARGET_PROFILE_NR], *profile_ptrs[TARGET_PROFILE_NR];
	Aperture__Sync__V1__Second seconds[TARGET_PROFILE_NR], *second_ptrs[TARGET_PROFILE_NR];
	struct profile_snapshot *snaps[TARGET_PROFILE_NR];
	char **strings;
	Aperture__Sync__V1__Frame *frames, **frame_ptrs;
	Aperture__Sync__V1__Stack *stacks, **stack_ptrs;
	uint32_t *stack_frames, *second_stacks;
	uint64_t *second_counts;
	char boot_id[33], status[512];
};

static void batch_build_free(struct batch_build *bb)
{
	for (int t = 0; t < TARGET_PROFILE_NR; t++)
		profile_snapshot_free(bb->snaps[t]);
	free(bb->strings);
	free(bb->frames);
	free(bb->frame_ptrs);
	free(bb->stacks);
	free(bb->stack_ptrs);
	free(bb->stack_frames);
	free(bb->second_stacks);
	free(bb->second_counts);
}

static int batch_build(struct batch_build *bb, struct aggregator *g, const char *node,
		       const struct pyro_series *s, struct pyro_push *ps, int64_t sec, uint32_t period_ns,
		       const char *spy)
{
	size_t nnames = 0, nstacks = 0, nframes = 0, fi = 0, si = 0, ff = 0;
	int np = 0;

	bb->b = (WireBatch)APERTURE__SYNC__V1__BATCH__INIT;
	for (int t = 0; t < TARGET_PROFILE_NR; t++) {
		if (!ps->p[t])
			continue;
		if (profile_snapshot(ps->p[t], 0, &bb->snaps[t]))
			return -ENOMEM;
		nnames += bb->snaps[t]->nnames;
		nstacks += bb->snaps[t]->nstacks;
		for (size_t i = 0; i < bb->snaps[t]->nstacks; i++)
			nframes += bb->snaps[t]->stacks[i].depth;
	}
	bb->strings = calloc(nnames + 1, sizeof(*bb->strings));
	bb->frames = calloc(nnames + 1, sizeof(*bb->frames));
	bb->frame_ptrs = calloc(nnames + 1, sizeof(*bb->frame_ptrs));
	bb->stacks = calloc(nstacks + 1, sizeof(*bb->stacks));
	bb->stack_ptrs = calloc(nstacks + 1, sizeof(*bb->stack_ptrs));
	bb->stack_frames = calloc(nframes + 1, sizeof(*bb->stack_frames));
	bb->second_stacks = calloc(nstacks + 1, sizeof(*bb->second_stacks));
	bb->second_counts = calloc(nstacks + 1, sizeof(*bb->second_counts));
	if (!bb->strings || !bb->frames || !bb->frame_ptrs || !bb->stacks || !bb->stack_ptrs ||
	    !bb->stack_frames || !bb->second_stacks || !bb->second_counts)
		return -ENOMEM;
	/* strings[0] is ""; frame k's name is strings[k + 1]. */
	bb->strings[0] = "";
	for (int t = 0; t < TARGET_PROFILE_NR; t++) {
		const struct profile_snapshot *sn = bb->snaps[t];
		Aperture__Sync__V1__Profile *pr = &bb->profiles[np];
		Aperture__Sync__V1__Second *sc = &bb->seconds[np];
		size_t base = fi, first_stack = si;

		if (!sn)
			continue;
		for (size_t i = 0; i < sn->nnames; i++, fi++) {
			bb->strings[fi + 1] = (char *)sn->names[i];
			bb->frames[fi] = (Aperture__Sync__V1__Frame)APERTURE__SYNC__V1__FRAME__INIT;
			bb->frames[fi].name = fi + 1;
			bb->frame_ptrs[fi] = &bb->frames[fi];
		}
		for (size_t i = 0; i < sn->nstacks; i++, si++) {
			const struct profile_stack *st = &sn->stacks[i];

			bb->stacks[si] = (Aperture__Sync__V1__Stack)APERTURE__SYNC__V1__STACK__INIT;
			bb->stacks[si].frames = &bb->stack_frames[ff];
			bb->stacks[si].n_frames = st->depth;
			for (uint32_t d = 0; d < st->depth; d++)
				bb->stack_frames[ff++] = base + st->frames[d];
			bb->stack_ptrs[si] = &bb->stacks[si];
			bb->second_stacks[si] = si;
			bb->second_counts[si] = st->count;
		}
		*sc = (Aperture__Sync__V1__Second)APERTURE__SYNC__V1__SECOND__INIT;
		sc->sec = sec;
		sc->n_stacks = sc->n_counts = si - first_stack;
		sc->stacks = &bb->second_stacks[first_stack];
		sc->counts = &bb->second_counts[first_stack];
		bb->second_ptrs[np] = sc;
		*pr = (Aperture__Sync__V1__Profile)APERTURE__SYNC__V1__PROFILE__INIT;
		pr->type = (char *)tree_profiles[t].name;
		pr->unit = (char *)tree_profiles[t].unit;
		pr->period_ns = t == TARGET_PROFILE_CPU ? period_ns : 0;
		pr->n_seconds = 1;
		pr->seconds = &bb->second_ptrs[np];
		bb->profile_ptrs[np++] = pr;
	}
	for (size_t i = 0; i < s->nlabels; i++) {
		bb->labels[i] = (Aperture__Sync__V1__Label)APERTURE__SYNC__V1__LABEL__INIT;
		bb->labels[i].key = (char *)s->keys[i];
		bb->labels[i].value = (char *)s->values[i];
		bb->label_ptrs[i] = &bb->labels[i];
	}
	/* Last, so it wins over a label of the same key: the app is the service. */
	bb->labels[s->nlabels] = (Aperture__Sync__V1__Label)APERTURE__SYNC__V1__LABEL__INIT;
	bb->labels[s->nlabels].key = "service";
	bb->labels[s->nlabels].value = (char *)s->app;
	bb->label_ptrs[s->nlabels] = &bb->labels[s->nlabels];
	snprintf(bb->status, sizeof(bb->status), "pid: %d\ncomm: %s\nstate: enabled\n"
		 "runtime: %s\nsource: pyroscope\nservice: %s\n", series_pid(s), s->app, spy,
		 s->app);
	bb->target = (Aperture__Sync__V1__Target)APERTURE__SYNC__V1__TARGET__INIT;
	bb->target.pid = series_pid(s);
	bb->target.comm = (char *)s->app;
	bb->target.runtime = (char *)spy;
	bb->target.state = "enabled";
	bb->target.status = bb->status;
	bb->target.kernel_boot_id = "pyroscope";
	bb->target.n_labels = s->nlabels + 1;
	bb->target.labels = bb->label_ptrs;
	bb->target.n_profiles = np;
	bb->target.profiles = bb->profile_ptrs;
	bb->targets[0] = &bb->target;
	/* One boot id per aggregator run; seq counts its pushes. */
	snprintf(bb->boot_id, sizeof(bb->boot_id), "pyroscope%023" PRId64, g->started);
	bb->b.version = WIRE_VERSION;
	bb->b.node = (char *)node;
	bb->b.boot_id = bb->boot_id;
	bb->b.seq = atomic_fetch_add(&g->pyroscope_seq, 1) + 1;
	bb->b.created_unix = time(NULL);
	bb->b.parts = 1;
	bb->b.n_strings = fi + 1;
	bb->b.strings = bb->strings;
	bb->b.n_frames = fi;
	bb->b.frames = bb->frame_ptrs;
	bb->b.n_stacks = si;
	bb->b.stacks = bb->stack_ptrs;
	bb->b.n_targets = 1;
	bb->b.targets = bb->targets;
	return 0;
}

static int parse_time(const char *v, int64_t dflt, int64_t *out)
{
	char *end;
	long long t;

	if (!v || !*v) {
		*out = dflt;
		return 0;
	}
	t = strtoll(v, &end, 10);
	if (*end || t < 0)
		return -EINVAL;
	/* Some clients send milli- or nanoseconds. */
	while (t > 100000000000LL)
		t /= 1000;
	*out = t;
	return 0;
}

/* A JFR recording, gzip'd or not: its events say the types, whatever the name's suffix. */
static int parse_jfr(struct pyro_push *ps, const struct pyro_series *s, const uint8_t *body,
		     size_t len, int64_t sec, char *why, size_t why_size)
{
	uint8_t *raw;
	int err = pyro_gunzip(&body, &len, AGG_MAX_INFLATED, &raw, why, why_size);

	if (!err)
		err = jfr_parse(ps, s->app, body, len, sec, why, why_size);
	free(raw);
	return err;
}

/* folded bodies: the name's suffix says the type. */
static int folded_type(const struct pyro_series *s, const char *units, int64_t *scale)
{
	*scale = 1;
	if (!*s->suffix || !strcmp(s->suffix, "cpu") || !strcmp(s->suffix, "itimer") ||
	    !strcmp(s->suffix, "wall"))
		return TARGET_PROFILE_CPU;
	if (!strcmp(s->suffix, "alloc_space"))
		return TARGET_PROFILE_JVM_ALLOC;
	if (!strcmp(s->suffix, "alloc_objects"))
		return TARGET_PROFILE_JVM_ALLOC_OBJECTS;
	if (!strcmp(s->suffix, "mutex_duration") || !strcmp(s->suffix, "block_duration") ||
	    !strcmp(s->suffix, "lock_duration")) {
		if (units && strstr(units, "nanoseconds"))
			*scale = 1000;
		return TARGET_PROFILE_LOCKS;
	}
	return -1;
}

/* One series' push as a batch of node: the HTTP status, the JSON answer in reply. */
static int apply_series(struct aggregator *g, const char *node, const struct pyro_series *s,
			struct pyro_push *ps, int64_t sec, uint32_t period_ns, const char *spy,
			int64_t now, char *reply, size_t reply_size)
{
	struct batch_build bb = {0};
	int status;

	if (batch_build(&bb, g, node, s, ps, sec, period_ns, spy))
		status = agg_reject(g, AGG_REJECT_STORE, "out of memory", reply, reply_size);
	else
		status = aggregator_apply(g, &bb.b, now, reply, reply_size);
	batch_build_free(&bb);
	return status;
}

/* The node a push is stored under: the token's (a node token), or `pyroscope` when auth is
 * off. 0, or the refusal's HTTP status with its answer in reply. */
static int push_node(struct aggregator *g, const struct token *k, const char **node,
		     char *reply, size_t reply_size)
{
	*node = g->insecure ? "pyroscope" : k ? token_node(k) : NULL;
	if (!g->insecure && !k)
		return agg_reject(g, AGG_REJECT_AUTH, "missing or unknown bearer token", reply,
				  reply_size);
	if (!*node)
		return agg_reject(g, AGG_REJECT_FORBIDDEN, "a read token may not upload; give the "
				  "agent a node token (e.g. `TOKEN node pyroscope`)", reply,
				  reply_size);
	return 0;
}

/* A parse's error as the answer: 413, 503 (out of memory), else 422 with why. */
static int parse_refusal(struct aggregator *g, int err, const char *why, char *reply,
			 size_t reply_size)
{
	if (err == -E2BIG)
		return agg_reject(g, AGG_REJECT_TOO_LARGE, why, reply, reply_size);
	if (err == -ENOMEM)
		return agg_reject(g, AGG_REJECT_STORE, "out of memory", reply, reply_size);
	return agg_reject(g, AGG_REJECT_UNPROCESSABLE, why[0] ? why : strerror(-err), reply,
			  reply_size);
}

int aggregator_pyroscope(struct aggregator *g, const struct token *k,
			 const struct agg_pyroscope_query *q, const uint8_t *body, size_t len,
			 char *reply, size_t reply_size)
{
	const char *node, *format = q->format && *q->format ? q->format : "folded";
	struct pyro_push ps = {0};
	struct pyro_series s = {0};
	int64_t now = time(NULL), from, until, scale, hz = PYRO_DEFAULT_HZ, time_s;
	char why[400];
	int err, status, type;

	status = push_node(g, k, &node, reply, reply_size);
	if (status)
		return status;
	err = parse_name(q->name, &s, why, sizeof(why));
	if (err) {
		free(s.buf);
		return err == -ENOMEM ? agg_reject(g, AGG_REJECT_STORE, "out of memory", reply,
						   reply_size)
				      : agg_reject(g, AGG_REJECT_MALFORMED, why, reply, reply_size);
	}
	if (parse_time(q->from, now, &from) || parse_time(q->until, from, &until) ||
	    until < from) {
		status = agg_reject(g, AGG_REJECT_MALFORMED, "from and until: unix seconds, "
				    "from <= until", reply, reply_size);
		goto out;
	}
	if (q->sample_rate && *q->sample_rate) {
		hz = strtoll(q->sample_rate, NULL, 10);
		if (hz < 1 || hz > 1000000000) {
			status = agg_reject(g, AGG_REJECT_MALFORMED, "sampleRate: 1..1e9 Hz",
					    reply, reply_size);
			goto out;
		}
	}
	why[0] = 0;
	if (!strcmp(format, "folded") || !strcmp(format, "lines")) {
		type = folded_type(&s, q->units, &scale);
		if (type < 0) {
			snprintf(why, sizeof(why), "profile type %s: Aperture keeps cpu, itimer, "
				 "wall, alloc_space, alloc_objects, mutex_duration, block_duration",
				 s.suffix);
			err = -ENOTSUP;
		} else {
			err = parse_folded(&ps, &s, type, body, len, from, why, sizeof(why));
		}
	} else if (!strcmp(format, "pprof")) {
		err = pyro_parse_pprof(&ps, s.app, body, len, from, &time_s, why, sizeof(why));
	} else if (!strcmp(format, "jfr")) {
		err = parse_jfr(&ps, &s, body, len, from, why, sizeof(why));
	} else {
		status = agg_reject(g, AGG_REJECT_MALFORMED, "format: folded, pprof or jfr", reply,
				    reply_size);
		goto out;
	}
	if (err == -EINVAL && !strcmp(format, "jfr")) /* a recording that is not one */
		status = agg_reject(g, AGG_REJECT_MALFORMED, why, reply, reply_size);
	else if (err)
		status = parse_refusal(g, err, why, reply, reply_size);
	else
		status = apply_series(g, node, &s, &ps, from, (uint32_t)(1000000000 / hz),
				      q->spy_name && *q->spy_name ? q->spy_name : "pyroscope",
				      now, reply, reply_size);
out:
	pyro_push_free(&ps);
	free(s.buf);
	return status;
}

int aggregator_pyroscope_push(struct aggregator *g, const struct token *k,
			      const char *encoding, const uint8_t *body, size_t len,
			      char *reply, size_t reply_size)
{
	struct pyro_push_request rq;
	int64_t now = time(NULL);
	uint8_t *raw = NULL;
	size_t raw_len;
	const char *node;
	char why[400];
	int err, status;

	status = push_node(g, k, &node, reply, reply_size);
	if (status)
		return status;
	if (encoding && !strcasecmp(encoding, "gzip")) {
		err = wire_gunzip(body, len, AGG_MAX_INFLATED, &raw, &raw_len, why, sizeof(why));
		if (err)
			return agg_reject(g, err == -E2BIG ? AGG_REJECT_TOO_LARGE :
					  err == -ENOMEM ? AGG_REJECT_STORE : AGG_REJECT_MALFORMED,
					  why, reply, reply_size);
		body = raw;
		len = raw_len;
	} else if (encoding && strcasecmp(encoding, "identity")) {
		return agg_reject(g, AGG_REJECT_VERSION, "Content-Encoding: gzip or none", reply,
				  reply_size);
	}
	err = pyro_push_decode(body, len, now, &rq, why, sizeof(why));
	free(raw);
	if (err)
		return agg_reject(g, err == -E2BIG ? AGG_REJECT_TOO_LARGE :
				  err == -ENOMEM ? AGG_REJECT_STORE : AGG_REJECT_MALFORMED,
				  err == -ENOMEM ? "out of memory" : why, reply, reply_size);
	/* Every series checked before any is stored: a bad push stores nothing. */
	for (size_t i = 0; i < rq.n; i++)
		if (!agg_valid_name(rq.series[i].s.app)) {
			snprintf(why, sizeof(why), "series %zu: service_name %s must be a file "
				 "name (no '/')", i, rq.series[i].s.app);
			status = agg_reject(g, AGG_REJECT_MALFORMED, why, reply, reply_size);
			goto out;
		}
	status = 200;
	snprintf(reply, reply_size, "{\"status\":\"applied\"}");
	/* A series whose profiles Aperture has no type for (goroutines, in-use memory) is
	 * skipped: an agent pushes every type it has, and the rest must not be lost for it. */
	for (size_t i = 0; status == 200 && i < rq.n; i++) {
		struct pyro_push_series *ps = &rq.series[i];

		if (ps->kept)
			status = apply_series(g, node, &ps->s, &ps->push,
					      ps->time_s ? ps->time_s : now,
					      1000000000 / PYRO_DEFAULT_HZ, "pyroscope", now, reply,
					      reply_size);
	}
out:
	pyro_push_request_free(&rq);
	return status;
}
