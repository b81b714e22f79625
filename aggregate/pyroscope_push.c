/* Pyroscope's push RPC's body: a PushRequest (pyroscope_push.proto) into series and their
 * profiles. Every count and length is bounded here or by protobuf-c's unpack, which checks
 * each length against the bytes it has; the pprof inside goes through pyro_parse_pprof. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate/pyroscope.h"
#include "pyroscope_push.pb-c.h"

typedef Aperture__Pyroscope__Push__V1__PushRequest PushRequest;
typedef Aperture__Pyroscope__Push__V1__RawProfileSeries RawProfileSeries;

/* A series' labels: service_name is the app, __name__ the type, other __*__ are Pyroscope's
 * own (__session_id__ changes every run: kept, it would make a new target each run). */
static int series_labels(const RawProfileSeries *rs, struct pyro_push_series *ps, size_t index,
			 char *why, size_t why_size)
{
	ps->type = "";
	for (size_t i = 0; i < rs->n_labels; i++) {
		const char *k = rs->labels[i]->name, *v = rs->labels[i]->value;

		if (!strcmp(k, "service_name")) {
			ps->s.app = v;
		} else if (!strcmp(k, "__name__")) {
			ps->type = v;
		} else if (strncmp(k, "__", 2)) {
			if (ps->s.nlabels == PYRO_MAX_LABELS) {
				snprintf(why, why_size, "series %zu: more than %d labels", index,
					 PYRO_MAX_LABELS);
				return -EINVAL;
			}
			ps->s.keys[ps->s.nlabels] = k;
			ps->s.values[ps->s.nlabels++] = v;
		}
	}
	if (!ps->s.app || !*ps->s.app) {
		snprintf(why, why_size, "series %zu: no service_name label", index);
		return -EINVAL;
	}
	ps->s.suffix = "";
	return 0;
}

static int series_decode(const RawProfileSeries *rs, size_t index, int64_t sec,
			 struct pyro_push_series *ps, char *why, size_t why_size)
{
	int err = series_labels(rs, ps, index, why, why_size);

	for (size_t i = 0; !err && i < rs->n_samples; i++) {
		const ProtobufCBinaryData *raw = &rs->samples[i]->raw_profile;
		int64_t t;

		err = pyro_parse_pprof(&ps->push, ps->s.app, raw->data, raw->len, sec, &t, why,
				       why_size);
		if (!err) {
			ps->kept = true;
			if (!ps->time_s)
				ps->time_s = t;
		} else if (err == -ENOTSUP) {
			err = 0; /* a profile Aperture has no type for: its series is skipped */
		} else if (err == -EINVAL) {
			size_t n = strlen(why);

			snprintf(why + n, why_size - n, " (series %zu, sample %zu)", index, i);
		}
	}
	return err;
}

int pyro_push_decode(const uint8_t *body, size_t len, int64_t sec,
		     struct pyro_push_request *out, char *why, size_t why_size)
{
	PushRequest *msg;
	size_t samples = 0;
	int err = 0;

	*out = (struct pyro_push_request){0};
	why[0] = 0;
	msg = aperture__pyroscope__push__v1__push_request__unpack(NULL, len, body);
	if (!msg) {
		snprintf(why, why_size, "the body is not a push.v1.PushRequest (protobuf)");
		return -EINVAL;
	}
	out->msg = msg;
	for (size_t i = 0; i < msg->n_series; i++)
		samples += msg->series[i]->n_samples;
	if (msg->n_series > PYRO_PUSH_MAX_SERIES || samples > PYRO_PUSH_MAX_SAMPLES) {
		snprintf(why, why_size, "at most %d series and %d samples a push",
			 PYRO_PUSH_MAX_SERIES, PYRO_PUSH_MAX_SAMPLES);
		err = -EINVAL;
		goto fail;
	}
	out->series = calloc(msg->n_series ? msg->n_series : 1, sizeof(*out->series));
	if (!out->series) {
		err = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; !err && i < msg->n_series; i++) {
		err = series_decode(msg->series[i], i, sec, &out->series[i], why, why_size);
		out->n = i + 1;
	}
	if (!err)
		return 0;
fail:
	pyro_push_request_free(out);
	return err;
}

void pyro_push_request_free(struct pyro_push_request *r)
{
	for (size_t i = 0; i < r->n; i++)
		pyro_push_free(&r->series[i].push);
	free(r->series);
	if (r->msg)
		aperture__pyroscope__push__v1__push_request__free_unpacked(r->msg, NULL);
	*r = (struct pyro_push_request){0};
}
