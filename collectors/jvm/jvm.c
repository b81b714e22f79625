/* The JVM collector's sessions: one per enabled JVM, each with a worker thread that attaches
 * (so no FUSE thread ever waits on a JVM), then watches the process until the session ends.
 * Requests to the agent come from render-pool threads, one at a time per session, each with a
 * deadline; an agent that misses one is hung up on and the session fails with the reason. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>
#include "collectors/cpu.h"
#include "collectors/jvm/jvm.h"
#include "collectors/jvm/jvm_internal.h"
#include "collectors/jvm/protocol.h"
#include "store/profile.h"
#include "symbols/read_file.h"

#define ATTACH_TIMEOUT_MS 10000
#define CONNECT_TIMEOUT_MS 5000
#define REQUEST_TIMEOUT_MS 10000
#define REPLY_MAX (64u << 20)
#define FREE_WAIT_S 2

enum session_state { S_ATTACHING, S_ATTACHED, S_FAILED, S_DETACHED };

static const char *const state_names[] = {
	[S_ATTACHING] = "attaching",
	[S_ATTACHED] = "attached",
	[S_FAILED] = "failed",
	[S_DETACHED] = "detached",
};

struct session {
	struct jvm_collector *c;
	pid_t pid;
	uint64_t start_time;
	uid_t uid;
	gid_t gid;
	int refs;                 /* the table's, the worker's, and each request's */

	/* Under the collector's lock. */
	enum session_state state;
	bool stop;
	char reason[256];
	char last_error[256];
	char vm_version[64];
	char events[128];         /* the agent's answer to "events", lines joined */
	uint64_t events_lost;
	char java[32];            /* the agent's answer to "cpu", "" before */
	bool java_on;             /* the cpu collector waits for its Java stacks */
	uint64_t java_failed, java_dropped, java_stacks;
	int java_last_error;
	uint64_t alloc_interval;  /* the agent's last word on it; 0: not said */
	int64_t attach_ms;
	pthread_cond_t wake;

	pthread_mutex_t io;       /* one request at a time on fd */
	int fd;                   /* the agent's connection, -1 when none */
	struct jvm_profiles profiles; /* referenced */

	UT_hash_handle hh;
};

struct jvm_collector {
	pthread_mutex_t lock;
	struct session *by_pid;
	int workers;              /* running: free waits for them */
	const _Atomic uint64_t *alloc_interval;
	struct cpu_collector *cpu;
	pthread_cond_t idle;
	char agent_path[4096];
	char agent_name[96];      /* versioned by protocol and content */
};

static uint64_t content_hash(const char *path)
{
	uint64_t h = 1469598103934665603ULL;
	size_t len;
	char *data;

	if (read_file(path, &data, &len))
		return 0;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)data[i]) * 1099511628211ULL;
	free(data);
	return h;
}

int jvm_collector_new(const char *agent_path, const _Atomic uint64_t *alloc_interval,
		      struct cpu_collector *cpu, struct jvm_collector **out)
{
	struct jvm_collector *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;

	if (!c)
		return -ENOMEM;
	c->alloc_interval = alloc_interval;
	c->cpu = cpu;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->idle, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(c->agent_path, sizeof(c->agent_path), "%s", agent_path);
	snprintf(c->agent_name, sizeof(c->agent_name), "aperture-jvm-agent-%d-%016llx.so",
		 APERTURE_AGENT_PROTOCOL, (unsigned long long)content_hash(agent_path));
	*out = c;
	return 0;
}

static void session_unref_locked(struct session *s)
{
	if (--s->refs)
		return;
	if (s->fd >= 0)
		close(s->fd);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->io);
	profile_unref(s->profiles.alloc);
	profile_unref(s->profiles.alloc_objects);
	profile_unref(s->profiles.monitors);
	free(s);
}

static void session_unref(struct jvm_collector *c, struct session *s)
{
	pthread_mutex_lock(&c->lock);
	session_unref_locked(s);
	pthread_mutex_unlock(&c->lock);
}

