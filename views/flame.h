/* The flame graph both view_svg and view_diff_svg draw. Internal to views/. */
#ifndef APERTURE_VIEWS_FLAME_H
#define APERTURE_VIEWS_FLAME_H

#include <stdbool.h>
#include <stdio.h>
#include "views/tree.h"
#include "views/views.h"

struct flame {
	const struct tree *t; /* set by flame_draw */
	const struct view_meta *m;
	const char *unit;
	int64_t since;
	int slot;         /* which of a node's values sets its width */
	bool diff;        /* colour by change from value[0] (base) to value[1] (now) */
};

/* Builds the tree of snaps (f->t is set to it while drawing) and draws it. */
int flame_draw(const struct profile_snapshot *const *snaps, int nsnaps, struct flame *f,
	       FILE *out);

#endif
