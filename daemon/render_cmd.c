// SPDX-License-Identifier: GPL-2.0
/* Renders folded stacks from stdin with the same views the tree serves. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/render_cmd.h"
#include "store/folded_parse.h"
#include "views/views.h"

static const char render_usage[] =
	"Usage: aperture render svg|json|pprof|top|folded [--title TEXT] [--hz HZ] < IN > OUT\n"
	"Renders folded stacks (`frame;...;leaf COUNT` lines) as a flame graph, JSON tree,\n"
	"gzip'd pprof, top functions or sorted folded text. --hz: the samples were taken at HZ,\n"
	"so pprof also shows CPU time.\n";

static int read_all(FILE *in, char **text, size_t *len)
{
	size_t cap = 1 << 20, n;
	char *buf = malloc(cap), *bigger;

	*len = 0;
	while (buf && (n = fread(buf + *len, 1, cap - *len, in)) > 0) {
		*len += n;
		if (*len == cap) {
			bigger = realloc(buf, cap *= 2);
			if (!bigger)
				break;
			buf = bigger;
		}
	}
	if (!buf || ferror(in) || *len == cap) {
		free(buf);
		return buf ? -EIO : -ENOMEM;
	}
	*text = buf;
	return 0;
}

static bool known_format(const char *format)
{
	static const char *const formats[] = { "svg", "json", "pprof", "top", "folded" };

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (!strcmp(format, formats[i]))
			return true;
	return false;
}

static int render(const char *format, const struct profile_snapshot *s,
		  const struct view_meta *m)
{
	if (!strcmp(format, "svg"))
		return view_svg(s, m, stdout);
	if (!strcmp(format, "json"))
		return view_json(s, m, stdout);
	if (!strcmp(format, "pprof"))
		return view_pprof(s, m, stdout);
	if (!strcmp(format, "top"))
		return view_top(s, stdout);
	if (!strcmp(format, "folded"))
		return view_folded(s, stdout);
	return -EINVAL;
}

int cmd_render(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "title", required_argument, NULL, 't' },
		{ "hz", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct view_meta m = { .title = "stdin", .now = time(NULL), .sample_type = "samples" };
	struct profile_snapshot *s = NULL;
	struct profile *p = NULL;
	size_t len, bad_line = 0;
	char *text = NULL, *end;
	unsigned long hz;
	int c, err;

	while ((c = getopt_long(argc, argv, "t:F:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't': m.title = optarg; break;
		case 'F':
			hz = strtoul(optarg, &end, 10);
			if (!*optarg || *end || !hz || hz > 1000000000) {
				fprintf(stderr, "aperture render: bad --hz %s\n", optarg);
				return 2;
			}
			m.period_type = "cpu";
			m.period_unit = "nanoseconds";
			m.period = 1000000000 / hz;
			break;
		case 'h': fputs(render_usage, stdout); return 0;
		default: fputs(render_usage, stderr); return 2;
		}
	}
	if (optind + 1 != argc || !known_format(argv[optind])) {
		fputs(render_usage, stderr);
		return 2;
	}
	err = read_all(stdin, &text, &len);
	if (!err)
		err = (p = profile_new("samples")) ? 0 : -ENOMEM;
	if (!err) {
		err = folded_parse(p, text, len, m.now, &bad_line);
		if (err && bad_line)
			fprintf(stderr, "aperture render: line %zu: %s\n", bad_line,
				err == -EINVAL ? "not `frame;...;leaf COUNT`" : strerror(-err));
	}
	if (!err)
		err = profile_snapshot(p, 0, &s);
	if (!err) {
		m.now = time(NULL); /* after the profile began, whatever the clock did */
		err = render(argv[optind], s, &m);
	}
	if (!err && fflush(stdout))
		err = -EIO;
	if (err && !bad_line)
		fprintf(stderr, "aperture render: %s\n", strerror(-err));
	profile_snapshot_free(s);
	profile_unref(p);
	free(text);
	return err ? 1 : 0;
}
