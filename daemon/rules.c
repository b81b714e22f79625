#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>
#include "daemon/aperture.h"
#include "daemon/cgroup_id.h"
#include "daemon/exec_watch.h"
#include "daemon/proc_identity.h"
#include "daemon/rules.h"
#include "daemon/targets.h"
#include "daemon/value.h"

#define RULES_TEXT_MAX 65536
#define RULE_MATCHES_MAX 8
/* With the exec watch, /proc is still read whole now and then: for what the ring lost (at
 * once when the kernel counts a loss) and for labels an exec took off an unmatched process. */
#define RULES_RESCAN_S 30

enum match_kind { M_COMM, M_EXE, M_CGROUP, M_CONTAINER, M_UID, M_LABEL, M_NR };
static const char *const match_names[M_NR] = {
	[M_COMM] = "comm", [M_EXE] = "exe", [M_CGROUP] = "cgroup",
	[M_CONTAINER] = "container", [M_UID] = "uid", [M_LABEL] = "label",
};

enum rule_action { A_ENABLE, A_DISABLE, A_SET };

struct match {
	enum match_kind kind;
	char *glob;
	uid_t uid;
};

struct rule {
	int line;
	struct match m[RULE_MATCHES_MAX];
	int nm;
	enum rule_action act;
	uint64_t duration;
	uint32_t collectors; /* 0: the target's own or config/collectors */
	char *labels;        /* for set */
};

/* A process as the last pass saw it: a new start time or comm (an exec) is a new one. */
struct seen {
	pid_t pid;
	uint64_t start_time;
	char comm[16];
	bool alive;
	bool counted; /* in rules_enabled */
	UT_hash_handle hh;
};

struct rules {
	struct aperture *a;
	pthread_mutex_t lock;  /* everything below; held through a pass */
	char *text;
	struct rule *v;
	size_t n;
	struct seen *seen;
	unsigned enabled_by_rules, bounded;
	/* New processes come from the exec watch while a rule can act on them, else from a
	 * pass over /proc each tick. */
	struct exec_watch *watch;
	struct facts *facts; /* what apply knows of the process at hand */
	char watch_error[200];
	uint64_t lost_seen, rescans; /* rescans: passes over /proc */
	unsigned ticks_since_pass;
};

/* What a pass knows of a process, read when a rule asks: an exec event brings only pid and
 * comm, and a rule by comm costs it no read of /proc. */
struct facts {
	pid_t pid;
	char comm[16];
	uint64_t start_time; /* 0 until read */
	struct proc_identity id;
	int id_err;          /* 1 until id is read */
	bool have_exe, have_cgroup;
	char exe[4096], cgroup[4096];
	struct cgroup_id cid;
	char labels[1024];
};

static void rules_clear(struct rule *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (int j = 0; j < v[i].nm; j++)
			free(v[i].m[j].glob);
		free(v[i].labels);
	}
	free(v);
}

