/* The SQLite store's exactly-once and latest-state rules, on a real file. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "aggregate/store.h"

/* One batch: target pid of node, service label svc, `count` samples of stack main;work at
 * second sec, and status text status. Everything static: the store only reads it. */
struct fixture {
	WireBatch b;
	char *strings[6];
	Aperture__Sync__V1__Frame f[2], *fp[2];
	Aperture__Sync__V1__Stack st, *stp[1];
	uint32_t frames[2];
	Aperture__Sync__V1__Target t, *tp[1];
	Aperture__Sync__V1__Label l, *lp[1];
	Aperture__Sync__V1__Profile p, *pp[1];
	Aperture__Sync__V1__Second s, *sp[1];
	uint32_t stacks[1];
	uint64_t counts[1];
};

static WireBatch *make(struct fixture *x, const char *node, const char *boot, uint64_t seq,
		       int pid, const char *svc, int64_t sec, uint64_t count, const char *status)
{
	memset(x, 0, sizeof(*x));
	aperture__sync__v1__batch__init(&x->b);
	x->strings[0] = "";
	x->strings[1] = "main";
	x->strings[2] = "work";
	x->b.version = 1;
	x->b.node = (char *)node;
	x->b.boot_id = (char *)boot;
	x->b.seq = seq;
	x->b.parts = 1;
	x->b.n_strings = 3;
	x->b.strings = x->strings;
	for (int i = 0; i < 2; i++) {
		aperture__sync__v1__frame__init(&x->f[i]);
		x->f[i].name = i + 1;
		x->fp[i] = &x->f[i];
		x->frames[i] = i;
	}
	x->b.n_frames = 2;
	x->b.frames = x->fp;
	aperture__sync__v1__stack__init(&x->st);
	x->st.n_frames = 2;
	x->st.frames = x->frames;
	x->stp[0] = &x->st;
	x->b.n_stacks = 1;
	x->b.stacks = x->stp;
	aperture__sync__v1__target__init(&x->t);
	x->t.pid = pid;
	x->t.start_time = 7;
	x->t.comm = "app";
	x->t.status = (char *)status;
	aperture__sync__v1__label__init(&x->l);
	x->l.key = "service";
	x->l.value = (char *)svc;
	x->lp[0] = &x->l;
	x->t.n_labels = 1;
	x->t.labels = x->lp;
	aperture__sync__v1__profile__init(&x->p);
	x->p.type = "cpu";
	aperture__sync__v1__second__init(&x->s);
	x->s.sec = sec;
	x->stacks[0] = 0;
	x->counts[0] = count;
	x->s.n_stacks = x->s.n_counts = 1;
	x->s.stacks = x->stacks;
	x->s.counts = x->counts;
	x->sp[0] = &x->s;
	x->p.n_seconds = 1;
	x->p.seconds = x->sp;
	x->pp[0] = &x->p;
	x->t.n_profiles = 1;
	x->t.profiles = x->pp;
	x->tp[0] = &x->t;
	x->b.n_targets = 1;
	x->b.targets = x->tp;
	return &x->b;
}

static char path[64];

static struct agg_store *open_store(void)
{
	struct agg_store *s;
	char why[256];

	assert_int_equal(agg_store_open(path, &s, why, sizeof(why)), 0);
	return s;
}

static uint64_t total(struct agg_store *s, const char *node, const char *svc, int64_t from)
{
	struct agg_query q = { .node = node, .pid = 42, .service = svc, .type = TARGET_PROFILE_CPU,
			       .from = from, .until = INT64_MAX };
	struct profile_snapshot *snap;
	uint64_t n;

	assert_int_equal(s->ops->profile(s, &q, &snap), 0);
	n = snap->total;
	if (snap->nstacks) {
		assert_int_equal(snap->stacks[0].depth, 2);
		assert_string_equal(snap->names[snap->stacks[0].frames[1]], "work");
	}
	profile_snapshot_free(snap);
	return n;
}

static char *status_of(struct agg_store *s)
{
	char *text;

	assert_int_equal(s->ops->text(s, "n1", 42, TREE_TEXT_STATUS, &text), 0);
	return text;
}

static void test_exactly_once_and_latest_state(void **state)
{
	struct fixture x;
	struct agg_apply_result r;
	struct agg_store *s;
	char *text;

	strcpy(path, "/tmp/aperture-store-XXXXXX");
	close(mkstemp(path));
	s = open_store();
	assert_int_equal(s->ops->apply(s, make(&x, "n1", "b1", 2, 42, "svc", 1000, 5, "two"),
				       2000, &r), 0);
	assert_false(r.duplicate);
	assert_int_equal(r.samples, 5);
	assert_int_equal(s->ops->apply(s, &x.b, 2000, &r), 0);
	assert_true(r.duplicate);
	/* seq 1 arrives late: its samples count, its older status does not replace */
	assert_int_equal(s->ops->apply(s, make(&x, "n1", "b1", 1, 42, "svc", 1001, 3, "one"),
				       2000, &r), 0);
	assert_false(r.duplicate);
	assert_int_equal(total(s, "n1", NULL, 0), 8);
	text = status_of(s);
	assert_string_equal(text, "two");
	free(text);
	/* a later boot of the node is newer whatever its seq */
	assert_int_equal(s->ops->apply(s, make(&x, "n1", "b2", 1, 42, "svc", 1002, 1, "three"),
				       2000, &r), 0);
	text = status_of(s);
	assert_string_equal(text, "three");
	free(text);
	/* another node's target of the same service adds to the service */
	assert_int_equal(s->ops->apply(s, make(&x, "n2", "b9", 1, 42, "svc", 1003, 10, "x"),
				       2000, &r), 0);
	assert_int_equal(total(s, NULL, "svc", 0), 19);
	assert_int_equal(total(s, "n1", NULL, 1001), 4); /* a range */
	s->ops->close(s);

	/* after a restart, a replay is still a duplicate */
	s = open_store();
	assert_int_equal(s->ops->apply(s, make(&x, "n1", "b1", 1, 42, "svc", 1001, 3, "one"),
				       2000, &r), 0);
	assert_true(r.duplicate);
	assert_int_equal(total(s, "n1", NULL, 0), 9);
	/* retention deletes by second */
	assert_int_equal(s->ops->retain(s, 1002), 0);
	assert_int_equal(total(s, "n1", NULL, 0), 1);
	assert_int_equal(total(s, NULL, "svc", 0), 11);
	s->ops->close(s);
	unlink(path);
	strcat(path, "-wal");
	unlink(path);
	path[strlen(path) - 4] = 0;
	strcat(path, "-shm");
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exactly_once_and_latest_state),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
