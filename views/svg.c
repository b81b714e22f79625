// SPDX-License-Identifier: GPL-2.0
/* Flame graphs as self-contained SVG: one <g> per frame (title, rect, label) in preorder,
 * root at the bottom, children in name order, and views/flame.js inline for zoom, search and
 * details, so the file works from disk with no network.
 *
 * Frames narrower than FLAME_MIN_WIDTH pixels are not drawn on their own: runs of such
 * siblings become one grey "[N narrow frames]" box when the run is wide enough, and what
 * still is too narrow is left out; a line under the graph says how much of each. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "views/describe.h"
#include "views/flame.h"
#include "views/writer.h"

extern const char view_flame_js[];

#define FLAME_WIDTH 1200
#define FLAME_PAD_X 10
#define FLAME_FRAME_H 16
#define FLAME_TOP 66     /* title, subtitle, buttons */
#define FLAME_BOTTOM 46  /* details line, what was left out */
#define FLAME_FONT_W (12 * 0.59)
#define FLAME_MIN_WIDTH 0.1

/* A run of narrow siblings being gathered at one depth. */
struct run {
	uint64_t start, value, value_base;
	uint32_t frames; /* frames in the run's subtrees */
	bool open;
};

struct layout {
	const struct flame *f;
	struct writer *w;   /* NULL while only measuring */
	double scale;       /* pixels per count */
	uint64_t total, total_base;
	uint32_t top_depth; /* deepest depth drawn */
	uint64_t *cursor;   /* per depth: where the next child starts, in counts */
	struct run *runs;   /* per depth */
	uint64_t merged_frames, merged_boxes, left_frames, left_value;
	double max_change;  /* diff: largest change of share drawn, for colour scale */
	uint32_t *colours;  /* per tree name, 0xRRGGBB | 1 << 24 once known */
};

