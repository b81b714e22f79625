/* config/unwind auto: the samples judged, held until the verdict.
 *
 * A target under auto is sampled in dwarf mode while collectors/unwind_auto.c judges its
 * first samples; after a verdict of fp the kernel walks its stacks, and that walk ends at
 * __libc_start_call_main where CFI goes on to _start (glibc's startup keeps no frame
 * pointers). Added as unwound, the judged samples would root each call path twice in the
 * profile. So they wait here, each with its pcs and what the frame-pointer replay found, and
 * go in once the verdict is in, in the second each was taken: under fp as the kernel's walk
 * would have recorded them, under dwarf as unwound. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/cpu_internal.h"

struct cpu_auto_held {
	char comm[CPU_COMM_LEN];
	int64_t sec;
	uint32_t gen;
	struct cpu_named_stack *user; /* as unwound from CFI: a copy, not in t->named */
	struct cpu_named_stack *kern; /* a copy, or NULL */
	bool truncated;
	uint32_t depth;
	uint32_t fp_frames; /* pcs[0..fp_frames): what the frame-pointer walk found; 0: not whole */
	uint64_t pcs[];
};

static struct cpu_named_stack *named_copy(const struct cpu_named_stack *n)
{
	size_t size = sizeof(*n) + n->depth * sizeof(n->ids[0]);
	struct cpu_named_stack *copy = malloc(size);

	if (copy)
		memcpy(copy, n, size);
	return copy;
}

static void held_free(struct cpu_auto_held *h)
{
	free(h->user);
	free(h->kern);
	free(h);
}

int cpu_auto_hold(struct cpu_target_state *t, const char *raw_comm, int64_t sec, uint32_t gen,
		  const uint64_t *pcs, uint32_t depth, bool truncated, uint32_t fp_frames,
		  const struct cpu_named_stack *user, const struct cpu_named_stack *kern)
{
	struct cpu_auto_held *h;

	if (t->auto_held_n == UNWIND_AUTO_SAMPLES)
		return -ENOSPC;
	h = calloc(1, sizeof(*h) + depth * sizeof(h->pcs[0]));
	if (!h)
		return -ENOMEM;
	h->user = named_copy(user);
	h->kern = kern ? named_copy(kern) : NULL;
	if (!h->user || (kern && !h->kern)) {
		held_free(h);
		return -ENOMEM;
	}
	memcpy(h->comm, raw_comm, CPU_COMM_LEN);
	h->sec = sec;
	h->gen = gen;
	h->truncated = truncated;
	h->depth = depth;
	h->fp_frames = fp_frames;
	memcpy(h->pcs, pcs, depth * sizeof(pcs[0]));
	t->auto_held[t->auto_held_n++] = h;
	return 0;
}

/* The outermost frames of h the kernel's walk would not show: for a whole walk, those past
 * what it found; for a broken one, the start-up frames some whole walk of this target ended
 * above (the same return addresses at the root), so that it roots where the fp stacks do
 * while keeping the frames CFI found below. */
static uint32_t frames_unseen(struct cpu_auto_held *const *held, uint32_t n,
			      const struct cpu_auto_held *h)
{
	if (h->fp_frames)
		return h->depth - h->fp_frames;
	for (uint32_t i = 0; i < n; i++) {
		const struct cpu_auto_held *w = held[i];
		uint32_t unseen = w->depth - w->fp_frames;

		if (w->fp_frames && unseen && unseen < h->depth &&
		    !memcmp(h->pcs + h->depth - unseen, w->pcs + w->fp_frames,
			    unseen * sizeof(h->pcs[0])))
			return unseen;
	}
	return 0;
}

/* h's user stack as the kernel's walk would root it; h's own CFI stack when nothing is cut
 * or memory ran out. */
static const struct cpu_named_stack *fp_rooted(struct cpu_collector *c,
					       struct cpu_target_state *t,
					       struct cpu_auto_held *const *held, uint32_t n,
					       const struct cpu_auto_held *h)
{
	uint32_t depth = h->depth - frames_unseen(held, n, h);
	bool truncated = h->truncated && depth == h->depth;
	struct cpu_named_key key = {
		.hash = cpu_hash_pcs(h->pcs, depth) ^ truncated,
		.gen = h->gen,
		.kind = CPU_STACK_DWARF,
	};
	const struct cpu_named_stack *named;

	if (depth == h->depth)
		return h->user;
	named = cpu_name_pcs(c, t, &key, h->pcs, depth, truncated);
	return named ? named : h->user;
}

void cpu_auto_release(struct cpu_collector *c, struct cpu_target_state *t, bool fp)
{
	struct cpu_auto_held *held[UNWIND_AUTO_SAMPLES];
	uint32_t n = t->auto_held_n;

	/* Taken off t first: naming may read new mappings, and an exec found there releases
	 * what t holds. */
	memcpy(held, t->auto_held, n * sizeof(held[0]));
	t->auto_held_n = 0;
	for (uint32_t i = 0; i < n; i++)
		cpu_add_stacks(t, held[i]->comm, fp ? fp_rooted(c, t, held, n, held[i])
						  : held[i]->user,
			       false, held[i]->kern, 1, held[i]->sec);
	for (uint32_t i = 0; i < n; i++)
		held_free(held[i]);
}

void cpu_auto_free(struct cpu_target_state *t)
{
	for (uint32_t i = 0; i < t->auto_held_n; i++)
		held_free(t->auto_held[i]);
	t->auto_held_n = 0;
}
