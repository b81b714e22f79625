// SPDX-License-Identifier: GPL-2.0
/* The node's sync: a builder thread that spools a batch every interval, and an uploader
 * thread that empties the spool. They share the client's lock for the state status shows. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include "daemon/aperture.h"
#include "sync/build.h"
#include "sync/client.h"
#include "sync/spool.h"
#include "sync/upload.h"

/* Seconds a drain may still add to after the loop moved past them: a JVM's CPU samples wait
 * up to two drains for their Java frames (collectors/cpu_java.c). */
#define SETTLE_S 2
#define BACKOFF_FIRST_S 1.0
#define BACKOFF_MAX_S 60.0
#define RETRY_AFTER_MAX_S 3600
#define REJECT_CODES 8 /* distinct answers counted apart; the last slot takes the rest */

struct sync_client {
	struct aperture *a;
	char node[256];
	char boot_id[33];
	char *token;
	char *ca_file;
	char spool_dir[PATH_MAX];
	struct sync_builder *builder;

	pthread_mutex_t lock;    /* everything below */
	pthread_cond_t wake;     /* the uploader's: a new batch, a new URL, stop */
	pthread_cond_t tick;     /* the builder's: stop */
	bool stop;
	atomic_bool stopping;    /* stop, for the uploader's transfer in flight */
	pthread_t builder_thread, uploader_thread;
	bool started;
	char url[4096];          /* "" = off */
	uint64_t url_generation; /* changes with url: the uploader makes a new handle */
	struct spool *spool;     /* opened at the first URL */
	uint64_t next_seq;
	int64_t last_build;      /* monotonic seconds */
	/* status */
	char error[256];         /* a state that stops sync: the spool can't be opened */
	char retrying[256];      /* why the last attempt failed, "" when it did not */
	char refused[256];       /* why the last batch sent was refused, "" when it was not */
	char last_error[256];
	int64_t last_success;    /* unix seconds, 0 = never */
	int64_t shipped_until;   /* every count of a second before it is in a batch */
	uint64_t sent, rejected;
	struct { long http; uint64_t n; } rejected_by[REJECT_CODES];
	uint64_t bytes_sent;     /* bodies acknowledged: what sync costs on the wire */
	double backoff_s;
	struct timespec next_try; /* monotonic: no attempt before */
};

static int64_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

int sync_check_url(const char *url, char *why, size_t whylen)
{
	if (!*url)
		return 0;
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		snprintf(why, whylen, "an aggregator's URL starts with http:// or https://");
		return -EINVAL;
	}
	for (const char *p = url; *p; p++) {
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
			snprintf(why, whylen, "a URL is printable ASCII without spaces "
				 "(percent-encode the rest)");
			return -EINVAL;
		}
	}
	if (!url[strncmp(url, "http://", 7) ? 8 : 7]) {
		snprintf(why, whylen, "the URL names no host");
		return -EINVAL;
	}
	return 0;
}

static int read_token(const char *path, char **out, char *why, size_t whylen)
{
	char buf[4096];
	size_t n, start = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		snprintf(why, whylen, "--token-file %s: %s", path, strerror(errno));
		return -errno;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* The whole file, whitespace trimmed. */
	while (n && strchr(" \t\r\n", buf[n - 1]))
		buf[--n] = 0;
	while (buf[start] && strchr(" \t\r\n", buf[start]))
		start++;
	if (!buf[start] || strpbrk(buf + start, " \t\r\n")) {
		snprintf(why, whylen, "--token-file %s: %s", path,
			 buf[start] ? "a token is one word" : "empty");
		return -EINVAL;
	}
	*out = strdup(buf + start);
	return *out ? 0 : -ENOMEM;
}

