#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "sync/wire.h"

const struct wire_limits wire_default_limits = {
	.max_decompressed = 64 << 20,
	.max_stacks = 1 << 20,
	.max_frames = 1 << 20,
	.max_depth = 1024,
	.max_targets = 65536,
};

int wire_encode(const WireBatch *b, uint8_t **out, size_t *len)
{
	size_t raw_len = protobuf_c_message_get_packed_size(&b->base);
	uint8_t *raw = malloc(raw_len ? raw_len : 1), *gz = NULL;
	z_stream z = {0};
	int err = -ENOMEM;

	if (!raw)
		return -ENOMEM;
	protobuf_c_message_pack(&b->base, raw);
	/* windowBits 15 + 16: a gzip header, so `Content-Encoding: gzip` is literally true. */
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		goto out;
	size_t cap = deflateBound(&z, raw_len);
	gz = malloc(cap);
	if (!gz)
		goto end;
	z.next_in = raw;
	z.avail_in = raw_len;
	z.next_out = gz;
	z.avail_out = cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		err = -EIO;
		goto end;
	}
	*out = gz;
	*len = z.total_out;
	gz = NULL;
	err = 0;
end:
	deflateEnd(&z);
out:
	free(gz);
	free(raw);
	return err;
}

static int fail(char *why, size_t whylen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *why, size_t whylen, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return err;
}

int wire_gunzip(const uint8_t *buf, size_t len, size_t max, uint8_t **out, size_t *outlen,
		  char *why, size_t whylen)
{
	size_t cap = len * 4 < 4096 ? 4096 : len * 4;
	z_stream z = {0};
	uint8_t *dst = NULL;
	int err = 0, zr;

	if (cap > max + 1)
		cap = max + 1;
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -ENOMEM;
	dst = malloc(cap);
	if (!dst) {
		err = -ENOMEM;
		goto out;
	}
	z.next_in = (uint8_t *)buf;
	z.avail_in = len;
	for (;;) {
		z.next_out = dst + z.total_out;
		z.avail_out = cap - z.total_out;
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr == Z_STREAM_END)
			break;
		if (z.total_out > max) {
			err = fail(why, whylen, -E2BIG, "decompressed batch exceeds %zu bytes", max);
			goto out;
		}
		if (zr == Z_BUF_ERROR && z.avail_in == 0) {
			err = fail(why, whylen, -EINVAL, "truncated gzip stream");
			goto out;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			err = fail(why, whylen, -EINVAL, "not a gzip stream: %s",
				   z.msg ? z.msg : "corrupt");
			goto out;
		}
		if (z.avail_out == 0) {
			size_t bigger = cap * 2 > max + 1 ? max + 1 : cap * 2;
			uint8_t *p;

			if (bigger == cap) {
				err = fail(why, whylen, -E2BIG,
					   "decompressed batch exceeds %zu bytes", max);
				goto out;
			}
			p = realloc(dst, bigger);
			if (!p) {
				err = -ENOMEM;
				goto out;
			}
			dst = p;
			cap = bigger;
		}
	}
	if (z.total_out > max) {
		err = fail(why, whylen, -E2BIG, "decompressed batch exceeds %zu bytes", max);
		goto out;
	}
	if (z.avail_in) {
		err = fail(why, whylen, -EINVAL, "%u bytes after the gzip stream", z.avail_in);
		goto out;
	}
	*out = dst;
	*outlen = z.total_out;
	dst = NULL;
out:
	inflateEnd(&z);
	free(dst);
	return err;
}

