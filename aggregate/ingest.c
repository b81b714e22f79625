/* One uploaded batch: decoded with wire_decode's limits, checked against the token and the
 * clock, applied by the store exactly once. Nothing is stored unless every check passes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "aggregate/aggregator.h"

const char *const agg_reject_names[AGG_REJECT_NR] = {
	[AGG_REJECT_MALFORMED] = "malformed",
	[AGG_REJECT_TIME] = "time",
	[AGG_REJECT_TOO_LARGE] = "too_large",
	[AGG_REJECT_VERSION] = "version",
	[AGG_REJECT_AUTH] = "auth",
	[AGG_REJECT_FORBIDDEN] = "forbidden",
	[AGG_REJECT_STORE] = "store",
};

static const int reject_status[AGG_REJECT_NR] = {
	[AGG_REJECT_MALFORMED] = 400, [AGG_REJECT_TIME] = 400, [AGG_REJECT_TOO_LARGE] = 413,
	[AGG_REJECT_VERSION] = 415, [AGG_REJECT_AUTH] = 401, [AGG_REJECT_FORBIDDEN] = 403,
	[AGG_REJECT_STORE] = 503,
};

/* A JSON string's body: the reasons quote names from the batch. */
static void json_escape(const char *s, char *out, size_t size)
{
	size_t o = 0;

	for (; *s && o + 7 < size; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = c;
		} else if (c < 0x20) {
			o += snprintf(out + o, size - o, "\\u%04x", c);
		} else {
			out[o++] = c;
		}
	}
	out[o] = 0;
}

static int reject(struct aggregator *g, enum agg_reject why, const char *reason, char *reply,
		  size_t reply_size)
{
	char esc[512];

	atomic_fetch_add(&g->rejected[why], 1);
	json_escape(reason, esc, sizeof(esc));
	snprintf(reply, reply_size, "{\"error\":\"%s\"}", esc);
	return reject_status[why];
}

/* Every second a batch carries must be one retention keeps and not from the future: a node
 * whose clock is off loses the batch, counted, rather than writing days nobody asked for. */
static int check_times(const struct aggregator *g, const WireBatch *b, int64_t now,
		       char *why, size_t why_size)
{
	int64_t oldest = aggregator_retention_start(g, now), newest = now + AGG_FUTURE_S;

	for (size_t i = 0; i < b->n_targets; i++) {
		const Aperture__Sync__V1__Target *t = b->targets[i];

		for (size_t p = 0; p < t->n_profiles; p++) {
			const Aperture__Sync__V1__Profile *pr = t->profiles[p];

			if (tree_profile_by_name(pr->type) < 0) {
				snprintf(why, why_size, "pid %d: unknown profile type %s", t->pid,
					 pr->type);
				return AGG_REJECT_MALFORMED;
			}
			for (size_t s = 0; s < pr->n_seconds; s++) {
				int64_t sec = pr->seconds[s]->sec;

				if (sec < oldest || sec > newest) {
					snprintf(why, why_size, "pid %d %s: second %" PRId64 " is "
						 "outside %" PRId64 "..%" PRId64 " (retention "
						 "to now + %d s); check the node's clock",
						 t->pid, pr->type, sec, oldest, newest,
						 AGG_FUTURE_S);
					return AGG_REJECT_TIME;
				}
			}
		}
		for (size_t e = 0; e < t->n_blocking; e++) {
			int64_t sec = t->blocking[e]->time_ns / 1000000000;

			if (sec < oldest || sec > newest) {
				snprintf(why, why_size, "pid %d: blocking event at %" PRId64
					 " is outside retention..now + %d s", t->pid, sec,
					 AGG_FUTURE_S);
				return AGG_REJECT_TIME;
			}
		}
	}
	return -1;
}

/* A node's name is a directory's in the tree: no '/', not "." or "..", printable. */
static bool valid_name(const char *s)
{
	size_t len = strlen(s);

	if (!len || len > 255 || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (*s == '/' || (unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

int aggregator_ingest(struct aggregator *g, const struct token *k, const char *content_type,
		      const char *version, const uint8_t *body, size_t len, char *reply,
		      size_t reply_size)
{
	struct wire_limits limits = wire_default_limits;
	struct agg_apply_result r;
	char why[400];
	WireBatch *b;
	int64_t now = time(NULL);
	int err, bad;

	if (!g->insecure && !k)
		return reject(g, AGG_REJECT_AUTH, "missing or unknown bearer token", reply,
			      reply_size);
	if (!g->insecure && !token_node(k))
		return reject(g, AGG_REJECT_FORBIDDEN, "a read token may not upload", reply,
			      reply_size);
	if (version && strcmp(version, "1")) {
		snprintf(why, sizeof(why), "X-Aperture-Batch-Version %s: this aggregator speaks 1",
			 version);
		return reject(g, AGG_REJECT_VERSION, why, reply, reply_size);
	}
	if (content_type && strncmp(content_type, "application/x-aperture-batch", 28))
		return reject(g, AGG_REJECT_VERSION, "Content-Type must be "
			      "application/x-aperture-batch", reply, reply_size);
	limits.max_decompressed = AGG_MAX_INFLATED;
	err = wire_decode(body, len, &limits, &b, why, sizeof(why));
	if (err == -E2BIG)
		return reject(g, AGG_REJECT_TOO_LARGE, why, reply, reply_size);
	if (err == -EPROTONOSUPPORT)
		return reject(g, AGG_REJECT_VERSION, why, reply, reply_size);
	if (err == -ENOMEM) {
		snprintf(reply, reply_size, "{\"error\":\"out of memory\"}");
		return 503;
	}
	if (err)
		return reject(g, AGG_REJECT_MALFORMED, why, reply, reply_size);
	if (!valid_name(b->node)) {
		wire_free(b);
		return reject(g, AGG_REJECT_MALFORMED, "a node's name must be a file name: no '/', "
			      "not . or .., no control characters, 1..255 bytes", reply, reply_size);
	}
	if (!g->insecure && strcmp(token_node(k), b->node)) {
		snprintf(why, sizeof(why), "this token uploads as node %s, not %s", token_node(k),
			 b->node);
		wire_free(b);
		return reject(g, AGG_REJECT_FORBIDDEN, why, reply, reply_size);
	}
	bad = check_times(g, b, now, why, sizeof(why));
	if (bad >= 0) {
		wire_free(b);
		return reject(g, bad, why, reply, reply_size);
	}
	err = g->store->ops->apply(g->store, b, now, &r);
	wire_free(b);
	if (err) {
		snprintf(why, sizeof(why), "the store failed: %s", strerror(-err));
		return reject(g, AGG_REJECT_STORE, why, reply, reply_size);
	}
	if (r.duplicate) {
		atomic_fetch_add(&g->duplicates, 1);
		snprintf(reply, reply_size, "{\"status\":\"duplicate\"}");
	} else {
		atomic_fetch_add(&g->applied, 1);
		atomic_fetch_add(&g->samples, r.samples);
		snprintf(reply, reply_size, "{\"status\":\"applied\",\"samples\":%" PRIu64 "}",
			 r.samples);
	}
	return 200;
}