/* path made absolute: the daemon leaves its working directory when it detaches. */
static int absolute(const char *path, char *out, size_t len)
{
	char cwd[PATH_MAX];

	if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return snprintf(out, len, "%s", path) < (int)len ? 0 : -ENAMETOOLONG;
	return snprintf(out, len, "%s/%s", cwd, path) < (int)len ? 0 : -ENAMETOOLONG;
}

int sync_client_new(struct aperture *a, const struct sync_options *o, struct sync_client **out,
		    char *why, size_t whylen)
{
	char ca_path[PATH_MAX];
	struct sync_client *c = calloc(1, sizeof(*c));
	unsigned char rnd[16];
	int err;

	if (!c)
		return -ENOMEM;
	/* libcurl's global state, before any thread of ours makes a request. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		free(c);
		snprintf(why, whylen, "libcurl could not start");
		return -ENOMEM;
	}
	c->a = a;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->wake, &ca);
	pthread_cond_init(&c->tick, &ca);
	pthread_condattr_destroy(&ca);
	c->next_seq = 1;
	c->backoff_s = BACKOFF_FIRST_S;
	if (o->node)
		snprintf(c->node, sizeof(c->node), "%s", o->node);
	else if (gethostname(c->node, sizeof(c->node) - 1))
		snprintf(c->node, sizeof(c->node), "localhost");
	/* The node's name is a path element here and on the aggregator. */
	if (!c->node[0] || strchr(c->node, '/') || !strcmp(c->node, ".") ||
	    !strcmp(c->node, "..") || strpbrk(c->node, " \t\r\n")) {
		snprintf(why, whylen, "--node \"%s\": a name without '/' or spaces", c->node);
		err = -EINVAL;
		goto fail;
	}
	if (o->token_file && (err = read_token(o->token_file, &c->token, why, whylen)))
		goto fail;
	if (o->ca_file && ((err = absolute(o->ca_file, ca_path, sizeof(ca_path))) ||
			   !(c->ca_file = strdup(ca_path)))) {
		snprintf(why, whylen, "--sync-ca: %s", strerror(err ? -err : ENOMEM));
		err = err ?: -ENOMEM;
		goto fail;
	}
	if (o->spool_dir && (err = absolute(o->spool_dir, c->spool_dir, sizeof(c->spool_dir)))) {
		snprintf(why, whylen, "--spool-dir: %s", strerror(-err));
		goto fail;
	} else if (!o->spool_dir)
		snprintf(c->spool_dir, sizeof(c->spool_dir), SYNC_SPOOL_ROOT "/%s", c->node);
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		snprintf(why, whylen, "getrandom: %s", strerror(errno));
		err = -errno;
		goto fail;
	}
	for (int i = 0; i < 16; i++)
		snprintf(c->boot_id + 2 * i, 3, "%02x", rnd[i]);
	err = sync_builder_new(c->node, c->boot_id, &c->builder);
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	sync_client_free(c);
	return err;
}

/* The builder's part of a tick, with c->lock held: config read, spool opened. Returns whether
 * sync is on. */
static bool tick_config_locked(struct sync_client *c)
{
	struct aperture *a = c->a;
	char url[sizeof(c->url)], why[256];

	pthread_mutex_lock(&a->config_str_lock);
	snprintf(url, sizeof(url), "%s", a->config_str[CONFIG_SYNC] ? a->config_str[CONFIG_SYNC] :
		 "");
	pthread_mutex_unlock(&a->config_str_lock);
	if (strcmp(url, c->url)) {
		snprintf(c->url, sizeof(c->url), "%s", url);
		c->url_generation++;
		c->backoff_s = BACKOFF_FIRST_S;
		c->next_try = (struct timespec){0};
		c->retrying[0] = 0;
		pthread_cond_signal(&c->wake);
	}
	if (!c->url[0])
		return false;
	if (!c->spool) {
		if (spool_open(c->spool_dir, config_get(a, CONFIG_SYNC_SPOOL_MB) << 20, &c->spool,
			       why, sizeof(why))) {
			snprintf(c->error, sizeof(c->error), "%s", why);
			return false;
		}
		c->error[0] = 0;
		/* What an earlier run left is sent first, as it is. */
		pthread_cond_signal(&c->wake);
	}
	spool_set_max(c->spool, config_get(a, CONFIG_SYNC_SPOOL_MB) << 20);
	return true;
}

