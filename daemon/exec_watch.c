#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include <bpf/libbpf.h>
#include "bpf/exec_watch.h"
#include "daemon/exec_watch.h"
#include "exec_watch.skel.h"

struct exec_watch {
	struct exec_watch_bpf *skel;
	struct ring_buffer *ring;
	exec_watch_fn *fn;
	void *ctx;
	pthread_t thread;
	atomic_bool stop;
	atomic_uint_fast64_t events;
};

static int on_event(void *ctx, void *data, size_t size)
{
	struct exec_watch *w = ctx;
	const struct exec_watch_event *e = data;
	char comm[EXEC_WATCH_COMM_LEN + 1];

	if (size < sizeof(*e))
		return 0;
	memcpy(comm, e->comm, EXEC_WATCH_COMM_LEN);
	comm[EXEC_WATCH_COMM_LEN] = 0;
	atomic_fetch_add(&w->events, 1);
	w->fn(w->ctx, e->pid, comm);
	return 0;
}

/* Woken by the first exec of a burst; the rest of it (which does not wake: see
 * exec_watch.bpf.c) is read EXEC_WATCH_GAP_MS later, and again until a read finds nothing.
 * Idle, the ring is read every 200 ms, for forks (which never wake) and for a stop. */
static void *watch_main(void *arg)
{
	struct exec_watch *w = arg;
	bool busy = false;

	while (!atomic_load(&w->stop)) {
		int n = ring_buffer__poll(w->ring, busy ? EXEC_WATCH_GAP_MS : 200);

		if (n >= 0)
			n += ring_buffer__consume(w->ring);
		busy = n > 0;
	}
	return NULL;
}

int exec_watch_new(exec_watch_fn *fn, void *ctx, struct exec_watch **out, char *why,
		   size_t why_size)
{
	struct exec_watch *w = calloc(1, sizeof(*w));
	const char *step;
	int err;

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->ctx = ctx;
	step = "opening";
	w->skel = exec_watch_bpf__open();
	if (!w->skel) {
		err = -errno;
		goto fail;
	}
	step = "loading";
	err = exec_watch_bpf__load(w->skel);
	if (err)
		goto fail;
	step = "attaching to the sched_process_exec/fork raw tracepoints";
	err = exec_watch_bpf__attach(w->skel);
	if (err)
		goto fail;
	step = "reading its ring buffer";
	w->ring = ring_buffer__new(bpf_map__fd(w->skel->maps.events), on_event, w, NULL);
	if (!w->ring) {
		err = -errno;
		goto fail;
	}
	step = "starting its thread";
	err = -pthread_create(&w->thread, NULL, watch_main, w);
	if (err)
		goto fail;
	*out = w;
	return 0;
fail:
	snprintf(why, why_size, "%s the exec watch: %s", step, strerror(-err));
	ring_buffer__free(w->ring);
	exec_watch_bpf__destroy(w->skel);
	free(w);
	return err;
}

void exec_watch_free(struct exec_watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, true);
	pthread_join(w->thread, NULL);
	ring_buffer__free(w->ring);
	exec_watch_bpf__destroy(w->skel);
	free(w);
}

void exec_watch_counts(struct exec_watch *w, uint64_t *events, uint64_t *lost)
{
	*events = atomic_load(&w->events);
	*lost = __atomic_load_n(&w->skel->bss->lost, __ATOMIC_RELAXED);
}
