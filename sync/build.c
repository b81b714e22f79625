// SPDX-License-Identifier: GPL-2.0
/* Building a node's batches: the targets' records into the messages of the interval's parts
 * (sync/parts.h). A target's latest-state texts go into the last part it appears in, so the aggregator, which keeps the latest state of the
 * highest seq, ends with them. An empty latest-state text means "not sent this time": the
 * aggregator keeps what it had. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>
#include "collectors/jvm/jvm.h"
#include "daemon/aperture.h"
#include "daemon/cgroup_id.h"
#include "daemon/targets.h"
#include "daemon/threads.h"
#include "sync/build.h"
#include "sync/parts.h"

typedef Aperture__Sync__V1__Target WireTarget;
typedef Aperture__Sync__V1__Profile WireProfile;
typedef Aperture__Sync__V1__Second WireSecond;
typedef Aperture__Sync__V1__SysStats WireSysStats;
typedef Aperture__Sync__V1__SysRow WireSysRow;
typedef Aperture__Sync__V1__BlockingEvent WireBlocking;
typedef Aperture__Sync__V1__Label WireLabel;

/* Thread dumps and threads/busy of a JVM travel every SLOW_EVERY batches; every text is sent
 * again every REFRESH_EVERY batches even if unchanged, in case a batch carrying it was dropped. */
#define SLOW_EVERY 6
#define REFRESH_EVERY 6

static const char *const profile_types[TARGET_PROFILE_NR] = {
	[TARGET_PROFILE_CPU] = "cpu",
	[TARGET_PROFILE_JVM_ALLOC] = "alloc",
	[TARGET_PROFILE_JVM_ALLOC_OBJECTS] = "alloc_objects",
	[TARGET_PROFILE_JVM_MONITORS] = "monitors",
	[TARGET_PROFILE_OFFCPU] = "offcpu",
	[TARGET_PROFILE_LOCKS] = "locks",
};

enum text { TEXT_STATUS, TEXT_DEADLOCKS, TEXT_DEADLOCKS_JSON, TEXT_DUMP, TEXT_BUSY, TEXT_JVM,
	    TEXT_NR };

/* What the builder remembers of one process incarnation. */
struct seen {
	struct { pid_t pid; uint64_t start_time; } key;
	int64_t last_sec[TARGET_PROFILE_NR]; /* newest second shipped */
	uint64_t blocking_seen;              /* the log's event count when last shipped */
	uint64_t sys_sig;                    /* what the shipped sys rows added up to */
	uint64_t text_hash[TEXT_NR];
	char *exe, *cgroup;
	uint64_t generation;                 /* the run that last saw it */
	UT_hash_handle hh;
};

struct sync_builder {
	char *node, *boot_id;
	char kernel_boot_id[40];
	struct seen *seen;
	uint64_t runs;
};

/* One run: its parts and the builder. */
struct build {
	struct sync_builder *sb;
	struct parts *ps;
};

/* What the current record has in the current part, part number part_no. */
struct record_msgs {
	size_t part_no;
	WireTarget *t;
	WireProfile *profiles[TARGET_PROFILE_NR];
};

/* Maps of one profile's ids into the current part's tables. */
struct id_map {
	size_t part_no;
	uint32_t index;
};

/* The start of a small file, "" if it can't be read. */
static void read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
}

/* Whatever identity is known once, at first sight: exe and cgroup of an exited process are
 * gone from /proc. */
static int seen_identity(struct seen *s, pid_t pid)
{
	char path[64], exe[4096], cg[4096] = "";
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	proc_cgroup_path(pid, cg, sizeof(cg));
	s->exe = strdup(exe);
	s->cgroup = strdup(cg);
	return s->exe && s->cgroup ? 0 : -ENOMEM;
}

static struct seen *seen_get(struct sync_builder *b, const struct target_record *r)
{
	struct seen key = {0}, *s;