static void node_status_locked(struct sync_client *c, Aperture__Sync__V1__NodeStatus *ns)
{
	struct spool_stats st;

	spool_get_stats(c->spool, &st);
	ns->spool_bytes = st.bytes;
	ns->batches_dropped = st.dropped;
	ns->oldest_dropped_unix = st.oldest_dropped;
	ns->batches_rejected = c->rejected;
	ns->last_error = c->last_error;
	ns->last_success_unix = c->last_success;
	ns->version = APERTURE_VERSION;
}

/* Builds one interval's batch, of the seconds before until, and spools its parts. */
static void build_once(struct sync_client *c, int64_t until)
{
	Aperture__Sync__V1__NodeStatus ns = APERTURE__SYNC__V1__NODE_STATUS__INIT;
	char last_error[sizeof(c->last_error)];
	struct sync_part *parts;
	uint64_t seq;
	size_t n;
	int err;

	pthread_mutex_lock(&c->lock);
	node_status_locked(c, &ns);
	snprintf(last_error, sizeof(last_error), "%s", c->last_error);
	ns.last_error = last_error;
	seq = c->next_seq;
	pthread_mutex_unlock(&c->lock);

	err = sync_builder_run(c->builder, c->a, until, &ns, &seq, &parts, &n);
	pthread_mutex_lock(&c->lock);
	if (err) {
		snprintf(c->last_error, sizeof(c->last_error), "building a batch: %s",
			 strerror(-err));
		goto out;
	}
	c->next_seq = seq;
	c->shipped_until = until;
	for (size_t i = 0; i < n; i++) {
		err = spool_put(c->spool, aperture_now(), c->boot_id, parts[i].seq, parts[i].data,
				parts[i].len);
		if (err)
			snprintf(c->last_error, sizeof(c->last_error), "spooling batch %llu: %s",
				 (unsigned long long)parts[i].seq, strerror(-err));
	}
	sync_parts_free(parts, n);
	pthread_cond_signal(&c->wake);
out:
	pthread_mutex_unlock(&c->lock);
}