/* Ticks after boot at which pid started, 0 if it is gone. */
static uint64_t start_time_of(pid_t pid)
{
	unsigned long long t = 0;
	char path[64], *text, *p;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, &text, &len))
		return 0;
	/* Field 22; comm (field 2) may hold spaces, so count from its closing parenthesis. */
	p = memrchr(text, ')', len);
	/* A zombie has exited: only its parent's wait keeps its entry. */
	if (p && text + len - p > 2 && (p[2] == 'Z' || p[2] == 'X'))
		p = NULL;
	for (int field = 2; p && field < 22; field++)
		p = memchr(p + 1, ' ', text + len - p - 1);
	if (p)
		t = strtoull(p + 1, NULL, 10);
	free(text);
	return t;
}

static bool session_alive(const struct session *s)
{
	return start_time_of(s->pid) == s->start_time;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads until buf holds a newline or len bytes, by the deadline. */
static int read_by(int fd, char *buf, size_t len, bool line, int64_t deadline, size_t *got)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	*got = 0;
	while (*got < len) {
		int64_t left = deadline - mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, left) == 0)
			return -ETIMEDOUT;
		n = read(fd, buf + *got, line ? 1 : len - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		*got += n;
		if (line && buf[*got - 1] == '\n')
			return 0;
	}
	return line ? -EPROTO : 0;
}

static int hello(struct session *s, char *why, size_t whylen)
{
	char line[256], ready[32], version[64];
	size_t got;
	int proto, err;

	err = read_by(s->fd, line, sizeof(line) - 1, true, mono_ms() + CONNECT_TIMEOUT_MS, &got);
	if (err) {
		snprintf(why, whylen, "the agent did not say hello: %s", strerror(-err));
		return err;
	}
	line[got] = 0;
	if (sscanf(line, APERTURE_AGENT_HELLO " %d %31s %63s", &proto, ready, version) != 3 ||
	    proto != APERTURE_AGENT_PROTOCOL) {
		snprintf(why, whylen, "unsupported agent: it said %.100s", line);
		return -EPROTO;
	}
	if (strcmp(ready, "ready")) {
		snprintf(why, whylen, "unsupported JVM: java.management (ThreadMXBean) is missing");
		return -EOPNOTSUPP;
	}
	snprintf(s->vm_version, sizeof(s->vm_version), "%s", version);
	return 0;
}

static int attach(struct jvm_collector *c, struct session *s, char *why, size_t whylen)
{
	char inside[128], host[128], agent[160], options[192];
	pid_t nspid;
	int lfd = -1, err;

	switch (jvm_runtime_of(s->pid)) {
	case JVM_HOTSPOT:
		break;
	case JVM_OTHER:
		snprintf(why, whylen, "unsupported JVM: not HotSpot (OpenJ9)");
		return -EOPNOTSUPP;
	default:
		snprintf(why, whylen, "unsupported JVM: libjvm.so is not mapped");
		return -EOPNOTSUPP;
	}
	if (jvm_attach_disabled(s->pid)) {
		snprintf(why, whylen, "attach disabled: the JVM runs with "
			 "-XX:+DisableAttachMechanism");
		return -EPERM;
	}
	err = proc_nspid(s->pid, &nspid);
	if (err) {
		snprintf(why, whylen, "reading its pid namespace: %s", strerror(-err));
		return err;
	}
	err = jvm_agent_install(s->pid, c->agent_path, c->agent_name, why, whylen);
	if (!err)
		err = jvm_channel_listen(s->pid, s->uid, s->gid, inside, sizeof(inside), host,
					 sizeof(host), &lfd, why, whylen);
	if (err)
		return err;
	snprintf(agent, sizeof(agent), "/tmp/%s", c->agent_name);
	snprintf(options, sizeof(options), "v=%d,sock=%s", APERTURE_AGENT_PROTOCOL, inside);
	/* Right after a disable, the agent's previous session may still be ending. */
	for (int tries = 0; tries < 10; tries++) {
		err = jvm_attach_load(s->pid, nspid, s->uid, s->gid, agent, options,
				      ATTACH_TIMEOUT_MS, why, whylen);
		if (err != -EBUSY)
			break;
		usleep(200 * 1000);
	}
	if (!err)
		err = jvm_channel_accept(lfd, s->pid, CONNECT_TIMEOUT_MS, &s->fd, why, whylen);
	/* Connected (or failed): the socket's name has done its job. */
	unlink(host);
	close(lfd);
	if (!err)
		err = hello(s, why, whylen);
	return err;
}