static uint32_t hash_name(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	/* murmur3's finalizer: names a letter apart land far apart */
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	return h ^ (h >> 16);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

static void hsl_rgb(double h, double s, double l, unsigned rgb[3])
{
	double c = (1 - fabs(2 * l - 1)) * s, hp = h / 60, x = c * (1 - fabs(fmod(hp, 2) - 1));
	double r = 0, g = 0, b = 0, m = l - c / 2;

	if (hp < 1)
		r = c, g = x;
	else if (hp < 2)
		r = x, g = c;
	else if (hp < 3)
		g = c, b = x;
	else if (hp < 4)
		g = x, b = c;
	else if (hp < 5)
		r = x, b = c;
	else
		r = c, b = x;
	rgb[0] = lround((r + m) * 255);
	rgb[1] = lround((g + m) * 255);
	rgb[2] = lround((b + m) * 255);
}

/* A frame's colour: the family tells the kind of frame, the hash of the name picks the hue
 * within it, so a function looks the same in every render. */
static void frame_colour(const char *name, uint32_t depth, unsigned rgb[3])
{
	uint32_t h = hash_name(name);
	double v1 = (h & 0xffff) / 65535.0, v2 = (h >> 16) / 65535.0;

	if (depth == 0)
		hsl_rgb(0, 0, 0.78, rgb);                          /* all: grey */
	else if (depth == 1)
		hsl_rgb(265 + 30 * v1, 0.45, 0.72 + 0.08 * v2, rgb); /* thread: violet */
	else if (ends_with(name, "_[k]"))
		hsl_rgb(200 + 30 * v1, 0.60, 0.62 + 0.10 * v2, rgb); /* kernel: blue */
	else if (ends_with(name, "_[j]"))
		hsl_rgb(85 + 50 * v1, 0.55, 0.50 + 0.10 * v2, rgb);  /* JIT/Java: green */
	else if (ends_with(name, "_[i]"))
		hsl_rgb(170 + 20 * v1, 0.55, 0.62 + 0.10 * v2, rgb); /* inlined: aqua */
	else
		hsl_rgb(5 + 50 * v1, 0.85, 0.55 + 0.10 * v2, rgb);   /* native: red to yellow */
}

/* Change of share from base to now, in percentage points. */
static double change(const struct layout *l, uint64_t base, uint64_t now)
{
	double b = l->total_base ? 100.0 * base / l->total_base : 0;
	double n = l->total ? 100.0 * now / l->total : 0;

	return n - b;
}

/* Red grew, blue shrank, white stayed, relative to the largest change drawn. */
static void diff_colour(const struct layout *l, double d, unsigned rgb[3])
{
	double k = l->max_change > 0 ? fabs(d) / l->max_change : 0;
	unsigned fade = lround(255 * (1 - 0.85 * k));

	rgb[0] = d > 0 ? 255 : fade;
	rgb[1] = fade;
	rgb[2] = d < 0 ? 255 : fade;
}

static double share(uint64_t part, uint64_t total)
{
	return total ? 100.0 * part / total : 0;
}

static uint64_t frame_y(const struct layout *l, uint32_t depth)
{
	return FLAME_TOP + (uint64_t)(l->top_depth - depth) * FLAME_FRAME_H;
}

/* A node's colour, worked out once per name (the root and threads have their own). */
static void node_colour(struct layout *l, const struct tree_node *n, unsigned rgb[3])
{
	const struct tree *t = l->f->t;
	uint32_t *c;

	if (n->depth < 2) {
		frame_colour(tree_node_name(t, n), n->depth, rgb);
		return;
	}
	c = &l->colours[n->name];
	if (!*c) {
		frame_colour(t->names[n->name].name, n->depth, rgb);
		*c = 1 << 24 | rgb[0] << 16 | rgb[1] << 8 | rgb[2];
	}
	rgb[0] = *c >> 16 & 0xff;
	rgb[1] = *c >> 8 & 0xff;
	rgb[2] = *c & 0xff;
}

/* One frame: n NULL for a merged run (grey, named by how many frames it holds). */
static void draw(struct layout *l, const struct tree_node *n, uint32_t depth, uint64_t start,
		 uint64_t value, uint64_t value_base, uint32_t merged)
{
	double x = FLAME_PAD_X + start * l->scale, width = value * l->scale, d;
	const char *name = n ? tree_node_name(l->f->t, n) : NULL;
	unsigned rgb[3] = { 200, 200, 200 };
	struct writer *w = l->w;
	size_t fit;

	if (l->f->diff) {
		d = change(l, value_base, value);
		if (!w) {
			if (fabs(d) > l->max_change)
				l->max_change = fabs(d);
			return;
		}
		diff_colour(l, d, rgb);
	} else if (!w) {
		return;
	} else if (n) {
		node_colour(l, n, rgb);
	}
	writer_str(w, "<g><title>");
	if (name)
		writer_xml(w, name, SIZE_MAX);
	else
		writer_printf(w, "[%" PRIu32 " narrow frames]", merged);
	writer_str(w, " (");
	writer_u64(w, value);
	writer_put(w, " ", 1);
	writer_str(w, l->f->unit);
	writer_str(w, ", ");
	writer_fixed(w, share(value, l->total), 2);
	writer_str(w, "%");
	if (l->f->diff)
		writer_printf(w, ", base %" PRIu64 ", %+.2f%%", value_base,
			      change(l, value_base, value));
	writer_str(w, ")</title><rect x=\"");
	writer_fixed(w, x, 1);
	writer_str(w, "\" y=\"");
	writer_u64(w, frame_y(l, depth));
	writer_str(w, "\" width=\"");
	writer_fixed(w, width, 1);
	writer_printf(w, "\" height=\"%d\" fill=\"#%02x%02x%02x\"/>", FLAME_FRAME_H - 1, rgb[0],
		      rgb[1], rgb[2]);
	fit = width > 6 ? (size_t)((width - 6) / FLAME_FONT_W) : 0;
	if (fit >= 3 && name) {
		writer_str(w, "<text x=\"");
		writer_fixed(w, x + 3, 1);
		writer_str(w, "\" y=\"");
		writer_u64(w, frame_y(l, depth) + FLAME_FRAME_H - 5);
		writer_str(w, "\">");
		writer_xml(w, name, fit);
		writer_str(w, "</text>");
	}
	writer_str(w, "</g>\n");
}

static void close_run(struct layout *l, uint32_t depth)
{
	struct run *r = &l->runs[depth];

	if (!r->open)
		return;
	r->open = false;
	if (r->value * l->scale >= FLAME_MIN_WIDTH) {
		if (depth > l->top_depth && !l->w)
			l->top_depth = depth;
		draw(l, NULL, depth, r->start, r->value, r->value_base, r->frames);
		l->merged_frames += r->frames;
		l->merged_boxes++;
	} else {
		l->left_frames += r->frames;
		l->left_value += r->value;
	}
}

/* One pass over the tree: measuring (l->w NULL: the top depth, the largest change) or
 * drawing. */
static void lay_out(struct layout *l)
{
	const struct tree *t = l->f->t;
	const int slot = l->f->slot;
	uint32_t d, depth, prev = 0;
	size_t i = 0;

	memset(l->runs, 0, (t->max_depth + 1) * sizeof(*l->runs));
	l->merged_frames = l->merged_boxes = l->left_frames = l->left_value = 0;
	l->cursor[0] = 0;
	while (i < t->nnodes) {
		const struct tree_node *n = &t->nodes[i];
		uint64_t start;

		depth = n->depth;
		for (d = prev; d > depth; d--)
			close_run(l, d);
		prev = depth;
		start = l->cursor[depth];
		l->cursor[depth] += n->value[slot];
		if (depth < t->max_depth)
			l->cursor[depth + 1] = start;
		if (n->value[slot] * l->scale < FLAME_MIN_WIDTH) {
			struct run *r = &l->runs[depth];

			if (!n->value[slot]) { /* only in the base: nothing to draw */
				i = n->end;
				continue;
			}
			if (!r->open)
				*r = (struct run){ .start = start, .open = true };
			r->value += n->value[slot];
			r->value_base += l->f->diff ? n->value[0] : 0;
			r->frames += n->end - i;
			i = n->end;
			continue;
		}
		close_run(l, depth);
		if (!l->w && depth > l->top_depth)
			l->top_depth = depth;
		draw(l, n, depth, start, n->value[slot],
		     l->f->diff ? n->value[0] : 0, 0);
		i++;
	}
	for (d = prev + 1; d-- > 0;)
		close_run(l, d);
}

static void put_header(struct layout *l, int height, const char *window)
{
	const struct flame *f = l->f;
	struct writer *w = l->w;
	char until[32] = "";

	describe_time(f->m->now, until);
	writer_printf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		      "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		      "xmlns=\"http://www.w3.org/2000/svg\">\n", FLAME_WIDTH, height, FLAME_WIDTH,
		      height);
	writer_str(w, "<style>text{font:12px Verdana,sans-serif;fill:#000}"
		      "#frames text{pointer-events:none}#frames g{cursor:pointer}"
		      "#frames g:hover rect{stroke:#000;stroke-width:.5}"
		      ".ctl{fill:#06c;cursor:pointer}.ctl:hover{text-decoration:underline}"
		      ".hide{display:none}.dim rect{opacity:.55}</style>\n");
	writer_printf(w, "<rect width=\"100%%\" height=\"100%%\" fill=\"%s\"/>\n",
		      f->diff ? "#f4f4f8" : "#f8f4ec");
	writer_printf(w, "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" "
		      "style=\"font-size:17px\">%s", FLAME_WIDTH / 2,
		      f->diff ? "Differential flame graph: " : "Flame graph: ");
	writer_xml(w, f->m->title ? f->m->title : "profile", SIZE_MAX);
	writer_printf(w, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"40\" "
		      "text-anchor=\"middle\" fill=\"#555\">%s, until %s: %" PRIu64 " ",
		      FLAME_WIDTH / 2, window, until, l->total);
	writer_xml(w, f->unit, SIZE_MAX);
	if (f->diff)
		writer_printf(w, " (base: %" PRIu64 "; red grew, blue shrank, by share of total)",
			      l->total_base);
	writer_str(w, "</text>\n");
	writer_printf(w, "<text id=\"reset\" class=\"ctl hide\" x=\"%d\" y=\"58\">Reset Zoom</text>"
		      "<text id=\"clear\" class=\"ctl hide\" x=\"%d\" y=\"58\" "
		      "text-anchor=\"end\">Clear</text><text id=\"search\" class=\"ctl\" x=\"%d\" "
		      "y=\"58\" text-anchor=\"end\">Search</text>\n", FLAME_PAD_X,
		      FLAME_WIDTH - FLAME_PAD_X - 60, FLAME_WIDTH - FLAME_PAD_X);
}