static void *builder_main(void *arg)
{
	struct sync_client *c = arg;
	struct timespec next;

	/* Named, so its CPU time can be told apart (bench/sync.py). */
	pthread_setname_np(pthread_self(), "sync-build");
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		bool on = tick_config_locked(c);
		int64_t interval = config_get(c->a, CONFIG_SYNC_INTERVAL_S);

		if (on && mono_s() - c->last_build >= interval) {
			c->last_build = mono_s();
			pthread_mutex_unlock(&c->lock);
			build_once(c, atomic_load(&c->a->drained_until) - SETTLE_S);
			pthread_mutex_lock(&c->lock);
		}
		next.tv_sec++;
		while (!c->stop && pthread_cond_timedwait(&c->tick, &c->lock, &next) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static double jitter(double s)
{
	unsigned int r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return s;
	/* +-20 % */
	return s * (0.8 + 0.4 * (r / (double)UINT_MAX));
}

static void retry_later_locked(struct sync_client *c, const struct upload_result *res)
{
	double wait = res->retry_after_s >= 0 ?
		      (double)(res->retry_after_s < RETRY_AFTER_MAX_S ? res->retry_after_s :
			       RETRY_AFTER_MAX_S) :
		      jitter(c->backoff_s);

	clock_gettime(CLOCK_MONOTONIC, &c->next_try);
	c->next_try.tv_sec += (time_t)wait;
	c->next_try.tv_nsec += (long)((wait - (time_t)wait) * 1e9);
	if (c->next_try.tv_nsec >= 1000000000L) {
		c->next_try.tv_sec++;
		c->next_try.tv_nsec -= 1000000000L;
	}
	c->backoff_s = c->backoff_s * 2 < BACKOFF_MAX_S ? c->backoff_s * 2 : BACKOFF_MAX_S;
	snprintf(c->retrying, sizeof(c->retrying), "%s", res->reason);
	snprintf(c->last_error, sizeof(c->last_error), "%s", res->reason);
}

static bool due_locked(struct sync_client *c)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > c->next_try.tv_sec ||
	       (now.tv_sec == c->next_try.tv_sec && now.tv_nsec >= c->next_try.tv_nsec);
}

/* Batches refused for good, by the HTTP status of the answer. */
static void count_rejected_locked(struct sync_client *c, long http)
{
	int i;

	for (i = 0; i < REJECT_CODES - 1; i++)
		if (!c->rejected_by[i].n || c->rejected_by[i].http == http)
			break;
	if (!c->rejected_by[i].n)
		c->rejected_by[i].http = http;
	else if (c->rejected_by[i].http != http)
		c->rejected_by[i].http = 0; /* the last slot: other answers */
	c->rejected_by[i].n++;
}

static void *uploader_main(void *arg)
{
	struct sync_client *c = arg;
	struct uploader *u = NULL;
	uint64_t generation = 0;
	struct upload_result res;
	char name[128];
	uint8_t *data;
	size_t len;

	pthread_setname_np(pthread_self(), "sync-upload");
	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		if (!c->url[0] || !c->spool || !due_locked(c) ||
		    spool_peek(c->spool, name, sizeof(name), &data, &len)) {
			struct timespec until = c->next_try;

			if (!c->url[0] || !c->spool || due_locked(c))
				pthread_cond_wait(&c->wake, &c->lock);
			else
				pthread_cond_timedwait(&c->wake, &c->lock, &until);
			continue;
		}
		if (!u || generation != c->url_generation) {
			uploader_free(u);
			u = NULL;
			generation = c->url_generation;
			if (uploader_new(c->url, c->token ? c->token : "", c->ca_file,
					 &c->stopping, &u)) {
				spool_keep(c->spool, name);
				free(data);
				res = (struct upload_result){ .retry_after_s = -1 };
				snprintf(res.reason, sizeof(res.reason), "out of memory");
				retry_later_locked(c, &res);
				continue;
			}
		}
		pthread_mutex_unlock(&c->lock);
		uploader_post(u, data, len, &res);
		free(data);
		pthread_mutex_lock(&c->lock);
		switch (res.outcome) {
		case UPLOAD_ACKED:
			spool_done(c->spool, name);
			c->sent++;
			c->bytes_sent += len;
			c->last_success = aperture_now();
			c->backoff_s = BACKOFF_FIRST_S;
			c->retrying[0] = 0;
			c->refused[0] = 0;
			break;
		case UPLOAD_REJECTED:
			/* Permanent: this batch can never be applied; the others go on. */
			spool_done(c->spool, name);
			c->rejected++;
			count_rejected_locked(c, res.http);
			c->retrying[0] = 0;
			snprintf(c->refused, sizeof(c->refused), "%s", res.reason);
			snprintf(c->last_error, sizeof(c->last_error), "batch %.90s refused: %.140s", name,
				 res.reason);
			break;
		case UPLOAD_RETRY:
			spool_keep(c->spool, name);
			retry_later_locked(c, &res);
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	uploader_free(u);
	return NULL;
}

int sync_client_start(struct sync_client *c)
{
	int err = pthread_create(&c->builder_thread, NULL, builder_main, c);

	if (err)
		return -err;
	err = pthread_create(&c->uploader_thread, NULL, uploader_main, c);
	if (err) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->tick);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->builder_thread, NULL);
		return -err;
	}
	c->started = true;
	return 0;
}