static int request(struct session *s, const char *req, char **data, size_t *len);

/* Why a session ended: the process being gone explains any error best. */
static void session_fail_locked(struct session *s, const char *during, const char *why)
{
	s->state = S_FAILED;
	if (!session_alive(s))
		snprintf(s->reason, sizeof(s->reason), "the JVM exited during %s", during);
	else if (!strncmp(why, "permission denied", 17) || strstr(why, strerror(EACCES)) ||
		 strstr(why, strerror(EPERM)))
		snprintf(s->reason, sizeof(s->reason), "permission denied: %s", why);
	else
		snprintf(s->reason, sizeof(s->reason), "%s", why);
}

static void start_events(struct session *s)
{
	char req[64], *data;
	size_t len;

	snprintf(req, sizeof(req), "events %llu",
		 (unsigned long long)atomic_load(s->c->alloc_interval));
	if (request(s, req, &data, &len))
		return;
	/* One line from each part of the agent: "alloc=.. monitors=.. jit=..", "juc=..". */
	for (char *p = data; *p; p++)
		if (*p == '\n')
			*p = ' ';
	pthread_mutex_lock(&s->c->lock);
	snprintf(s->events, sizeof(s->events), "%s", data);
	pthread_mutex_unlock(&s->c->lock);
	free(data);
}

/* Has the agent walk the Java stack of each thread the cpu collector samples. SIGURG: its
 * default is to be ignored, so a signal that outlives the handler harms no process, and
 * HotSpot leaves it alone. */
static void start_java(struct session *s)
{
	char req[32], *data;
	size_t len;
	bool on;

	if (!s->c->cpu)
		return;
	snprintf(req, sizeof(req), "cpu %d", SIGURG);
	if (request(s, req, &data, &len))
		return;
	on = !strncmp(data, "cpu=on", 6) && !cpu_collector_java(s->c->cpu, s->pid, SIGURG);
	pthread_mutex_lock(&s->c->lock);
	snprintf(s->java, sizeof(s->java), "%.*s", (int)strcspn(data, "\n"), data);
	s->java_on = on;
	pthread_mutex_unlock(&s->c->lock);
	free(data);
}

static void stop_java(struct session *s)
{
	if (s->java_on)
		cpu_collector_java(s->c->cpu, s->pid, 0);
	s->java_on = false;
}

static void drain(struct session *s)
{
	struct jvm_java_stacks java = { 0 };
	struct jvm_drain d = {0};
	struct timespec now;
	char req[64], *data;
	size_t len;
	int err;

	snprintf(req, sizeof(req), "drain %llu",
		 (unsigned long long)atomic_load(s->c->alloc_interval));
	if (request(s, req, &data, &len))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	err = jvm_events_add(data, len, &s->profiles, now.tv_sec, &d, &java);
	if (s->java_on && java.n && !jvm_host_tids(s->pid, java.v, java.n))
		cpu_collector_java_stacks(s->c->cpu, s->pid, java.v, java.n);
	free(data);
	pthread_mutex_lock(&s->c->lock);
	s->events_lost += d.lost;
	if (d.alloc_interval)
		s->alloc_interval = d.alloc_interval;
	s->java_failed = java.failed;
	s->java_dropped = java.dropped;
	s->java_last_error = java.last_error;
	s->java_stacks += java.n;
	jvm_java_stacks_free(&java);
	if (err)
		snprintf(s->last_error, sizeof(s->last_error), "drain: %s",
			 err == -EPROTO ? "the agent's records are malformed" : strerror(-err));
	pthread_mutex_unlock(&s->c->lock);
}