	key.key.pid = r->pid;
	key.key.start_time = r->start_time;
	HASH_FIND(hh, b->seen, &key.key, sizeof(key.key), s);
	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->key = key.key;
	for (int i = 0; i < TARGET_PROFILE_NR; i++)
		s->last_sec[i] = INT64_MIN;
	if (seen_identity(s, r->pid)) {
		free(s->exe);
		free(s->cgroup);
		free(s);
		return NULL;
	}
	HASH_ADD(hh, b->seen, key, sizeof(s->key), s);
	if (!s->hh.tbl) {
		free(s->exe);
		free(s->cgroup);
		free(s);
		return NULL;
	}
	return s;
}

static void seen_free(struct seen *s)
{
	free(s->exe);
	free(s->cgroup);
	free(s);
}

/* The node's and the rules' labels ("k=v k=v") as Label messages: the aggregator's
 * services/ takes a `service` label over the comm. */
static int labels_msgs(struct build *bd, WireTarget *t, const char *labels)
{
	for (const char *p = labels; *p;) {
		size_t n = strcspn(p, " "), k = strcspn(p, "=");
		WireLabel *l;
		char *word;

		if (n && k < n) {
			l = parts_alloc(bd->ps, sizeof(*l));
			word = parts_strdup(bd->ps, p);
			if (!l || !word)
				return -ENOMEM;
			word[n] = 0;
			word[k] = 0;
			*l = (WireLabel)APERTURE__SYNC__V1__LABEL__INIT;
			l->key = word;
			l->value = word + k + 1;
			if (parts_push(bd->ps, (void ***)&t->labels, &t->n_labels, l))
				return -ENOMEM;
			parts_grow(bd->ps, n + 8);
		}
		p += n + (p[n] == ' ');
	}
	return 0;
}

/* The record's Target message in the current part, made with its identity if new. */
static int target_msg(struct build *bd, const struct target_record *r, const struct seen *s,
		      struct record_msgs *m)
{
	WireTarget *t;

	if (m->t && m->part_no == parts_number(bd->ps))
		return 0;
	memset(m, 0, sizeof(*m));
	t = parts_alloc(bd->ps, sizeof(*t));
	if (!t)
		return -ENOMEM;
	*t = (WireTarget)APERTURE__SYNC__V1__TARGET__INIT;
	t->pid = r->pid;
	t->start_time = r->start_time;
	t->comm = parts_strdup(bd->ps, r->comm);
	t->exe = parts_strdup(bd->ps, s->exe);
	t->cgroup = parts_strdup(bd->ps, s->cgroup);
	t->runtime = r->jvm ? "jvm" : "native";
	t->state = (char *)r->state_name;
	t->has_jvm = r->jvm;
	t->kernel_boot_id = bd->sb->kernel_boot_id;
	if (!t->comm || !t->exe || !t->cgroup || labels_msgs(bd, t, r->labels))
		return -ENOMEM;
	if (parts_push(bd->ps, (void ***)&parts_cur(bd->ps)->targets,
		       &parts_cur(bd->ps)->n_targets, t))
		return -ENOMEM;
	parts_grow(bd->ps, 64 + strlen(s->exe) + strlen(s->cgroup));
	m->t = t;
	m->part_no = parts_number(bd->ps);
	return 0;
}

/* The profile's message in the current part, with room for nseconds Second messages. */
static int profile_msg(struct build *bd, const struct target_record *r, const struct seen *s,
		       struct record_msgs *m, int which, const char *unit, size_t nseconds,
		       uint32_t period_ns)
{
	WireProfile *pr;
	int err = target_msg(bd, r, s, m);

	if (err || m->profiles[which])
		return err;
	pr = parts_alloc(bd->ps, sizeof(*pr));
	if (!pr)
		return -ENOMEM;
	*pr = (WireProfile)APERTURE__SYNC__V1__PROFILE__INIT;
	pr->type = (char *)profile_types[which];
	pr->unit = parts_strdup(bd->ps, unit);
	pr->period_ns = period_ns;
	if (!pr->unit)
		return -ENOMEM;
	pr->seconds = parts_alloc(bd->ps, nseconds * sizeof(*pr->seconds));
	if (!pr->seconds || parts_push(bd->ps, (void ***)&m->t->profiles, &m->t->n_profiles, pr))
		return -ENOMEM;
	m->profiles[which] = pr;
	return 0;
}

