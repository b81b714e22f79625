#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "store/thread_cpu.h"

struct thread_cpu_entry {
	pid_t tid;
	uint64_t cpu_us;
};

struct sample {
	uint64_t at_us;
	struct thread_cpu_entry *v; /* ascending tid */
	size_t n;
};

/* One more slot than seconds kept, so the sample a full window ago is still there. */
#define RING (THREAD_CPU_HISTORY_S + 1)

struct thread_cpu {
	struct sample base;
	struct sample ring[RING];
	size_t head, count; /* ring[head] is the oldest */
};

struct thread_cpu *thread_cpu_new(void)
{
	return calloc(1, sizeof(struct thread_cpu));
}

static void sample_clear(struct sample *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static void clear(struct thread_cpu *h)
{
	sample_clear(&h->base);
	for (size_t i = 0; i < RING; i++)
		sample_clear(&h->ring[i]);
	h->head = h->count = 0;
}

void thread_cpu_free(struct thread_cpu *h)
{
	if (!h)
		return;
	clear(h);
	free(h);
}

static int sample_fill(struct sample *s, const struct thread_list *l, uint64_t at_us)
{
	size_t n = l->n < THREAD_CPU_MAX_THREADS ? l->n : THREAD_CPU_MAX_THREADS;
	struct thread_cpu_entry *v = malloc((n ? n : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = (struct thread_cpu_entry){ l->v[i].tid, l->v[i].utime_us + l->v[i].stime_us };
	free(s->v);
	*s = (struct sample){ .at_us = at_us, .v = v, .n = n };
	return 0;
}

int thread_cpu_record(struct thread_cpu *h, const struct thread_list *l, uint64_t at_us)
{
	struct sample s = {0};
	int err = sample_fill(&s, l, at_us);

	if (err)
		return err;
	if (h->count == RING) {
		sample_clear(&h->ring[h->head]);
		h->head = (h->head + 1) % RING;
		h->count--;
	}
	h->ring[(h->head + h->count++) % RING] = s;
	return 0;
}

int thread_cpu_reset(struct thread_cpu *h, const struct thread_list *l, uint64_t at_us)
{
	struct sample base = {0};
	int err = sample_fill(&base, l, at_us);

	if (err)
		return err;
	clear(h);
	h->base = base;
	return thread_cpu_record(h, l, at_us);
}

static const struct thread_cpu_entry *find(const struct sample *s, pid_t tid)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].tid == tid)
			return &s->v[mid];
		if (s->v[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static uint64_t distance(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

static const struct sample *reference(const struct thread_cpu *h, uint64_t window_s,
				      uint64_t at_us)
{
	uint64_t want = window_s * 1000000;
	const struct sample *best = NULL;

	if (!window_s)
		return h->base.v ? &h->base : NULL;
	for (size_t i = 0; i < h->count; i++) {
		const struct sample *s = &h->ring[(h->head + i) % RING];

		if (s->at_us <= at_us &&
		    (!best || distance(at_us - s->at_us, want) < distance(at_us - best->at_us, want)))
			best = s;
	}
	return best;
}

int thread_cpu_apply(const struct thread_cpu *h, uint64_t window_s, uint64_t at_us,
		     struct thread_list *l)
{
	const struct sample *ref = reference(h, window_s, at_us);

	if (!ref)
		return -ENOENT;
	for (size_t i = 0; i < l->n; i++) {
		struct thread_info *t = &l->v[i];
		const struct thread_cpu_entry *e = find(ref, t->tid);
		uint64_t total = t->utime_us + t->stime_us;

		/* A tid reused by a newer thread shows less CPU than its namesake had. */
		t->recent_us = e && e->cpu_us <= total ? total - e->cpu_us : total;
	}
	l->interval_us = at_us - ref->at_us;
	l->window_s = window_s;
	l->from_history = true;
	return 0;
}
