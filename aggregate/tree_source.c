/* The aggregator as a source of the tree: nodes/<node>/targets/<pid>/ from the store, with
 * the same target files as a node's own tree, and services/<service>/ merging every target
 * of a service across nodes. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>
#include "aggregate/aggregator.h"
#include "fs/fs.h"
#include "views/views.h"

extern const char agg_tree_readme[];

static struct aggregator *agg_of(const struct tree *t)
{
	return t->ctx;
}

static enum agg_scope_kind kind_of(uint32_t scope)
{
	return scope & 1;
}

/* The name of a scope of kind want; -ENOENT for a scope of another kind. */
static int scope_name(struct aggregator *g, uint32_t scope, enum agg_scope_kind want,
		      char *name, size_t size)
{
	if (!scope || kind_of(scope) != want)
		return -ENOENT;
	return g->store->ops->scope_name(g->store, want, scope, name, size);
}

/* A window file's setting, per directory: the last N seconds, or from..until; none set
 * means everything retention keeps. */
struct agg_window {
	UT_hash_handle hh;
	uint64_t key;
	struct tree_range range;
	int64_t last_s;
};

static uint64_t window_key(const struct node_ref *ref)
{
	return (uint64_t)ref->scope << 32 | (uint32_t)ref->pid;
}

/* The seconds ref covers at time now. */
static struct tree_range range_of(struct aggregator *g, const struct node_ref *ref,
				  int64_t now, int64_t *last_s)
{
	struct tree_range r = ref->range;
	uint64_t key = window_key(ref);
	struct agg_window *w;

	*last_s = 0;
	if (!r.set) {
		pthread_mutex_lock(&g->windows_lock);
		HASH_FIND(hh, g->windows, &key, sizeof(key), w);
		if (w) {
			r = w->range;
			*last_s = w->last_s;
		}
		pthread_mutex_unlock(&g->windows_lock);
	}
	if (*last_s)
		r = (struct tree_range){ .from = now - *last_s + 1, .until = now, .set = true };
	if (!r.set)
		r = (struct tree_range){ .from = aggregator_retention_start(g, now), .until = now,
					 .set = true };
	return r;
}

static int list_targets(const struct tree *t, uint32_t scope, pid_t **pids, size_t *n)
{
	struct aggregator *g = agg_of(t);
	char node[256];
	int err = scope_name(g, scope, AGG_SCOPE_NODE, node, sizeof(node));

	return err ? err : g->store->ops->targets(g->store, node, pids, n);
}

static enum target_state state_of(const char *s)
{
	if (!strcmp(s, "enabled"))
		return TARGET_ENABLED;
	if (!strcmp(s, "expired"))
		return TARGET_EXPIRED;
	if (!strcmp(s, "exited"))
		return TARGET_EXITED;
	return TARGET_DISABLED;
}

static int target_of(const struct tree *t, uint32_t scope, pid_t pid, char *node, size_t size,
		     struct agg_target *at)
{
	struct aggregator *g = agg_of(t);
	int err = scope_name(g, scope, AGG_SCOPE_NODE, node, size);

	return err ? err : g->store->ops->target(g->store, node, pid, at);
}

/* Files are root's: the remote uids mean nothing here, and HTTP checks tokens instead. */
static int target_info(const struct tree *t, uint32_t scope, pid_t pid, struct target_info *out)
{
	struct agg_target at;
	char node[256];
	int err;

	err = target_of(t, scope, pid, node, sizeof(node), &at);
	if (err)
		return err;
	*out = (struct target_info){ .state = state_of(at.state), .since = at.last_seen };
	snprintf(out->comm, sizeof(out->comm), "%.15s", at.comm);
	return 0;
}

static bool is_jvm(const struct tree *t, uint32_t scope, pid_t pid)
{
	struct agg_target at;
	char node[256];

	return !target_of(t, scope, pid, node, sizeof(node), &at) && at.has_jvm;
}

static int profile(const struct tree *t, const struct node_ref *ref, enum target_profile which,
		   struct profile_snapshot **out, struct view_meta *m, char *title,
		   size_t title_size)
{
	const struct tree_profile *tp = &tree_profiles[which];
	struct aggregator *g = agg_of(t);
	int64_t now = time(NULL), last_s;
	struct tree_range r = range_of(g, ref, now, &last_s);
	struct agg_query q = { .pid = ref->pid, .type = which, .from = r.from, .until = r.until };
	char name[256];
	struct agg_target at = {0};
	int err;

	if (ref->pid) {
		err = target_of(t, ref->scope, ref->pid, name, sizeof(name), &at);
		q.node = name;
		snprintf(title, title_size, "%s: %s (pid %d) on %s", tp->name, at.comm, ref->pid,
			 name);
	} else {
		err = scope_name(g, ref->scope, AGG_SCOPE_SERVICE, name, sizeof(name));
		q.service = name;
		snprintf(title, title_size, "%s: service %s", tp->name, name);
	}
	if (!err) {
		int64_t start = agg_clock_ns();

		err = g->store->ops->profile(g->store, &q, out);
		agg_latency_observe(&g->store_query, start);
		if (err == -EIO)
			atomic_fetch_add(&g->store_query_errors, 1);
	}
	if (err)
		return err;
	*m = (struct view_meta){ .title = title, .now = r.until < now ? r.until : now,
				 .window_s = last_s,
				 .sample_type = tp->sample_type, .period_type = tp->period_type,
				 .period_unit = tp->period_unit };
	if (which == TARGET_PROFILE_CPU)
		m->period = at.period_ns;
	return 0;
}