/* The stack of a profile's stack in the current part. */
static int map_stack(struct build *bd, const struct profile_seconds *d,
		     const struct profile_stack *st, struct id_map *frames, uint32_t *out)
{
	uint32_t ids[1024];
	uint32_t depth = st->depth < 1024 ? st->depth : 1024;

	for (uint32_t i = 0; i < depth; i++) {
		struct id_map *fm = &frames[st->frames[i]];

		if (fm->part_no != parts_number(bd->ps)) {
			int err = parts_frame(bd->ps, d->names[st->frames[i]],
					      d->infos[st->frames[i]], &fm->index);
			if (err)
				return err;
			fm->part_no = parts_number(bd->ps);
		}
		ids[i] = fm->index;
	}
	return parts_stack(bd->ps, ids, st->lines, depth, out);
}

/* Counts of one second go in pieces of at most this many stacks: a part may end inside a
 * second (counts are additive), so no second makes a part too large. */
#define PIECE 4096

/* One piece of a second: counts n (all of second sec) into the current part. */
static int add_piece(struct build *bd, const struct target_record *r, const struct seen *s,
		     struct record_msgs *m, int which, const struct profile_seconds *d,
		     struct id_map *frames, struct id_map *stacks, size_t npieces,
		     uint32_t period_ns, const struct profile_second_count *c, size_t n)
{
	WireProfile *pr;
	WireSecond *ws;
	int err;

	err = parts_room(bd->ps, n * 12);
	err = err ?: profile_msg(bd, r, s, m, which, d->unit, npieces, period_ns);
	if (err)
		return err;
	ws = parts_alloc(bd->ps, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	*ws = (WireSecond)APERTURE__SYNC__V1__SECOND__INIT;
	ws->sec = c->sec;
	ws->stacks = parts_alloc(bd->ps, n * sizeof(*ws->stacks));
	ws->counts = parts_alloc(bd->ps, n * sizeof(*ws->counts));
	if (!ws->stacks || !ws->counts)
		return -ENOMEM;
	pr = m->profiles[which];
	pr->seconds[pr->n_seconds++] = ws;
	for (size_t k = 0; k < n; k++) {
		struct id_map *sm = &stacks[c[k].stack];

		if (sm->part_no != parts_number(bd->ps)) {
			err = map_stack(bd, d, &d->stacks[c[k].stack], frames, &sm->index);
			if (err)
				return err;
			sm->part_no = parts_number(bd->ps);
		}
		ws->stacks[ws->n_stacks++] = sm->index;
		ws->counts[ws->n_counts++] = c[k].count;
	}
	parts_grow(bd->ps, 8 + n * 8);
	return 0;
}

/* One profile's seconds since the last shipped, before until. */
static int add_profile(struct build *bd, const struct target_record *r, struct seen *s,
		       struct record_msgs *m, int which, int64_t until, uint32_t period_ns)
{
	struct id_map *frames = NULL, *stacks = NULL;
	struct profile_seconds *d;
	size_t i, end, npieces = 0;
	int64_t from = s->last_sec[which] == INT64_MIN ? INT64_MIN : s->last_sec[which] + 1;
	int err;

	if (!r->profiles[which])
		return 0;
	err = profile_seconds(r->profiles[which], from, until, &d);
	if (err)
		return err;
	if (!d->ncounts)
		goto out;
	for (i = 0; i < d->ncounts; i = end) {
		for (end = i; end < d->ncounts && d->counts[end].sec == d->counts[i].sec; end++)
			;
		npieces += (end - i + PIECE - 1) / PIECE;
	}
	frames = calloc(d->nnames ? d->nnames : 1, sizeof(*frames));
	stacks = calloc(d->nstacks, sizeof(*stacks));
	if (!frames || !stacks) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; !err && i < d->ncounts; i = end) {
		for (end = i; end < d->ncounts && d->counts[end].sec == d->counts[i].sec; end++)
			;
		for (size_t k = i; !err && k < end; k += PIECE)
			err = add_piece(bd, r, s, m, which, d, frames, stacks, npieces, period_ns,
					&d->counts[k], end - k < PIECE ? end - k : PIECE);
		if (!err)
			s->last_sec[which] = d->counts[i].sec;
	}
out:
	free(frames);
	free(stacks);
	profile_seconds_free(d);
	return err;
}