static void *worker_main(void *arg)
{
	struct session *s = arg;
	struct jvm_collector *c = s->c;
	char why[256] = "";
	int64_t t0 = mono_ms();
	int err;

	err = attach(c, s, why, sizeof(why));
	pthread_mutex_lock(&c->lock);
	s->attach_ms = mono_ms() - t0;
	if (err)
		session_fail_locked(s, "attach", why);
	else
		s->state = S_ATTACHED;
	pthread_mutex_unlock(&c->lock);
	if (!err) {
		start_events(s);
		start_java(s);
	}
	pthread_mutex_lock(&c->lock);
	/* Drain once a second, and watch the process: a JVM that exits mid-collection ends the
	 * session with the reason. */
	while (s->state == S_ATTACHED && !s->stop) {
		struct timespec next;

		clock_gettime(CLOCK_MONOTONIC, &next);
		next.tv_sec++;
		pthread_cond_timedwait(&s->wake, &c->lock, &next);
		if (s->stop)
			break;
		if (!session_alive(s)) {
			session_fail_locked(s, "collection", "");
			break;
		}
		pthread_mutex_unlock(&c->lock);
		drain(s);
		pthread_mutex_lock(&c->lock);
	}
	if (s->state == S_ATTACHED && !session_alive(s)) {
		session_fail_locked(s, "collection", "");
	} else if (s->state == S_ATTACHED) {
		s->state = S_DETACHED;
		snprintf(s->reason, sizeof(s->reason), "enable was set to 0");
	}
	pthread_mutex_unlock(&c->lock);
	stop_java(s);
	/* Hanging up ends the agent's session: it gives back its capabilities. */
	pthread_mutex_lock(&s->io);
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
	pthread_mutex_unlock(&s->io);
	pthread_mutex_lock(&c->lock);
	session_unref_locked(s);
	if (--c->workers == 0)
		pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static struct session *find_locked(struct jvm_collector *c, pid_t pid)
{
	struct session *s;

	HASH_FIND_INT(c->by_pid, &pid, s);
	return s;
}

/* Drops a session from the table; its worker ends it and frees it. */
static void drop_locked(struct jvm_collector *c, struct session *s)
{
	HASH_DEL(c->by_pid, s);
	s->stop = true;
	pthread_cond_signal(&s->wake);
	session_unref_locked(s);
}

int jvm_collector_enable(struct jvm_collector *c, pid_t pid, uint64_t start_time, uid_t uid,
			 gid_t gid, const struct jvm_profiles *profiles)
{
	pthread_condattr_t ca;
	pthread_attr_t attr;
	pthread_t worker;
	struct session *s;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	s = find_locked(c, pid);
	if (s && !s->stop && (s->state == S_ATTACHING || s->state == S_ATTACHED) &&
	    s->start_time == start_time)
		goto out;
	if (s)
		drop_locked(c, s);
	s = calloc(1, sizeof(*s));
	if (!s) {
		err = -ENOMEM;
		goto out;
	}
	*s = (struct session){ .c = c, .pid = pid, .start_time = start_time, .uid = uid,
			       .gid = gid, .refs = 2, .state = S_ATTACHING, .fd = -1 };
	s->profiles.alloc = profile_ref(profiles->alloc);
	s->profiles.alloc_objects = profile_ref(profiles->alloc_objects);
	s->profiles.monitors = profile_ref(profiles->monitors);
	pthread_mutex_init(&s->io, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = -pthread_create(&worker, &attr, worker_main, s);
	pthread_attr_destroy(&attr);
	if (err) {
		s->refs = 1;
		session_unref_locked(s);
		goto out;
	}
	c->workers++;
	HASH_ADD_INT(c->by_pid, pid, s);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

void jvm_collector_disable(struct jvm_collector *c, pid_t pid)
{
	struct session *s;

	pthread_mutex_lock(&c->lock);
	s = find_locked(c, pid);
	if (s) {
		s->stop = true;
		pthread_cond_signal(&s->wake);
	}
	pthread_mutex_unlock(&c->lock);
}

void jvm_collector_forget(struct jvm_collector *c, pid_t pid)
{
	struct session *s;

	pthread_mutex_lock(&c->lock);
	s = find_locked(c, pid);
	if (s)
		drop_locked(c, s);
	pthread_mutex_unlock(&c->lock);
}

void jvm_collector_free(struct jvm_collector *c)
{
	struct session *s, *tmp;
	struct timespec deadline;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->by_pid, s, tmp)
		drop_locked(c, s);
	/* A watching worker stops at once; one attaching to a JVM that doesn't answer would
	 * hold up the daemon's exit for its whole deadline: past FREE_WAIT_S it is left to the
	 * exit, with the collector it uses. */
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += FREE_WAIT_S;
	while (c->workers && pthread_cond_timedwait(&c->idle, &c->lock, &deadline) != ETIMEDOUT)
		;
	if (c->workers) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_mutex_unlock(&c->lock);
	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void jvm_collector_state_line(struct jvm_collector *c, pid_t pid, FILE *out)
{
	struct session *s;

	pthread_mutex_lock(&c->lock);
	s = find_locked(c, pid);
	if (!s)
		fprintf(out, "jvm: off\n");
	else if (s->state == S_FAILED || s->state == S_DETACHED)
		fprintf(out, "jvm: %s: %s\n", state_names[s->state], s->reason);
	else
		fprintf(out, "jvm: %s\n", state_names[s->state]);
	pthread_mutex_unlock(&c->lock);
}

static void print_alloc(struct jvm_collector *c, const struct session *s, FILE *out)
{
	uint64_t want = atomic_load(c->alloc_interval);

	fprintf(out, "alloc: on, one sample per %llu bytes", (unsigned long long)want);
	/* The agent samples less often while allocation outpaces its rate bound. */
	if (s->alloc_interval > want)
		fprintf(out, "; now one per %llu (at most %d samples/s), each counting as %llu",
			(unsigned long long)s->alloc_interval, APERTURE_AGENT_ALLOC_RATE_MAX,
			(unsigned long long)(s->alloc_interval / want));
	fprintf(out, "\n");
}

/* The agent's "alloc=.. monitors=.. jit=.. juc=.." as status lines. */
static void print_events(struct jvm_collector *c, const struct session *s, FILE *out)
{
	const char *keys[] = { "alloc", "monitors", "jit", "juc" };
	bool attached = s && s->state == S_ATTACHED;

	for (size_t i = 0; i < 4; i++) {
		char want[16];
		const char *v = NULL;

		snprintf(want, sizeof(want), "%s=", keys[i]);
		if (attached && (v = strstr(s->events, want)))
			v += strlen(want);
		if (!v)
			fprintf(out, "%s: off\n", keys[i]);
		else if (!strncmp(v, "on", 2) && i == 0)
			print_alloc(c, s, out);
		else if (!strncmp(v, "on", 2) && i == 3)
			fprintf(out, "juc: on, sampled (approximate): every %d ms, threads parked on "
				"a Lock's synchronizer add the time since the last look to "
				"monitors, under a leaf frame CLASS_[approx]\n",
				APERTURE_AGENT_JUC_INTERVAL_MS);
		else if (!strncmp(v, "on", 2))
			fprintf(out, "%s: on\n", keys[i]);
		else if (!strncmp(v, "solo-held", 9))
			fprintf(out, "%s: unavailable: another JVMTI agent holds the solo capability "
				"can_generate_sampled_object_alloc_events\n", keys[i]);
		else if (i == 3)
			fprintf(out, "juc: unavailable: the agent could not start its sampler\n");
		else
			fprintf(out, "%s: unavailable: the JVM refused the capability\n", keys[i]);
	}
	fprintf(out, "events_lost: %llu\n", s ? (unsigned long long)s->events_lost : 0ULL);
	if (!attached || !s->java[0])
		fprintf(out, "java_frames: off\n");
	else if (s->java_on)
		fprintf(out, "java_frames: on (AsyncGetCallTrace on SIGURG), %llu stacks, %llu walks "
			"failed (last reason %d), %llu dropped\n", (unsigned long long)s->java_stacks,
			(unsigned long long)s->java_failed, s->java_last_error,
			(unsigned long long)s->java_dropped);
	else if (!strcmp(s->java, "cpu=busy"))
		fprintf(out, "java_frames: unavailable: the program handles SIGURG itself\n");
	else if (!strcmp(s->java, "cpu=unavailable"))
		fprintf(out, "java_frames: unavailable: this JVM has no AsyncGetCallTrace\n");
	else
		fprintf(out, "java_frames: unavailable: %s\n",
			c->cpu ? "the agent or the kernel refused" : "no cpu collector");
}

int jvm_collector_status(struct jvm_collector *c, pid_t pid, const char *off_reason,
			 FILE *out)
{
	struct session *s;

	pthread_mutex_lock(&c->lock);
	s = find_locked(c, pid);
	fprintf(out, "state: %s\n", s ? state_names[s->state] : "off");
	fprintf(out, "reason: %s\n", s && s->reason[0] ? s->reason :
		!s && off_reason ? off_reason : "none");
	fprintf(out, "agent_protocol: %d\n", APERTURE_AGENT_PROTOCOL);
	fprintf(out, "agent_file: /tmp/%s\n", c->agent_name);
	if (s && s->vm_version[0])
		fprintf(out, "vm_version: %s\n", s->vm_version);
	if (s && s->state != S_ATTACHING)
		fprintf(out, "attach_ms: %lld\n", (long long)s->attach_ms);
	fprintf(out, "threads: %s\n", s && s->state == S_ATTACHED ?
		"on (ThreadMXBean over JNI)" : "off");
	print_events(c, s, out);
	fprintf(out, "last_error: %s\n", s && s->last_error[0] ? s->last_error : "none");
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static struct session *get_attached(struct jvm_collector *c, pid_t pid);

void jvm_collector_drain_java(struct jvm_collector *c, pid_t pid)
{
	struct session *s = get_attached(c, pid);

	if (!s)
		return;
	if (s->java_on)
		drain(s);
	session_unref(c, s);
}

/* An attached session, referenced; NULL if pid has none. */
static struct session *get_attached(struct jvm_collector *c, pid_t pid)
{
	struct session *s;

	pthread_mutex_lock(&c->lock);
	s = find_locked(c, pid);
	if (s && s->state == S_ATTACHED && !s->stop)
		s->refs++;
	else
		s = NULL;
	pthread_mutex_unlock(&c->lock);
	return s;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= w;
	}
	return 0;
}

/* One request and its reply (NUL-terminated, *data the caller's). A channel that fails ends
 * the session; an agent's error reply only sets last_error. */
static int request(struct session *s, const char *req, char **data, size_t *len)
{
	struct jvm_collector *c = s->c;
	int64_t deadline = mono_ms() + REQUEST_TIMEOUT_MS;
	char head[64], line[160], *body = NULL;
	unsigned long long n = 0;
	int status = 0, err;
	size_t got;

	pthread_mutex_lock(&s->io);
	if (s->fd < 0) {
		pthread_mutex_unlock(&s->io);
		return -ENODATA;
	}
	snprintf(line, sizeof(line), "%s\n", req);
	err = send_all(s->fd, line, strlen(line));
	if (!err)
		err = read_by(s->fd, head, sizeof(head) - 1, true, deadline, &got);
	if (!err) {
		head[got] = 0;
		if (sscanf(head, "%d %llu", &status, &n) != 2 || n > REPLY_MAX)
			err = -EPROTO;
	}
	if (!err && !(body = malloc(n + 1)))
		err = -ENOMEM;
	if (!err)
		err = read_by(s->fd, body, n, false, deadline, &got);
	if (err && err != -ENOMEM) {
		close(s->fd);
		s->fd = -1;
	}
	pthread_mutex_unlock(&s->io);
	/* A JVM being killed closes the socket a moment before it is a zombie: wait that
	 * moment, so that the reason says it exited. */
	for (int i = 0; err && err != -ENOMEM && i < 10 && session_alive(s); i++)
		usleep(20 * 1000);
	pthread_mutex_lock(&c->lock);
	if (err && err != -ENOMEM) {
		snprintf(line, sizeof(line), "the agent did not answer \"%s\": %s", req,
			 strerror(-err));
		session_fail_locked(s, "collection", line);
		pthread_cond_signal(&s->wake);
	} else if (!err && status) {
		snprintf(s->last_error, sizeof(s->last_error), "%s: the agent says: %.*s", req,
			 (int)(n < 150 ? n : 150), body);
		err = -EIO;
	}
	pthread_mutex_unlock(&c->lock);
	if (err) {
		free(body);
		return err == -ENODATA ? -EIO : err;
	}
	body[n] = 0;
	*data = body;
	*len = n;
	return 0;
}

/* The records of one request, parsed; a malformed reply sets last_error. */
static int request_threads(struct session *s, const char *req, struct jvm_threads *t)
{
	char *data;
	size_t len;
	int err = request(s, req, &data, &len);

	if (err)
		return err;
	err = jvm_threads_parse(data, len, t);
	if (err) {
		free(data);
		pthread_mutex_lock(&s->c->lock);
		snprintf(s->last_error, sizeof(s->last_error), "%s: the agent's records are "
			 "malformed", req);
		pthread_mutex_unlock(&s->c->lock);
	}
	return err;
}

/* Java threads with their native tids matched; known, if given, lists the process's threads
 * with their names. */
static int matched_threads(struct session *s, const char *req, const struct thread_list *known,
			   struct jvm_threads *t)
{
	struct jvm_task_cpu *tasks = NULL;
	size_t ntasks = 0;
	int err = request_threads(s, req, t);

	if (err)
		return err;
	jvm_tasks_read(s->pid, known, &tasks, &ntasks);
	jvm_threads_match(t, tasks, ntasks);
	free(tasks);
	return 0;
}

int jvm_threads_render(struct jvm_collector *c, pid_t pid, enum jvm_threads_view view,
		       FILE *out)
{
	struct session *s = get_attached(c, pid);
	struct jvm_threads t;
	int err;

	if (!s)
		return -ENODATA;
	err = matched_threads(s, view == JVM_THREADS_DUMP ? "threads" : "deadlocks", NULL, &t);
	if (err)
		goto out;
	switch (view) {
	case JVM_THREADS_DUMP:
		err = jvm_render_dump(&t, pid, out);
		break;
	case JVM_THREADS_DEADLOCKS:
		err = jvm_render_deadlocks(&t, out);
		break;
	case JVM_THREADS_DEADLOCKS_JSON:
		err = jvm_render_deadlocks_json(&t, pid, out);
		break;
	}
	jvm_threads_free(&t);
out:
	session_unref(c, s);
	return err;
}

int jvm_threads_busy(struct jvm_collector *c, pid_t pid, const struct thread_list *l,
		     const struct thread_info *const *order, FILE *out)
{
	struct session *s = get_attached(c, pid);
	struct jvm_threads all, top = {0};
	char req[16 + JVM_BUSY_STACKS * 21] = "stacks";
	size_t asked = 0;
	int err;

	if (!s)
		return -ENODATA;
	/* Names and ids of every Java thread without stopping the JVM, then the stacks of the
	 * few threads that used the most CPU in the window. */
	err = matched_threads(s, "list", l, &all);
	if (err)
		goto out;
	for (size_t i = 0; i < l->n && asked < JVM_BUSY_STACKS && order[i]->recent_us; i++)
		for (size_t j = 0; j < all.n; j++)
			if (all.v[j].tid == order[i]->tid) {
				snprintf(req + strlen(req), sizeof(req) - strlen(req), " %lld",
					 all.v[j].id);
				asked++;
				break;
			}
	if (asked)
		err = request_threads(s, req, &top);
	if (!err)
		err = jvm_render_busy(&all, &top, l, order, out);
	jvm_threads_free(&top);
	jvm_threads_free(&all);
out:
	session_unref(c, s);
	return err;
}
