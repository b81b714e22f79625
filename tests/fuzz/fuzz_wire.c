/* A batch is the aggregator's untrusted input: any bytes, gzip'd or not, must decode or fail
 * cleanly, and a batch that decodes must hold only indexes that are in range, since the
 * store walks it without checks of its own. The input is the protobuf (gzip'd here, so the
 * fuzzer explores the message rather than deflate) unless its first byte is 0: then the
 * rest goes in as the body itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "sync/wire.h"

static const struct wire_limits limits = {
	.max_decompressed = 1 << 20,
	.max_stacks = 4096,
	.max_frames = 4096,
	.max_depth = 128,
	.max_targets = 64,
};

static size_t gzip(const uint8_t *data, size_t len, uint8_t **out)
{
	z_stream z = {0};
	size_t n = 0;

	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return 0;
	*out = malloc(deflateBound(&z, len));
	if (*out) {
		z.next_in = (uint8_t *)data;
		z.avail_in = len;
		z.next_out = *out;
		z.avail_out = deflateBound(&z, len);
		if (deflate(&z, Z_FINISH) == Z_STREAM_END)
			n = z.total_out;
	}
	deflateEnd(&z);
	return n;
}

/* Touches every string a decoded batch refers to, as the store does. */
static size_t walk(const WireBatch *b)
{
	size_t sum = 0;

	for (size_t i = 0; i < b->n_stacks; i++)
		for (size_t j = 0; j < b->stacks[i]->n_frames; j++) {
			sum += strlen(b->strings[b->frames[b->stacks[i]->frames[j]]->name]);
			/* lines, when there are any, are one per frame */
			if (b->stacks[i]->n_lines)
				sum += b->stacks[i]->lines[j];
		}
	for (size_t t = 0; t < b->n_targets; t++) {
		const Aperture__Sync__V1__Target *tg = b->targets[t];

		for (size_t p = 0; p < tg->n_profiles; p++)
			for (size_t s = 0; s < tg->profiles[p]->n_seconds; s++) {
				const Aperture__Sync__V1__Second *sec = tg->profiles[p]->seconds[s];

				for (size_t k = 0; k < sec->n_stacks; k++)
					sum += b->stacks[sec->stacks[k]]->n_frames + sec->counts[k];
			}
		for (size_t r = 0; tg->sys && r < tg->sys->n_rows; r++)
			sum += strlen(b->strings[tg->sys->rows[r]->holder]) +
			       strlen(b->strings[tg->sys->rows[r]->stack]);
		for (size_t e = 0; e < tg->n_blocking; e++)
			sum += b->stacks[tg->blocking[e]->stack]->n_frames;
	}
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	uint8_t *body = NULL;
	size_t n;
	WireBatch *b;
	char why[256];

	if (len && data[0] == 0) {
		body = malloc(len);
		if (!body)
			return 0;
		memcpy(body, data + 1, len - 1);
		n = len - 1;
	} else {
		n = gzip(data, len, &body);
	}
	if (body && !wire_decode(body, n, &limits, &b, why, sizeof(why))) {
		if (walk(b) == (size_t)-1)
			abort();
		wire_free(b);
	} else if (!why[0] && body) {
		abort(); /* every refusal says why */
	}
	free(body);
	return 0;
}