/* A folded stack ("a;b;c") as the part's stack. */
static int folded_stack(struct build *bd, const char *folded, uint32_t *out)
{
	uint32_t ids[1024], depth = 0;
	char name[1024];

	while (*folded && depth < 1024) {
		size_t n = strcspn(folded, ";");

		snprintf(name, sizeof(name), "%.*s", (int)n, folded);
		if (n && parts_frame(bd->ps, name, NULL, &ids[depth++]))
			return -ENOMEM;
		folded += n + (folded[n] == ';');
	}
	if (!depth && parts_frame(bd->ps, "[unknown]", NULL, &ids[depth++]))
		return -ENOMEM;
	return parts_stack(bd->ps, ids, NULL, depth, out);
}

static int add_blocking(struct build *bd, const struct target_record *r, struct seen *s,
			struct record_msgs *m)
{
	struct blocking_snapshot *snap;
	WireTarget *t;
	int err = r->blocking ? blocking_log_snapshot(r->blocking, &snap) : 0;

	if (err || !r->blocking)
		return err;
	/* The log's events are numbered by arrival (total counts them all, the ring keeps the
	 * newest): those past the count last shipped are new. A smaller count is a reset. */
	if (snap->total < s->blocking_seen)
		s->blocking_seen = 0;
	for (size_t i = 0; i < snap->n; i++) {
		const struct blocking_event *ev = &snap->events[i];
		WireBlocking *wb;

		if (snap->total - snap->n + i < s->blocking_seen)
			continue;
		err = target_msg(bd, r, s, m);
		if (err)
			break;
		t = m->t;
		wb = parts_alloc(bd->ps, sizeof(*wb));
		if (!wb) {
			err = -ENOMEM;
			break;
		}
		*wb = (WireBlocking)APERTURE__SYNC__V1__BLOCKING_EVENT__INIT;
		wb->time_ns = ev->time_ns;
		wb->dur_us = ev->dur_us;
		wb->tid = ev->tid;
		wb->thread = parts_strdup(bd->ps, ev->thread);
		wb->preempted = ev->preempted;
		wb->state = ev->state;
		err = wb->thread ? folded_stack(bd, ev->stack ? ev->stack : "", &wb->stack)
				 : -ENOMEM;
		if (err)
			break;
		if (parts_push(bd->ps, (void ***)&t->blocking, &t->n_blocking, wb)) {
			err = -ENOMEM;
			break;
		}
		parts_grow(bd->ps, 48 + strlen(ev->thread));
	}
	if (!err)
		s->blocking_seen = snap->total;
	blocking_snapshot_free(snap);
	return err;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	/* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ULL;
	return h;
}

static int add_sys(struct build *bd, const struct target_record *r, struct seen *s,
		   struct record_msgs *m, bool refresh)
{
	struct sys_snapshot *snap;
	uint64_t sig = 14695981039346656037ULL;
	WireSysStats *st;
	int err = r->sys ? sys_table_snapshot(r->sys, &snap) : 0;

	if (err || !r->sys)
		return err;
	for (size_t i = 0; i < snap->nrows; i++)
		sig = hash_bytes(sig, &snap->rows[i].lat, sizeof(snap->rows[i].lat));
	sig = hash_bytes(sig, &snap->nrows, sizeof(snap->nrows));
	if (sig == s->sys_sig && !refresh)
		goto out;
	err = target_msg(bd, r, s, m);
	st = err ? NULL : parts_alloc(bd->ps, sizeof(*st));
	if (!err && !st)
		err = -ENOMEM;
	if (err)
		goto out;
	*st = (WireSysStats)APERTURE__SYNC__V1__SYS_STATS__INIT;
	st->rows = parts_alloc(bd->ps, (snap->nrows ? snap->nrows : 1) * sizeof(*st->rows));
	if (!st->rows) {
		err = -ENOMEM;
		goto out;
	}
	m->t->sys = st;
	for (size_t i = 0; i < snap->nrows; i++) {
		const struct sys_row *row = &snap->rows[i];
		WireSysRow *w = parts_alloc(bd->ps, sizeof(*w));
		uint64_t *hist = parts_alloc(bd->ps, sizeof(row->lat.hist));

		if (!w || !hist) {
			err = -ENOMEM;
			goto out;
		}
		*w = (WireSysRow)APERTURE__SYNC__V1__SYS_ROW__INIT;
		w->kind = row->kind;
		w->a = row->a;
		w->b = row->b;
		w->addr = row->addr;
		err = parts_string(bd->ps, row->holder, &w->holder);
		err = err ?: parts_string(bd->ps, row->stack, &w->stack);
		if (err)
			goto out;
		w->count = row->lat.count;
		w->total_ns = row->lat.total_ns;
		w->max_ns = row->lat.max_ns;
		memcpy(hist, row->lat.hist, sizeof(row->lat.hist));
		w->hist = hist;
		w->n_hist = LATENCY_HIST;
		st->rows[st->n_rows++] = w;
		parts_grow(bd->ps, 400);
	}
	s->sys_sig = sig;
out:
	sys_snapshot_free(snap);
	return err;
}

/* One text of the target, as its file in the tree shows it; "" if it could not be made. */
static char *render_text(struct aperture *a, pid_t pid, enum text which)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err = 0;