int rules_new(struct aperture *a, struct rules **out)
{
	struct rules *r = calloc(1, sizeof(*r));

	if (!r || !(r->facts = malloc(sizeof(*r->facts)))) {
		free(r);
		return -ENOMEM;
	}
	r->a = a;
	r->ticks_since_pass = RULES_RESCAN_S; /* --rules: the first tick applies them */
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

static void seen_clear(struct rules *r)
{
	struct seen *s, *tmp;

	HASH_ITER(hh, r->seen, s, tmp) {
		HASH_DEL(r->seen, s);
		free(s);
	}
}

void rules_free(struct rules *r)
{
	if (!r)
		return;
	exec_watch_free(r->watch);
	seen_clear(r);
	rules_clear(r->v, r->n);
	free(r->facts);
	free(r->text);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static bool label_key_char(char c)
{
	return isalnum((unsigned char)c) || strchr("._-/", c);
}

static bool label_value_char(char c)
{
	return isalnum((unsigned char)c) || strchr("._-", c);
}

/* One KEY=VALUE word of len bytes. */
static int label_check(const char *w, size_t len, char *why, size_t why_size)
{
	const char *eq = memchr(w, '=', len);

	if (!eq || eq == w) {
		snprintf(why, why_size, "\"%.*s\" is not KEY=VALUE", (int)len, w);
		return -EINVAL;
	}
	for (const char *p = w; p < eq; p++)
		if (!label_key_char(*p))
			goto bad;
	for (const char *p = eq + 1; p < w + len; p++)
		if (!label_value_char(*p))
			goto bad;
	if (len > 127) {
		snprintf(why, why_size, "label \"%.20s...\" is longer than 127 bytes", w);
		return -EINVAL;
	}
	return 0;
bad:
	snprintf(why, why_size, "label \"%.*s\": a key is letters, digits and ._-/, a value "
		 "letters, digits and ._-", (int)len, w);
	return -EINVAL;
}

int labels_check(const char *text, char *why, size_t why_size)
{
	for (const char *p = text; *p;) {
		size_t n;

		p += strspn(p, " \t");
		n = strcspn(p, " \t");
		if (n && label_check(p, n, why, why_size))
			return -EINVAL;
		p += n;
	}
	return 0;
}

int labels_merge(char *labels, size_t size, const char *add)
{
	char out[1024] = "";
	const char *lists[2] = { labels, add };

	/* Each word of labels not overridden by add, then add's words. */
	for (int l = 0; l < 2; l++) {
		for (const char *p = lists[l]; *p;) {
			size_t n, klen;
			bool replaced = false;

			p += strspn(p, " ");
			n = strcspn(p, " ");
			if (!n)
				break;
			klen = strcspn(p, "=") + 1;
			for (const char *q = add; l == 0 && *q;) {
				size_t m;

				q += strspn(q, " ");
				m = strcspn(q, " ");
				if (m >= klen && !strncmp(p, q, klen))
					replaced = true;
				q += m;
			}
			if (!replaced) {
				size_t used = strlen(out);

				if (used + n + 2 > sizeof(out))
					return -ENOSPC;
				snprintf(out + used, sizeof(out) - used, "%s%.*s", used ? " " : "",
					 (int)n, p);
			}
			p += n;
		}
	}
	if (strlen(out) >= size)
		return -ENOSPC;
	memcpy(labels, out, strlen(out) + 1);
	return 0;
}

static int kind_of(const char *word, size_t len)
{
	for (int k = 0; k < M_NR; k++)
		if (strlen(match_names[k]) == len && !strncmp(word, match_names[k], len))
			return k;
	return -1;
}

/* Splits line into words in place: at most max. */
static int split(char *line, char **words, int max)
{
	char *save;
	int n = 0;

	for (char *p = strtok_r(line, " \t", &save); p; p = strtok_r(NULL, " \t", &save)) {
		if (n == max)
			return -E2BIG;
		words[n++] = p;
	}
	return n;
}

static int parse_rule(char *line, int lineno, struct rule *out, char *why, size_t why_size)
{
	char *w[32], err_why[160];
	int n = split(line, w, 32), i;

	*out = (struct rule){ .line = lineno };
	if (n < 0) {
		snprintf(why, why_size, "more than 32 words");
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		char *eq = strchr(w[i], '=');
		int k = eq ? kind_of(w[i], eq - w[i]) : -1;

		if (k < 0)
			break;
		if (out->nm == RULE_MATCHES_MAX) {
			snprintf(why, why_size, "more than %d matches", RULE_MATCHES_MAX);
			return -EINVAL;
		}
		if (k == M_UID) {
			uint64_t uid;

			if (value_parse_uint(eq + 1, strlen(eq + 1), 0, UINT32_MAX - 1, &uid)) {
				snprintf(why, why_size, "uid=\"%s\" is not a number", eq + 1);
				return -EINVAL;
			}
			out->m[out->nm].uid = uid;
		}
		if (k == M_LABEL && !strchr(eq + 1, '=')) {
			snprintf(why, why_size, "label=\"%s\" is not label=KEY=GLOB", eq + 1);
			return -EINVAL;
		}
		out->m[out->nm].kind = k;
		if (!(out->m[out->nm++].glob = strdup(eq + 1)))
			return -ENOMEM;
	}
	if (i == n) {
		snprintf(why, why_size, "no action: enable, disable or set");
		return -EINVAL;
	}
	if (!strcmp(w[i], "disable")) {
		out->act = A_DISABLE;
		if (i + 1 < n) {
			snprintf(why, why_size, "disable takes nothing: \"%s\"", w[i + 1]);
			return -EINVAL;
		}
		return 0;
	}
	if (!strcmp(w[i], "set")) {
		size_t total = 1;

		out->act = A_SET;
		if (i + 1 == n) {
			snprintf(why, why_size, "set needs KEY=VALUE labels");
			return -EINVAL;
		}
		for (int j = i + 1; j < n; j++) {
			if (label_check(w[j], strlen(w[j]), why, why_size))
				return -EINVAL;
			total += strlen(w[j]) + 1;
		}
		out->labels = calloc(1, total);
		if (!out->labels)
			return -ENOMEM;
		for (int j = i + 1; j < n; j++)
			if (labels_merge(out->labels, total, w[j])) {
				snprintf(why, why_size, "too many labels");
				return -EINVAL;
			}
		return 0;
	}
	if (strcmp(w[i], "enable")) {
		snprintf(why, why_size, "\"%s\" is neither a match (%s=..., ...) nor an action "
			 "(enable, disable, set)", w[i], match_names[0]);
		return -EINVAL;
	}
	out->act = A_ENABLE;
	for (int j = i + 1; j < n; j++) {
		int on;

		if (!strncmp(w[j], "for=", 4)) {
			if (value_parse_enable(w[j] + 4, strlen(w[j] + 4), &on, &out->duration) ||
			    !out->duration) {
				snprintf(why, why_size, "\"%s\": a duration is 1s to 7d (30s, 5m, 2h, "
					 "1d)", w[j]);
				return -EINVAL;
			}
		} else if (!strncmp(w[j], "collectors=", 11)) {
			if (aperture_collectors_parse(w[j] + 11, strlen(w[j] + 11), &out->collectors,
						      err_why, sizeof(err_why))) {
				snprintf(why, why_size, "%s", err_why);
				return -EINVAL;
			}
		} else {
			snprintf(why, why_size, "enable takes for=DURATION and collectors=LIST, not "
				 "\"%s\"", w[j]);
			return -EINVAL;
		}
	}
	return 0;
}

static int parse(const char *text, struct rule **out, size_t *nout, char *why,
		 size_t why_size)
{
	char *copy = strdup(text), *line, *next, msg[200];
	struct rule *v = NULL;
	size_t n = 0;
	int lineno = 0, err = 0;

	if (!copy)
		return -ENOMEM;
	for (line = copy; !err && line; line = next) {
		struct rule *bigger;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		lineno++;
		line[strcspn(line, "#")] = 0;
		if (!line[strspn(line, " \t\r")])
			continue;
		bigger = realloc(v, (n + 1) * sizeof(*v));
		if (!bigger) {
			err = -ENOMEM;
			break;
		}
		v = bigger;
		line[strcspn(line, "\r")] = 0;
		err = parse_rule(line, lineno, &v[n], msg, sizeof(msg));
		n++;
		if (err == -EINVAL)
			snprintf(why, why_size, "line %d: %s", lineno, msg);
	}
	free(copy);
	if (err) {
		rules_clear(v, n);
		return err;
	}
	*out = v;
	*nout = n;
	return 0;
}

static const char *fact_exe(struct facts *f)
{
	char path[64];
	ssize_t n;

	if (!f->have_exe) {
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)f->pid);
		n = readlink(path, f->exe, sizeof(f->exe) - 1);
		f->exe[n > 0 ? n : 0] = 0;
		f->have_exe = true;
	}
	return f->exe;
}