static int check(const WireBatch *b, const struct wire_limits *lim, char *why, size_t whylen)
{
	if (b->version != WIRE_VERSION)
		return fail(why, whylen, -EPROTONOSUPPORT,
			    "batch version %u, this aggregator speaks %d", b->version,
			    WIRE_VERSION);
	if (!b->node[0] || !b->boot_id[0] || !b->seq)
		return fail(why, whylen, -EINVAL, "a batch needs node, boot_id and seq");
	if (b->n_strings == 0 || b->strings[0][0])
		return fail(why, whylen, -EINVAL, "strings[0] must be \"\"");
	if (b->n_stacks > lim->max_stacks || b->n_frames > lim->max_frames ||
	    b->n_targets > lim->max_targets)
		return fail(why, whylen, -E2BIG, "%zu stacks, %zu frames, %zu targets: past the "
			    "limits (%zu, %zu, %zu)", b->n_stacks, b->n_frames, b->n_targets,
			    lim->max_stacks, lim->max_frames, lim->max_targets);
	if (b->parts == 0 || b->part >= b->parts)
		return fail(why, whylen, -EINVAL, "part %u of %u", b->part, b->parts);
	for (size_t i = 0; i < b->n_frames; i++) {
		const Aperture__Sync__V1__Frame *f = b->frames[i];

		if (f->name == 0 || f->name >= b->n_strings || f->file >= b->n_strings ||
		    f->module >= b->n_strings || f->build_id >= b->n_strings)
			return fail(why, whylen, -EINVAL, "frame %zu: a string index out of range",
				    i);
	}
	for (size_t i = 0; i < b->n_stacks; i++) {
		const Aperture__Sync__V1__Stack *s = b->stacks[i];

		if (s->n_frames == 0 || s->n_frames > lim->max_depth)
			return fail(why, whylen, s->n_frames ? -E2BIG : -EINVAL,
				    "stack %zu: %zu frames (1..%zu)", i, s->n_frames,
				    lim->max_depth);
		for (size_t j = 0; j < s->n_frames; j++)
			if (s->frames[j] >= b->n_frames)
				return fail(why, whylen, -EINVAL,
					    "stack %zu: frame index out of range", i);
		if (s->n_lines && s->n_lines != s->n_frames)
			return fail(why, whylen, -EINVAL, "stack %zu: %zu lines for %zu frames", i,
				    s->n_lines, s->n_frames);
	}
	for (size_t i = 0; i < b->n_targets; i++) {
		const Aperture__Sync__V1__Target *t = b->targets[i];

		if (t->pid <= 0)
			return fail(why, whylen, -EINVAL, "target %zu: pid %d", i, t->pid);
		for (size_t p = 0; p < t->n_profiles; p++) {
			const Aperture__Sync__V1__Profile *pr = t->profiles[p];

			for (size_t s = 0; s < pr->n_seconds; s++) {
				const Aperture__Sync__V1__Second *sec = pr->seconds[s];

				if (sec->n_stacks != sec->n_counts)
					return fail(why, whylen, -EINVAL,
						    "pid %d %s: %zu stacks, %zu counts", t->pid,
						    pr->type, sec->n_stacks, sec->n_counts);
				for (size_t k = 0; k < sec->n_stacks; k++)
					if (sec->stacks[k] >= b->n_stacks)
						return fail(why, whylen, -EINVAL,
							    "pid %d %s: stack index out of range",
							    t->pid, pr->type);
			}
		}
		if (t->sys)
			for (size_t r = 0; r < t->sys->n_rows; r++) {
				const Aperture__Sync__V1__SysRow *row = t->sys->rows[r];

				if (row->holder >= b->n_strings || row->stack >= b->n_strings ||
				    row->n_hist > 32 || row->kind > 2)
					return fail(why, whylen, -EINVAL,
						    "pid %d: sys row %zu out of range", t->pid, r);
			}
		for (size_t e = 0; e < t->n_blocking; e++)
			if (t->blocking[e]->stack >= b->n_stacks)
				return fail(why, whylen, -EINVAL,
					    "pid %d: blocking event's stack out of range", t->pid);
	}
	return 0;
}

int wire_decode(const uint8_t *buf, size_t len, const struct wire_limits *lim, WireBatch **out,
		char *why, size_t whylen)
{
	uint8_t *raw = NULL;
	size_t raw_len = 0;
	WireBatch *b;
	int err;

	*out = NULL;
	why[0] = 0;
	err = wire_gunzip(buf, len, lim->max_decompressed, &raw, &raw_len, why, whylen);
	if (err)
		return err;
	b = aperture__sync__v1__batch__unpack(NULL, raw_len, raw);
	free(raw);
	if (!b)
		return fail(why, whylen, -EINVAL, "not a batch: protobuf does not parse");
	err = check(b, lim, why, whylen);
	if (err) {
		wire_free(b);
		return err;
	}
	*out = b;
	return 0;
}

void wire_free(WireBatch *b)
{
	if (b)
		aperture__sync__v1__batch__free_unpacked(b, NULL);
}