	if (!f)
		return NULL;
	switch (which) {
	case TEXT_STATUS:
		err = targets_status(a->targets, pid, f);
		break;
	case TEXT_DEADLOCKS:
	case TEXT_DEADLOCKS_JSON:
	case TEXT_DUMP: {
		enum jvm_threads_view view = which == TEXT_DUMP ? JVM_THREADS_DUMP :
					     which == TEXT_DEADLOCKS ? JVM_THREADS_DEADLOCKS :
					     JVM_THREADS_DEADLOCKS_JSON;

		/* The JVM's own view when attached, else what /proc shows, as threads/ does. */
		err = jvm_threads_render(a->jvm, pid, view, f);
		if (err == -ENODATA && which == TEXT_DUMP)
			err = native_threads_dump(a, pid, f);
		else if (err == -ENODATA)
			err = native_threads_deadlocks(a, pid, which == TEXT_DEADLOCKS_JSON, f);
		break;
	}
	case TEXT_BUSY:
		err = target_threads_busy(a, pid, f);
		break;
	case TEXT_JVM:
		err = jvm_collector_status(a->jvm, pid, config_get(a, CONFIG_JVM_ATTACH) ? NULL :
					   "config/jvm_attach is 0: native profiling only", f);
		break;
	case TEXT_NR:
		break;
	}
	if (fclose(f) || err) {
		free(buf);
		return strdup("");
	}
	return buf;
}

static int add_texts(struct build *bd, struct aperture *a, const struct target_record *r,
		     struct seen *s, struct record_msgs *m, bool changed, bool refresh)
{
	char *texts[TEXT_NR] = {0};
	/* Threads are read from the process, which costs: only while it is profiled. */
	bool live = r->state == TARGET_ENABLED;
	bool slow = bd->sb->runs % SLOW_EVERY == 1;
	int err = 0;