static void put_footer(struct layout *l, int height)
{
	struct writer *w = l->w;

	writer_str(w, "</g>\n");
	writer_printf(w, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>"
		      "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"> </text>\n",
		      FLAME_PAD_X, height - 26, FLAME_WIDTH - FLAME_PAD_X, height - 26);
	writer_printf(w, "<text id=\"narrow\" x=\"%d\" y=\"%d\" fill=\"#555\">", FLAME_PAD_X,
		      height - 8);
	if (l->merged_frames || l->left_frames)
		writer_printf(w, "Frames narrower than %.1f px: %" PRIu64 " merged into %" PRIu64
			      " grey boxes, %" PRIu64 " left out (%" PRIu64 " %s, %.3f%%)",
			      FLAME_MIN_WIDTH, l->merged_frames, l->merged_boxes, l->left_frames,
			      l->left_value, l->f->unit, share(l->left_value, l->total));
	writer_str(w, " </text>\n");
	writer_printf(w, "<script type=\"text/ecmascript\"><![CDATA[\n"
		      "var FLAME = {width: %d, padX: %d, frameH: %d, base: %" PRIu64 ", fontW: %.2f, "
		      "total: %" PRIu64 "};\n", FLAME_WIDTH, FLAME_PAD_X, FLAME_FRAME_H,
		      frame_y(l, 0), FLAME_FONT_W, l->total);
	writer_str(w, view_flame_js);
	writer_str(w, "]]></script>\n</svg>\n");
}

