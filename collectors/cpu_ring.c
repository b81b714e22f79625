/* The ring buffer dwarf samples and spilled stacks come through (bpf/cpu.bpf.c, dwarf_rings),
 * sized for what it carries. Its pages are the daemon's largest memory: the kernel allocates
 * them all when the ring is made, and mapping them (data twice, for reads across the wrap)
 * puts twice the ring's size in the daemon's RSS at once. So the ring is small while no
 * target is in dwarf mode (only the rare spilled stack comes then), and while some is it holds
 * about RING_SLACK_MS of dwarf samples of every online CPU at the sampling rate: the time
 * the reader may be held up (a drain, or naming a program's first stacks, under the lock).
 * It is replaced through its one-slot map-of-maps when that changes; the update waits until
 * no program writes the old ring any more, which is then read to its end before it goes. */
#include <errno.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <bpf/libbpf.h>
#include "collectors/cpu_internal.h"
#include "cpu.skel.h"

/* Room for ~60 spilled stacks between two wake-ups of the reader. */
#define RING_SMALL (64u << 10)
/* The most any rate gets, the ring's one size before it was fitted. */
#define RING_MAX (16u << 20)
#define RING_SLACK_MS 1000
/* A dwarf record at most: header, stack copy, and the ring's own header. */
#define RING_RECORD_MAX (sizeof(struct cpu_dwarf_hdr) + CPU_STACK_BYTES + 8)

/* The size the ring should have now: a power of two, as the kernel wants. */
static uint32_t ring_size_wanted(const struct cpu_collector *c, bool dwarf)
{
	const struct cpu_target_state *t, *tmp;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t bytes;
	uint32_t size = RING_SMALL;

	HASH_ITER(hh, c->targets, t, tmp) {
		if (dwarf)
			break;
		dwarf = t->dwarf;
	}
	if (!dwarf)
		return RING_SMALL;
	bytes = (uint64_t)(cpus > 0 ? cpus : c->ncpus) * c->hz * RING_RECORD_MAX *
		RING_SLACK_MS / 1000;
	while (size < bytes && size < RING_MAX)
		size <<= 1;
	return size;
}

static void ring_read(struct cpu_collector *c, struct ring_buffer *rb)
{
	c->dwarf_reading = true;
	ring_buffer__consume(rb);
	c->dwarf_reading = false;
}

/* Installs a ring of size bytes in place of the current one, whose records are read first. */
static int ring_replace(struct cpu_collector *c, uint32_t size)
{
	const struct swap_map_spec spec = { .type = BPF_MAP_TYPE_RINGBUF, .max_entries = size };
	struct epoll_event ev = { .events = EPOLLIN };
	struct ring_buffer *rb;
	int fd, err;

	fd = swap_map_create(&spec, "cpu_dwarf_ring");
	if (fd < 0)
		return fd;
	rb = ring_buffer__new(fd, cpu_ring_record, c, NULL);
	if (!rb) {
		err = -errno;
		goto err_close;
	}
	if (epoll_ctl(c->dwarf_epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb), &ev)) {
		err = -errno;
		goto err_free;
	}
	err = swap_map_set(c->skel->maps.dwarf_rings, fd);
	if (err)
		goto err_unwatch;
	if (c->dwarf_rb) {
		ring_read(c, c->dwarf_rb);
		epoll_ctl(c->dwarf_epfd, EPOLL_CTL_DEL, ring_buffer__epoll_fd(c->dwarf_rb), NULL);
		ring_buffer__free(c->dwarf_rb);
		close(c->dwarf_ring_fd);
	}
	c->dwarf_rb = rb;
	c->dwarf_ring_fd = fd;
	c->dwarf_ring_size = size;
	return 0;
err_unwatch:
	epoll_ctl(c->dwarf_epfd, EPOLL_CTL_DEL, ring_buffer__epoll_fd(rb), NULL);
err_free:
	ring_buffer__free(rb);
err_close:
	close(fd);
	return err;
}

int cpu_ring_fit_locked(struct cpu_collector *c, bool dwarf_coming)
{
	uint32_t size = ring_size_wanted(c, dwarf_coming);

	c->dwarf_refit = c->dwarf_reading;
	if (c->dwarf_reading || (c->dwarf_rb && size == c->dwarf_ring_size))
		return 0;
	return ring_replace(c, size);
}

void cpu_ring_read_locked(struct cpu_collector *c)
{
	ring_read(c, c->dwarf_rb);
	if (c->dwarf_refit)
		cpu_ring_fit_locked(c, false);
}

int cpu_ring_start(struct cpu_collector *c)
{
	c->dwarf_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->dwarf_epfd < 0)
		return -errno;
	return cpu_ring_fit_locked(c, false);
}

void cpu_ring_stop(struct cpu_collector *c)
{
	ring_buffer__free(c->dwarf_rb);
	c->dwarf_rb = NULL;
	if (c->dwarf_ring_fd >= 0)
		close(c->dwarf_ring_fd);
	if (c->dwarf_epfd >= 0)
		close(c->dwarf_epfd);
	c->dwarf_ring_fd = c->dwarf_epfd = -1;
}