	for (int i = 0; i < TEXT_NR; i++) {
		bool want = i == TEXT_STATUS ||
			    (live && (i == TEXT_DEADLOCKS || i == TEXT_DEADLOCKS_JSON)) ||
			    (live && r->jvm && i == TEXT_JVM) ||
			    /* the first time, then at the slow pace */
			    (live && r->jvm && (slow || !s->text_hash[i]) &&
			     (i == TEXT_DUMP || i == TEXT_BUSY));
		uint64_t h;

		if (!want)
			continue;
		texts[i] = render_text(a, r->pid, i);
		if (!texts[i]) {
			err = -ENOMEM;
			goto out;
		}
		h = hash_bytes(14695981039346656037ULL, texts[i], strlen(texts[i]));
		if (h == s->text_hash[i] && !refresh) {
			free(texts[i]);
			texts[i] = NULL;
			continue;
		}
		s->text_hash[i] = h;
		changed = true;
	}
	if (!changed)
		goto out;
	err = target_msg(bd, r, s, m);
	for (int i = 0; !err && i < TEXT_NR; i++) {
		char *copy;

		if (!texts[i])
			continue;
		copy = parts_strdup(bd->ps, texts[i]);
		if (!copy) {
			err = -ENOMEM;
			break;
		}
		parts_grow(bd->ps, strlen(copy) + 4);
		switch (i) {
		case TEXT_STATUS: m->t->status = copy; break;
		case TEXT_DEADLOCKS: m->t->deadlocks = copy; break;
		case TEXT_DEADLOCKS_JSON: m->t->deadlocks_json = copy; break;
		case TEXT_DUMP: m->t->threads_dump = copy; break;
		case TEXT_BUSY: m->t->threads_busy = copy; break;
		case TEXT_JVM: m->t->jvm_status = copy; break;
		}
	}
out:
	for (int i = 0; i < TEXT_NR; i++)
		free(texts[i]);
	return err;
}

static int add_record(struct build *bd, struct aperture *a, const struct target_record *r,
		      int64_t until, uint32_t period_ns)
{
	struct record_msgs m = {0};
	struct seen *s = seen_get(bd->sb, r);
	bool refresh;
	int err = 0;

	if (!s)
		return -ENOMEM;
	s->generation = bd->sb->runs;
	refresh = bd->sb->runs % REFRESH_EVERY == 1;
	for (int i = 0; !err && i < TARGET_PROFILE_NR; i++)
		err = add_profile(bd, r, s, &m, i, until,
				  i == TARGET_PROFILE_CPU ? period_ns : 0);
	err = err ?: add_blocking(bd, r, s, &m);
	err = err ?: add_sys(bd, r, s, &m, refresh);
	/* The texts last: they land in the last part the target is in. */
	err = err ?: add_texts(bd, a, r, s, &m, m.t != NULL, refresh);
	return err;
}

int sync_builder_new(const char *node, const char *boot_id, struct sync_builder **out)
{
	struct sync_builder *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->node = strdup(node);
	b->boot_id = strdup(boot_id);
	read_small("/proc/sys/kernel/random/boot_id", b->kernel_boot_id, sizeof(b->kernel_boot_id));
	b->kernel_boot_id[strcspn(b->kernel_boot_id, "\n")] = 0;
	if (!b->node || !b->boot_id) {
		sync_builder_free(b);
		return -ENOMEM;
	}
	*out = b;
	return 0;
}

void sync_builder_free(struct sync_builder *b)
{
	struct seen *s, *tmp;

	if (!b)
		return;
	HASH_ITER(hh, b->seen, s, tmp) {
		HASH_DEL(b->seen, s);
		seen_free(s);
	}
	free(b->node);
	free(b->boot_id);
	free(b);
}

int sync_builder_run(struct sync_builder *b, struct aperture *a, int64_t until,
		     const Aperture__Sync__V1__NodeStatus *status, uint64_t *next_seq,
		     struct sync_part **parts, size_t *n)
{
	struct build bd = { .sb = b };
	uint64_t hz = config_get(a, CONFIG_FREQUENCY_HZ);
	struct target_record *recs = NULL;
	struct seen *s, *tmp;
	size_t nrecs = 0;
	int err;

	b->runs++;
	err = targets_records(a->targets, &recs, &nrecs);
	err = err ?: parts_new(b->node, b->boot_id, aperture_now(), &bd.ps);
	for (size_t i = 0; !err && i < nrecs; i++)
		err = add_record(&bd, a, &recs[i], until, hz ? 1000000000 / hz : 0);
	targets_records_free(recs, nrecs);
	/* Incarnations no record holds any more are done with. */
	HASH_ITER(hh, b->seen, s, tmp) {
		if (s->generation != b->runs) {
			HASH_DEL(b->seen, s);
			seen_free(s);
		}
	}
	err = err ?: parts_encode(bd.ps, *next_seq, status, parts, n);
	if (!err)
		*next_seq += *n;
	parts_free(bd.ps);
	return err;
}