static const char *fact_cgroup(struct facts *f)
{
	if (!f->have_cgroup) {
		if (proc_cgroup_path(f->pid, f->cgroup, sizeof(f->cgroup)))
			f->cgroup[0] = 0;
		cgroup_id_parse(f->cgroup, &f->cid);
		f->have_cgroup = true;
	}
	return f->cgroup;
}

static const struct proc_identity *fact_id(struct facts *f)
{
	if (f->id_err == 1)
		f->id_err = proc_identity_read(f->pid, &f->id);
	if (!f->id_err && !f->start_time)
		f->start_time = f->id.start_time;
	return f->id_err ? NULL : &f->id;
}

/* The facts of a process about to be matched (start_time 0: not read yet); r->lock held. */
static struct facts *facts_for(struct rules *r, pid_t pid, const char *comm,
			       uint64_t start_time)
{
	struct facts *f = r->facts;

	f->pid = pid;
	snprintf(f->comm, sizeof(f->comm), "%s", comm);
	f->start_time = start_time;
	f->id_err = 1;
	f->have_exe = f->have_cgroup = false;
	return f;
}

static bool label_matches(const char *labels, const char *glob)
{
	char word[256];

	for (const char *p = labels; *p;) {
		size_t n;

		p += strspn(p, " ");
		n = strcspn(p, " ");
		if (n && n < sizeof(word)) {
			memcpy(word, p, n);
			word[n] = 0;
			if (!fnmatch(glob, word, 0))
				return true;
		}
		p += n;
	}
	return false;
}