static int sys(const struct tree *t, const struct node_ref *ref, struct sys_snapshot **out,
	       bool *lock_stacks, char *why, size_t why_size)
{
	struct aggregator *g = agg_of(t);
	char node[256];
	int err = scope_name(g, ref->scope, AGG_SCOPE_NODE, node, sizeof(node));

	*lock_stacks = true; /* rows carry the stacks the node collected, if any */
	why[0] = 0;
	return err ? err : g->store->ops->sys(g->store, node, ref->pid, out);
}

static int text(const struct tree *t, const struct node_ref *ref, enum tree_text which,
		FILE *out)
{
	struct aggregator *g = agg_of(t);
	struct blocking_snapshot *bs;
	char node[256], *body;
	int err = scope_name(g, ref->scope, AGG_SCOPE_NODE, node, sizeof(node));

	if (err)
		return err;
	if (which == TREE_TEXT_BLOCKING_JSON) {
		/* The node's worker list is not shipped: the events are. */
		struct blocking_workers w = { .found_by = "the node" };

		err = g->store->ops->blocking(g->store, node, ref->pid, &bs);
		if (err)
			return err;
		err = view_blocking_json(bs, &w, out);
		blocking_snapshot_free(bs);
		return err;
	}
	err = g->store->ops->text(g->store, node, ref->pid, which, &body);
	if (err)
		return err;
	err = fputs(body, out) < 0 ? -EIO : 0;
	free(body);
	return err;
}

static int read_window(const struct tree *t, const struct node_ref *ref, FILE *out)
{
	struct aggregator *g = agg_of(t);
	uint64_t key = window_key(ref);
	struct agg_window *w;

	pthread_mutex_lock(&g->windows_lock);
	HASH_FIND(hh, g->windows, &key, sizeof(key), w);
	if (!w)
		fprintf(out, "all\n");
	else if (w->last_s)
		fprintf(out, "%" PRId64 "\n", w->last_s);
	else
		fprintf(out, "%" PRId64 "..%" PRId64 "\n", w->range.from, w->range.until);
	pthread_mutex_unlock(&g->windows_lock);
	return 0;
}

/* "all" (or 0), N seconds (1..604800), or FROM..UNTIL in unix seconds. */
static int write_window(const struct tree *t, const struct node_ref *ref, const char *buf,
			size_t len)
{
	struct aggregator *g = agg_of(t);
	uint64_t key = window_key(ref);
	struct tree_range r = {0};
	struct agg_window *w;
	int64_t last_s = 0;
	char v[64];
	int err;

	while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		len--;
	if (len >= sizeof(v))
		return -EINVAL;
	memcpy(v, buf, len);
	v[len] = 0;
	if (strcmp(v, "all") && strcmp(v, "0")) {
		err = tree_parse_range(v, &r, &last_s);
		if (err)
			return err;
	}
	pthread_mutex_lock(&g->windows_lock);
	HASH_FIND(hh, g->windows, &key, sizeof(key), w);
	if (!r.set && !last_s && w) {
		HASH_DEL(g->windows, w);
		free(w);
	} else if (r.set || last_s) {
		if (!w && (w = calloc(1, sizeof(*w)))) {
			w->key = key;
			HASH_ADD(hh, g->windows, key, sizeof(w->key), w);
		}
		if (w) {
			w->range = r;
			w->last_s = last_s;
		}
	}
	pthread_mutex_unlock(&g->windows_lock);
	return w || (!r.set && !last_s) ? 0 : -ENOMEM;
}

static int list_scopes(const struct tree *t, int kind,
		       int (*add)(void *ctx, uint32_t id, const char *name), void *ctx)
{
	struct aggregator *g = agg_of(t);

	return g->store->ops->list_scopes(g->store, kind, add, ctx);
}

static int scope_lookup(const struct tree *t, int kind, const char *name, uint32_t *id)
{
	struct aggregator *g = agg_of(t);

	return g->store->ops->scope_lookup(g->store, kind, name, id);
}

