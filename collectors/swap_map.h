/* An aggregate the kernel writes through a one-slot map-of-maps, drained by swapping: the
 * daemon installs the spare inner map, which makes the kernel wait until no program still
 * uses the old one (a map-of-maps update waits for an RCU grace period), and then reads the
 * old map race-free while the kernel fills the other. cpu, offcpu and sys drain their counts
 * this way. */
#ifndef APERTURE_COLLECTORS_SWAP_MAP_H
#define APERTURE_COLLECTORS_SWAP_MAP_H

#include <stdint.h>
#include <bpf/libbpf.h>

/* Shape of the inner maps. The kernel only installs inner maps that match the template the
 * program was verified with, and the daemon makes both, so the shape is chosen at run time
 * (kernels before 6.1 refuse non-preallocated hash maps in perf_event programs, say). */
struct swap_map_spec {
	uint32_t type; /* BPF_MAP_TYPE_HASH or BPF_MAP_TYPE_PERCPU_HASH */
	uint32_t key_size, value_size, max_entries, flags;
};

struct swap_map {
	struct bpf_map *outer;
	struct swap_map_spec spec;
	int fds[2];
	int live; /* index of the map the kernel writes now */
};

/* Makes both inner maps and sets the first as outer's template: before the object is
 * loaded. -errno. */
int swap_map_init(struct swap_map *s, struct bpf_map *outer, const struct swap_map_spec *spec,
		  const char *name);
/* Points the kernel at the live map: after the object is loaded. */
int swap_map_install(struct swap_map *s);
/* Swaps the kernel onto the spare map; *old is the map it wrote until now, which the caller
 * reads and must leave empty (swap_map_take_all does). */
int swap_map_swap(struct swap_map *s, int *old);
void swap_map_fini(struct swap_map *s);

/* Makes one inner map of spec. fd or -errno. */
int swap_map_create(const struct swap_map_spec *spec, const char *name);
/* Points outer's slot at fd. */
int swap_map_set(struct bpf_map *outer, int fd);

/* Reads and deletes every entry of a hash map, cap entries at a time, handing each batch to
 * each(). The map ends up empty whatever each() says, or stale entries would come back two
 * drains later: each()'s first error is returned after the map is emptied. */
int swap_map_take_all(int fd, void *keys, void *values, uint32_t cap,
		      int (*each)(void *ctx, const void *keys, const void *values, uint32_t n),
		      void *ctx);

#endif