static bool match_one(const struct match *m, struct facts *f)
{
	switch (m->kind) {
	case M_COMM:
		return !fnmatch(m->glob, f->comm, 0);
	case M_EXE:
		return !fnmatch(m->glob, fact_exe(f), 0);
	case M_CGROUP:
		return !fnmatch(m->glob, fact_cgroup(f), 0);
	case M_CONTAINER:
		fact_cgroup(f);
		return f->cid.container_id[0] && !fnmatch(m->glob, f->cid.container_id, 0);
	case M_UID:
		return fact_id(f) && f->id.ruid == m->uid;
	case M_LABEL:
		return label_matches(f->labels, m->glob);
	case M_NR:
		break;
	}
	return false;
}

/* Notes pid as applied, so a pass does not apply it again until it exec's. */
static struct seen *seen_put(struct rules *r, pid_t pid, uint64_t start_time, const char *comm)
{
	struct seen *s;

	HASH_FIND_INT(r->seen, &pid, s);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->pid = pid;
		HASH_ADD_INT(r->seen, pid, s);
	}
	if (s->start_time != start_time)
		s->counted = false;
	s->start_time = start_time;
	snprintf(s->comm, sizeof(s->comm), "%s", comm);
	s->alive = true;
	return s;
}

/* The rules' verdict on one process, applied; f holds its pid and comm, and its start time
 * if known. An exec event (!must_apply) that no rule matched changes nothing now: the next
 * rescan applies "no rule" to it. Returns whether it was applied. */
static bool apply(struct rules *r, struct facts *f, bool must_apply, bool reapply)
{
	struct target_rule_outcome o = { .reapply = reapply, .labels = "" };
	char rule_labels[1024] = "";
	const struct rule *decided = NULL;
	bool matched = false;
	int err;

	config_get_labels(r->a, f->labels, sizeof(f->labels));
	for (size_t i = 0; i < r->n; i++) {
		const struct rule *ru = &r->v[i];
		bool all = true;

		for (int j = 0; all && j < ru->nm; j++)
			all = match_one(&ru->m[j], f);
		if (!all)
			continue;
		matched = true;
		if (ru->act == A_SET) {
			labels_merge(rule_labels, sizeof(rule_labels), ru->labels);
			labels_merge(f->labels, sizeof(f->labels), ru->labels);
		} else {
			decided = ru;
		}
	}
	if (!matched && !must_apply)
		return false;
	if (!f->start_time && !fact_id(f))
		return false; /* gone */
	if (decided) {
		o.decision = decided->act == A_ENABLE ? TARGET_RULE_ENABLE : TARGET_RULE_DISABLE;
		o.rule = decided->line;
		o.collectors = decided->collectors;
		o.duration = decided->duration;
	}
	o.labels = rule_labels;
	err = targets_apply_rule(r->a->targets, f->pid, f->start_time, &o);
	if (err == -EDQUOT) {
		r->bounded++;
		aperture_set_error(r->a, "rules: rule %d left %u processes disabled: "
				   "config/max_targets (%llu) targets are enabled", o.rule,
				   r->bounded,
				   (unsigned long long)config_get(r->a, CONFIG_MAX_TARGETS));
	} else if (!err && o.decision == TARGET_RULE_ENABLE) {
		/* Once per process: its fork's event and its exec's may both find it. */
		struct seen *s = seen_put(r, f->pid, f->start_time, f->comm);

		if (s && !s->counted) {
			s->counted = true;
			r->enabled_by_rules++;
		}
	}
	return true;
}