static int flame_render(const struct flame *f, FILE *out)
{
	const struct tree *t = f->t;
	struct layout l = { .f = f };
	char window[64];
	int height, err = -ENOMEM;

	if (describe_window(f->m, f->since, window, sizeof(window)))
		return -EINVAL;
	l.total = t->nodes[0].value[f->slot];
	l.total_base = t->nodes[0].value[0];
	l.scale = l.total ? (double)(FLAME_WIDTH - 2 * FLAME_PAD_X) / l.total : 0;
	l.cursor = calloc(t->max_depth + 2, sizeof(*l.cursor));
	l.runs = calloc(t->max_depth + 2, sizeof(*l.runs));
	l.colours = calloc(t->nnames ? t->nnames : 1, sizeof(*l.colours));
	if (!l.cursor || !l.runs || !l.colours)
		goto out;
	if (l.total)
		lay_out(&l);
	height = FLAME_TOP + (l.top_depth + 1) * FLAME_FRAME_H + FLAME_BOTTOM;
	l.w = writer_new(out);
	if (!l.w)
		goto out;
	put_header(&l, height, window);
	writer_str(l.w, "<g id=\"frames\">\n");
	if (l.total)
		lay_out(&l);
	put_footer(&l, height);
	err = writer_close(l.w);
out:
	free(l.colours);
	free(l.runs);
	free(l.cursor);
	return err;
}

int flame_draw(const struct profile_snapshot *const *snaps, int nsnaps, struct flame *f,
	       FILE *out)
{
	struct tree t;
	int err = tree_build(snaps, nsnaps, &t);

	if (err)
		return err;
	f->t = &t;
	err = flame_render(f, out);
	tree_free(&t);
	return err;
}

int view_svg(const struct profile_snapshot *s, const struct view_meta *m, FILE *out)
{
	struct flame f = { .m = m, .unit = s->unit, .since = s->since };

	return flame_draw(&s, 1, &f, out);
}
