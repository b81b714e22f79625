/* config/unwind auto: the samples judged, held until the verdict.
 *
 * A target under auto is sampled in dwarf mode while collectors/unwind_auto.c judges its
 * first samples; after a verdict of fp the kernel walks its stacks, and that walk ends at
 * __libc_start_call_main where CFI goes on to _start (glibc's startup keeps no frame
 * pointers). Added as unwound, the judged samples would root each call path twice in the
 * profile. So they wait here, each with its pcs and what the frame-pointer replay found, and
 * go in once the verdict is in, in the second each was taken: under fp as the kernel's walk
 * would have recorded them, under dwarf as unwound. A whole walk that found all but the
 * outermost frames teaches which start-up frames the kernel's walk cannot see (_start and
 * __libc_start_main on the main thread): a sample whose walk broke keeps its CFI frames less
 * those, and so do the dwarf samples still on their way when the verdict came. */
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
	size_t size = sizeof(*n) + 2 * n->depth * sizeof(n->ids[0]);
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

/* A whole walk that ended above the root: the start-up frames it could not see. */
static void learn_root(struct cpu_target_state *t, const uint64_t *pcs, uint32_t depth,
		       uint32_t fp_frames)
{
	uint32_t unseen = depth - fp_frames;

	if (!fp_frames || !unseen || unseen > UNWIND_AUTO_ROOT_FRAMES)
		return;
	for (uint32_t i = 0; i < t->auto_roots_n; i++)
		if (t->auto_roots[i].n == unseen &&
		    !memcmp(t->auto_roots[i].pcs, pcs + fp_frames, unseen * sizeof(pcs[0])))
			return;
	if (t->auto_roots_n == CPU_AUTO_ROOTS)
		return;
	t->auto_roots[t->auto_roots_n].n = unseen;
	memcpy(t->auto_roots[t->auto_roots_n++].pcs, pcs + fp_frames, unseen * sizeof(pcs[0]));
}

int cpu_auto_hold(struct cpu_target_state *t, const char *raw_comm, int64_t sec, uint32_t gen,
		  const uint64_t *pcs, uint32_t depth, bool truncated, uint32_t fp_frames,
		  const struct cpu_named_stack *user, const struct cpu_named_stack *kern)
{
	struct cpu_auto_held *h;

	if (t->auto_held_n == UNWIND_AUTO_SAMPLES)
		return -ENOSPC;
	h = malloc(sizeof(*h) + depth * sizeof(h->pcs[0]));
	if (!h)
		return -ENOMEM;
	*h = (struct cpu_auto_held){
		.sec = sec, .gen = gen, .truncated = truncated, .depth = depth,
		.fp_frames = fp_frames,
		.user = named_copy(user), .kern = kern ? named_copy(kern) : NULL,
	};
	if (!h->user || (kern && !h->kern)) {
		held_free(h);
		return -ENOMEM;
	}
	memcpy(h->comm, raw_comm, CPU_COMM_LEN);
	memcpy(h->pcs, pcs, depth * sizeof(pcs[0]));
	t->auto_held[t->auto_held_n++] = h;
	learn_root(t, pcs, depth, fp_frames);
	return 0;
}

static uint32_t fp_depth(const struct cpu_target_state *t, const uint64_t *pcs, uint32_t depth,
			 uint32_t fp_frames)
{
	if (fp_frames)
		return fp_frames;
	for (uint32_t i = 0; i < t->auto_roots_n; i++) {
		const struct cpu_auto_root *r = &t->auto_roots[i];

		if (r->n < depth && !memcmp(pcs + depth - r->n, r->pcs, r->n * sizeof(pcs[0])))
			return depth - r->n;
	}
	return depth;
}

struct cpu_named_stack *cpu_auto_fp_rooted(struct cpu_collector *c, struct cpu_target_state *t,
					   uint32_t gen, const uint64_t *pcs, uint32_t depth,
					   bool truncated, uint32_t fp_frames)
{
	uint32_t kept = fp_depth(t, pcs, depth, fp_frames);
	struct cpu_named_key key = { .gen = gen, .kind = CPU_STACK_DWARF };

	truncated = truncated && kept == depth;
	key.hash = cpu_hash_pcs(pcs, kept) ^ truncated;
	return cpu_name_pcs(c, t, &key, pcs, kept, truncated);
}

void cpu_auto_release(struct cpu_collector *c, struct cpu_target_state *t, bool fp)
{
	struct cpu_auto_held *held[UNWIND_AUTO_SAMPLES];
	uint32_t n = t->auto_held_n;

	/* Taken off t first: naming may read new mappings, and an exec found there releases
	 * what t holds. */
	memcpy(held, t->auto_held, n * sizeof(held[0]));
	t->auto_held_n = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct cpu_auto_held *h = held[i];
		const struct cpu_named_stack *user = NULL;

		if (fp)
			user = cpu_auto_fp_rooted(c, t, h->gen, h->pcs, h->depth, h->truncated,
						  h->fp_frames);
		cpu_add_stacks(t, h->comm, user ? user : h->user, false, h->kern, 1, h->sec);
	}
	for (uint32_t i = 0; i < n; i++)
		held_free(held[i]);
}

/* Sync ships a second once it was drained 2 s ago (sync/client.c's SETTLE_S), and a reader
 * expects what ran a moment ago: a target on CPU a few times a second (mostly idle) would
 * otherwise hold its samples until its 128th, for minutes. */
void cpu_auto_deadline(struct cpu_collector *c, struct cpu_target_state *t, int64_t now)
{
	if (!t->auto_held_n || now - t->auto_held[0]->sec < 2 ||
	    unwind_auto_decide(&t->unwind_auto) < 0)
		return;
	cpu_target_apply_unwind(c, t);
	cpu_auto_release(c, t, !t->dwarf);
}

void cpu_auto_reset(struct cpu_collector *c, struct cpu_target_state *t)
{
	cpu_auto_release(c, t, false);
	t->auto_roots_n = 0;
	unwind_auto_reset(&t->unwind_auto);
}

void cpu_auto_free(struct cpu_target_state *t)
{
	for (uint32_t i = 0; i < t->auto_held_n; i++)
		held_free(t->auto_held[i]);
	t->auto_held_n = 0;
}