static int read_stat(pid_t pid, struct proc_identity *id)
{
	char text[1024];
	int err = proc_read_file(pid, "stat", text, sizeof(text));

	return err ? err : proc_identity_parse_stat(text, id);
}

/* One pass over /proc: every process (all) or those new or exec'd since the last. */
static void pass_locked(struct rules *r, bool all)
{
	struct seen *s, *tmp;
	struct dirent *de;
	DIR *proc;

	if (all) {
		r->bounded = 0;
		r->enabled_by_rules = 0;
	}
	proc = opendir("/proc");
	if (!proc)
		return;
	r->rescans++;
	HASH_ITER(hh, r->seen, s, tmp) {
		s->alive = false;
		s->counted &= !all;
	}
	while ((de = readdir(proc))) {
		struct proc_identity id;
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == getpid() || read_stat(pid, &id))
			continue;
		HASH_FIND_INT(r->seen, &(pid_t){ pid }, s);
		if (s && s->start_time == id.start_time && !strcmp(s->comm, id.comm) && !all) {
			s->alive = true;
			continue;
		}
		if (!seen_put(r, pid, id.start_time, id.comm))
			break;
		apply(r, facts_for(r, pid, id.comm, id.start_time), true, all);
	}
	closedir(proc);
	HASH_ITER(hh, r->seen, s, tmp)
		if (!s->alive) {
			HASH_DEL(r->seen, s);
			free(s);
		}
}

/* An exec or fork the kernel just reported: the rules apply now, while the program has run
 * for microseconds. */
static void on_exec(void *ctx, pid_t pid, const char *comm)
{
	struct rules *r = ctx;
	struct facts *f;

	if (pid == getpid())
		return;
	pthread_mutex_lock(&r->lock);
	f = facts_for(r, pid, comm, 0);
	if (r->n && apply(r, f, false, false))
		seen_put(r, pid, f->start_time, comm);
	pthread_mutex_unlock(&r->lock);
}

/* Only rules that enable or label act on a new process. */
static bool rules_want_watch(const struct rules *r)
{
	if (getenv("APERTURE_RULES_POLL")) /* for benchmarks and tests of the poll */
		return false;
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].act != A_DISABLE)
			return true;
	return false;
}

/* Starts the exec watch when the rules want it; returns the one to stop, once r->lock is
 * let go (its thread may be waiting for the lock). */
static struct exec_watch *watch_update_locked(struct rules *r)
{
	struct exec_watch *old = NULL;
	char why[sizeof(r->watch_error)];

	if (!rules_want_watch(r)) {
		old = r->watch;
		r->watch = NULL;
		return old;
	}
	if (!r->watch) {
		if (exec_watch_new(on_exec, r, &r->watch, why, sizeof(why)))
			snprintf(r->watch_error, sizeof(r->watch_error), "%s", why);
		else
			r->watch_error[0] = 0;
		r->lost_seen = 0;
	}
	return NULL;
}

static int load(struct rules *r, const char *text, size_t len, bool apply, char *why,
		size_t why_size)
{
	struct exec_watch *old;
	struct rule *v;
	char *copy;
	size_t n;
	int err;

	if (len > RULES_TEXT_MAX) {
		snprintf(why, why_size, "longer than %d bytes", RULES_TEXT_MAX);
		return -ERANGE;
	}
	copy = strndup(text, len);
	if (!copy)
		return -ENOMEM;
	if (strlen(copy) != len) {
		free(copy);
		snprintf(why, why_size, "contains a NUL byte");
		return -EINVAL;
	}
	err = parse(copy, &v, &n, why, why_size);
	if (err) {
		free(copy);
		return err;
	}
	pthread_mutex_lock(&r->lock);
	rules_clear(r->v, r->n);
	free(r->text);
	r->v = v;
	r->n = n;
	r->text = copy;
	/* Watching before the pass: a process exec'd during it is not missed. At start
	 * (!apply: --rules, before the daemon forks) the first tick starts the thread. */
	old = apply ? watch_update_locked(r) : NULL;
	/* Also with no rules left: what the old ones enabled goes. */
	if (apply) {
		pass_locked(r, true);
		r->ticks_since_pass = 0;
	}
	if (!r->n)
		seen_clear(r);
	pthread_mutex_unlock(&r->lock);
	exec_watch_free(old);
	return 0;
}