void sync_client_free(struct sync_client *c)
{
	if (!c)
		return;
	if (c->started) {
		atomic_store(&c->stopping, true);
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->tick);
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->builder_thread, NULL);
		pthread_join(c->uploader_thread, NULL);
		/* The daemon's loop has stopped: every second it drained goes to the spool, sent
		 * at the next start. */
		if (c->spool && c->url[0])
			build_once(c, atomic_load(&c->a->drained_until));
	}
	sync_builder_free(c->builder);
	spool_close(c->spool);
	free(c->token);
	free(c->ca_file);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->tick);
	pthread_mutex_destroy(&c->lock);
	free(c);
	curl_global_cleanup();
}

static void print_time(FILE *out, const char *key, int64_t t, const char *zero)
{
	char when[32];

	if (!t) {
		fprintf(out, "%s: %s\n", key, zero);
		return;
	}
	aperture_format_time(t, when, sizeof(when));
	fprintf(out, "%s: %s\n", key, when);
}

void sync_client_status(struct sync_client *c, FILE *out)
{
	struct spool_stats st = {0};

	if (!c) {
		fprintf(out, "sync: off\n");
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (c->spool)
		spool_get_stats(c->spool, &st);
	if (!c->url[0])
		fprintf(out, "sync: off\n");
	else if (c->error[0])
		fprintf(out, "sync: error: %s\n", c->error);
	else if (c->retrying[0])
		fprintf(out, "sync: retrying: %s\n", c->retrying);
	else if (c->refused[0])
		fprintf(out, "sync: refused: %s\n", c->refused);
	else
		fprintf(out, "sync: ok\n");
	fprintf(out, "sync_url: %s\n", c->url[0] ? c->url : "none");
	fprintf(out, "sync_node: %s\nsync_boot_id: %s\n", c->node, c->boot_id);
	fprintf(out, "sync_spool: %s\n", c->spool_dir);
	fprintf(out, "sync_next_seq: %llu\n", (unsigned long long)c->next_seq);
	print_time(out, "sync_last_success", c->last_success, "never");
	print_time(out, "sync_shipped_until", c->shipped_until > 0 ? c->shipped_until : 0, "never");
	/* How old the oldest batch not yet acknowledged is: 0 when the aggregator has all. */
	fprintf(out, "sync_lag_s: %lld\n", st.oldest && aperture_now() > st.oldest ?
		(long long)(aperture_now() - st.oldest) : 0LL);
	fprintf(out, "sync_spool_bytes: %llu\n", (unsigned long long)st.bytes);
	fprintf(out, "sync_spool_batches: %llu\n", (unsigned long long)st.batches);
	fprintf(out, "sync_batches_sent: %llu\n", (unsigned long long)c->sent);
	fprintf(out, "sync_bytes_sent: %llu\n", (unsigned long long)c->bytes_sent);
	fprintf(out, "sync_batches_dropped: %llu\n", (unsigned long long)st.dropped);
	fprintf(out, "sync_dropped_cpu_samples: %llu\n", (unsigned long long)st.dropped_samples);
	print_time(out, "sync_oldest_dropped", st.oldest_dropped, "none");
	fprintf(out, "sync_batches_rejected: %llu\n", (unsigned long long)c->rejected);
	fprintf(out, "sync_rejected_by_answer:%s", c->rejected ? "" : " none");
	for (int i = 0; i < REJECT_CODES && c->rejected_by[i].n; i++) {
		if (c->rejected_by[i].http)
			fprintf(out, " %ld=%llu", c->rejected_by[i].http,
				(unsigned long long)c->rejected_by[i].n);
		else
			fprintf(out, " other=%llu", (unsigned long long)c->rejected_by[i].n);
	}
	fputc('\n', out);
	fprintf(out, "sync_last_error: %s\n", c->last_error[0] ? c->last_error : "none");
	pthread_mutex_unlock(&c->lock);
}