static const struct tree_source_ops agg_ops = {
	.list_targets = list_targets,
	.target_info = target_info,
	.is_jvm = is_jvm,
	.profile = profile,
	.sys = sys,
	.text = text,
	.read_window = read_window,
	.write_window = write_window,
	.list_scopes = list_scopes,
	.scope_lookup = scope_lookup,
};

static struct aggregator *agg_of_ref(const struct node_ref *ref)
{
	return agg_of(ref->tree);
}

static void print_time(FILE *out, const char *key, int64_t t)
{
	char when[32];
	struct tm tm;

	if (t <= 0 || !gmtime_r(&(time_t){ t }, &tm)) {
		fprintf(out, "%s: never\n", key);
		return;
	}
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(out, "%s: %s\n", key, when);
}

static int render_readme(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return fputs(agg_tree_readme, out) < 0 ? -EIO : 0;
}

/* The store's tables: rows, bytes on disk, parts and the oldest row, where it says. */
static void render_store_tables(struct aggregator *g, FILE *out)
{
	struct agg_store_table t[16];
	size_t n = 0;

	if (!g->store->ops->stats || g->store->ops->stats(g->store, t, 16, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "store_table_%s: rows %" PRIu64 ", bytes %" PRIu64 ", parts %" PRIu64,
			t[i].name, t[i].rows, t[i].bytes, t[i].parts);
		if (t[i].oldest)
			fprintf(out, ", oldest %" PRId64, t[i].oldest);
		fputc('\n', out);
	}
}

static int render_status(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	struct aggregator *g = agg_of_ref(ref);
	uint64_t batches = 0, samples = 0, nodes = 0, targets = 0;
	int err = g->store->ops->totals(g->store, &batches, &samples, &nodes, &targets);

	/* A store that fails is said so; what the aggregator counted itself still shows. */
	fprintf(out, "role: aggregator\nversion: %s\nlisten: %s%s\nstore: %s\n", APERTURE_VERSION,
		g->listen, g->tls ? " (https)" : "", g->store->url);
	if (err)
		fprintf(out, "store_error: %s\n", strerror(-err));
	if (g->insecure)
		fprintf(out, "auth: OFF (--insecure): anyone who reaches %s may upload and read\n",
			g->listen);
	else
		fprintf(out, "auth: bearer tokens\n");
	print_time(out, "started", g->started);
	fprintf(out, "retention_days: %u\nnodes: %" PRIu64 "\ntargets: %" PRIu64 "\n"
		"batches_stored: %" PRIu64 "\nsamples_stored: %" PRIu64 "\n"
		"batches_applied: %" PRIu64 "\nbatches_duplicate: %" PRIu64 "\n",
		g->retention_days, nodes, targets, batches, samples, atomic_load(&g->applied),
		atomic_load(&g->duplicates));
	for (int i = 0; i < AGG_REJECT_NR; i++)
		fprintf(out, "batches_rejected_%s: %" PRIu64 "\n", agg_reject_names[i],
			atomic_load(&g->rejected[i]));
	render_store_tables(g, out);
	return 0;
}

static int render_metrics(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return agg_metrics_render(agg_of_ref(ref), out);
}

static int render_node_status(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	struct aggregator *g = agg_of_ref(ref);
	struct agg_node_status st;
	char node[256];
	int err = scope_name(g, ref->scope, AGG_SCOPE_NODE, node, sizeof(node));

	if (!err)
		err = g->store->ops->node_status(g->store, node, &st);
	if (err)
		return err;
	fprintf(out, "node: %s\n", st.name);
	print_time(out, "last_batch", st.last_batch_unix);
	fprintf(out, "last_seq: %" PRIu64 "\nboot_id: %s\n", st.last_seq, st.last_boot_id);
	/* How old the newest data is: the node made its last batch this long ago. */
	if (st.last_created_unix)
		fprintf(out, "lag_s: %" PRId64 "\n", (int64_t)time(NULL) - st.last_created_unix);
	fprintf(out, "batches: %" PRIu64 "\nduplicates: %" PRIu64 "\nsamples: %" PRIu64 "\n"
		"targets: %u\nspool_bytes: %" PRIu64 "\nbatches_dropped: %" PRIu64 "\n",
		st.batches, st.duplicates, st.samples, st.targets, st.spool_bytes,
		st.batches_dropped);
	print_time(out, "oldest_dropped", st.oldest_dropped_unix);
	fprintf(out, "batches_rejected: %" PRIu64 "\n", st.batches_rejected);
	print_time(out, "last_success", st.last_success_unix);
	fprintf(out, "last_error: %s\nnode_version: %s\n", st.last_error, st.version);
	return 0;
}