int rules_set(struct rules *r, bool append, const char *text, size_t len, char *why,
	      size_t why_size)
{
	char *whole = NULL;
	size_t size = 0;
	FILE *f;
	int err;

	if (!append)
		return load(r, text, len, true, why, why_size);
	f = open_memstream(&whole, &size);
	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&r->lock);
	if (r->text)
		fputs(r->text, f);
	pthread_mutex_unlock(&r->lock);
	fwrite(text, 1, len, f);
	if (fclose(f)) {
		free(whole);
		return -ENOMEM;
	}
	err = load(r, whole, size, true, why, why_size);
	free(whole);
	return err;
}

int rules_load(struct rules *r, const char *text, size_t len, char *why, size_t why_size)
{
	return load(r, text, len, false, why, why_size);
}

int rules_read(struct rules *r, FILE *out)
{
	int err = 0;

	pthread_mutex_lock(&r->lock);
	if (r->text && r->text[0])
		err = fputs(r->text, out) < 0 ? -EIO : 0;
	if (!err && r->text && r->text[0] && r->text[strlen(r->text) - 1] != '\n')
		err = fputc('\n', out) < 0 ? -EIO : 0;
	pthread_mutex_unlock(&r->lock);
	return err;
}

/* Without the watch, a pass each tick finds new processes; with it, a rare one (or one at
 * once when the ring lost events) finds what the events could not tell. */
void rules_tick(struct rules *r)
{
	struct exec_watch *old = NULL;
	uint64_t events, lost = 0;

	pthread_mutex_lock(&r->lock);
	/* Rules loaded at start; a watch the kernel refused is tried again at the next write. */
	if (!r->watch_error[0])
		old = watch_update_locked(r);
	if (r->watch)
		exec_watch_counts(r->watch, &events, &lost);
	if (r->n && (!r->watch || lost != r->lost_seen ||
		     ++r->ticks_since_pass >= RULES_RESCAN_S)) {
		pass_locked(r, false);
		r->ticks_since_pass = 0;
		r->lost_seen = lost;
	}
	pthread_mutex_unlock(&r->lock);
	exec_watch_free(old);
}

void rules_status(struct rules *r, FILE *out)
{
	uint64_t events, lost;

	pthread_mutex_lock(&r->lock);
	fprintf(out, "rules: %zu\nrules_enabled: %u\nrules_bounded: %u", r->n,
		r->enabled_by_rules, r->bounded);
	if (r->bounded)
		fprintf(out, " (config/max_targets %llu reached)",
			(unsigned long long)config_get(r->a, CONFIG_MAX_TARGETS));
	fputc('\n', out);
	if (r->watch) {
		exec_watch_counts(r->watch, &events, &lost);
		fprintf(out, "rules_new_processes: exec watch (sched_process_exec and "
			"sched_process_fork raw tracepoints), /proc rescanned every %d s\n"
			"rules_exec_events: %llu\nrules_exec_lost: %llu\n", RULES_RESCAN_S,
			(unsigned long long)events, (unsigned long long)lost);
	} else if (r->n) {
		fprintf(out, "rules_new_processes: /proc polled every second%s%s\n",
			r->watch_error[0] ? ": " : "", r->watch_error);
	} else {
		fprintf(out, "rules_new_processes: none watched (no rules)\n");
	}
	fprintf(out, "rules_passes: %llu\n", (unsigned long long)r->rescans);
	pthread_mutex_unlock(&r->lock);
}
