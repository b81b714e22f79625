/* Folded text from anywhere (`aperture render < file`) goes through folded_parse and then
 * every view: any bytes must parse or fail cleanly, and what parsed must render, and render
 * back to folded text that parses to the same stacks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "store/folded_parse.h"
#include "views/views.h"

static const struct view_meta meta = {
	.title = "fuzz", .now = 1000, .sample_type = "samples", .period_type = "cpu",
	.period_unit = "nanoseconds", .period = 10101010,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct profile *p = profile_new("samples"), *again = profile_new("samples");
	struct profile_snapshot *s = NULL, *s2 = NULL;
	char *buf = NULL;
	size_t size = 0;
	FILE *out;

	if (!p || !again)
		abort();
	folded_parse(p, (const char *)data, len, 1000, NULL);
	if (profile_snapshot(p, 0, &s))
		abort();
	out = open_memstream(&buf, &size);
	if (!out || view_json(s, &meta, out) || view_svg(s, &meta, out) ||
	    view_pprof(s, &meta, out) || view_top(s, out) || view_diff_svg(s, s, &meta, out) ||
	    view_diff_folded(s, s, out))
		abort();
	fclose(out);
	free(buf);
	out = open_memstream(&buf, &size);
	if (!out || view_folded(s, out))
		abort();
	fclose(out);
	if (folded_parse(again, buf, size, 1000, NULL) || profile_snapshot(again, 0, &s2) ||
	    s2->total != s->total || s2->nstacks != s->nstacks)
		abort();
	free(buf);
	profile_snapshot_free(s2);
	profile_snapshot_free(s);
	profile_unref(again);
	profile_unref(p);
	return 0;
}