enum { R_ROOT, R_README, R_STATUS, R_METRICS, R_VERSION, R_NODES, R_SERVICES };

static int render_version(struct aperture *a, const struct node_ref *ref, FILE *out)
{
	return fs_version(out);
}

static const struct node agg_root_nodes[] = {
	[R_ROOT] = DIR_NODE("/", 0555, -1),
	[R_README] = FILE_NODE("README", 0444, R_ROOT, render_readme, NULL),
	[R_STATUS] = FILE_NODE("status", 0444, R_ROOT, render_status, NULL),
	[R_METRICS] = FILE_NODE("metrics", 0444, R_ROOT, render_metrics, NULL),
	[R_VERSION] = FILE_NODE("version", 0444, R_ROOT, render_version, NULL),
	[R_NODES] = { .name = "nodes", .mode = S_IFDIR | 0555, .parent = R_ROOT,
		      .dynamic = NODE_SCOPES, .arg = AGG_SCOPE_NODE },
	[R_SERVICES] = { .name = "services", .mode = S_IFDIR | 0555, .parent = R_ROOT,
			 .dynamic = NODE_SCOPES, .arg = AGG_SCOPE_SERVICE },
};

/* Under nodes/<node>/ and services/<service>/. */
enum { S_NODE, S_NODE_STATUS, S_NODE_TARGETS, S_SERVICE };

static const struct node agg_scope_nodes[] = {
	[S_NODE] = DIR_NODE("", 0555, -1),
	[S_NODE_STATUS] = FILE_NODE("status", 0444, S_NODE, render_node_status, NULL),
	[S_NODE_TARGETS] = { .name = "targets", .mode = S_IFDIR | 0555, .parent = S_NODE,
			     .dynamic = NODE_TARGETS },
	[S_SERVICE] = DIR_NODE("", 0555, -1),
	FILE_NODE("window", 0600, S_SERVICE, node_render_window, node_write_window),
	PROFILE_VIEWS("cpu", S_SERVICE, TARGET_PROFILE_CPU),
	VIEW_NODE("flame.svg", S_SERVICE, TARGET_PROFILE_CPU, VIEW_SVG),
	PROFILE_VIEWS("offcpu", S_SERVICE, TARGET_PROFILE_OFFCPU),
	PROFILE_VIEWS("locks", S_SERVICE, TARGET_PROFILE_LOCKS),
	PROFILE_VIEWS("alloc", S_SERVICE, TARGET_PROFILE_JVM_ALLOC),
	PROFILE_VIEWS("alloc_objects", S_SERVICE, TARGET_PROFILE_JVM_ALLOC_OBJECTS),
	PROFILE_VIEWS("monitors", S_SERVICE, TARGET_PROFILE_JVM_MONITORS),
};

int64_t aggregator_retention_start(const struct aggregator *g, int64_t now)
{
	return (now / 86400 - (int64_t)(g->retention_days - 1)) * 86400;
}

int aggregator_retain(struct aggregator *g, int64_t now)
{
	int err = g->store->ops->retain(g->store, aggregator_retention_start(g, now));

	atomic_fetch_add(err ? &g->retain_errors : &g->retain_runs, 1);
	if (!err)
		atomic_store(&g->retain_last_unix, now);
	return err;
}

int aggregator_init(struct aggregator *g, struct agg_store *store, struct tokens *tokens,
		    unsigned retention_days)
{
	if (retention_days < 1 || retention_days > AGG_RETENTION_DAYS_MAX)
		return -ERANGE;
	memset(g, 0, sizeof(*g));
	g->store = store;
	g->tokens = tokens;
	g->insecure = !tokens;
	g->retention_days = retention_days;
	g->started = time(NULL);
	pthread_mutex_init(&g->windows_lock, NULL);
	pthread_mutex_init(&g->usage_lock, NULL);
	g->tree = (struct tree){ .ops = &agg_ops, .ctx = g, .started = g->started,
				 .root = agg_root_nodes,
				 .nroot = sizeof(agg_root_nodes) / sizeof(agg_root_nodes[0]),
				 .scope_nodes = agg_scope_nodes,
				 .nscope = sizeof(agg_scope_nodes) / sizeof(agg_scope_nodes[0]),
				 .scope_dir = { [AGG_SCOPE_NODE] = S_NODE,
						[AGG_SCOPE_SERVICE] = S_SERVICE } };
	return 0;
}

void aggregator_fini(struct aggregator *g)
{
	struct agg_window *w, *tmp;

	HASH_ITER(hh, g->windows, w, tmp) {
		HASH_DEL(g->windows, w);
		free(w);
	}
	pthread_mutex_destroy(&g->windows_lock);
	pthread_mutex_destroy(&g->usage_lock);
	free(g->usage_text);
}
