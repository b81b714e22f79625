// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "symbols/ksym_events.h"

/* Pages of records per CPU: a load makes one record per program and subprogram, ~80 bytes,
 * and a daemon starting its collectors loads dozens: 400 records between two reads. */
#define RING_PAGES 8
/* Longer records are not ksymbol records we can use (KSYM_NAME_LEN is 512). */
#define RECORD_MAX 1024

struct ksym_ring {
	int fd;
	struct perf_event_mmap_page *meta; /* followed by the data pages */
};

struct ksym_events {
	size_t n;
	size_t map_len, data_len;
	struct ksym_ring rings[];
};

static int open_cpu(int cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_DUMMY,
		.size = sizeof(attr),
		.ksymbol = 1,
	};
	int fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int ksym_events_open(struct ksym_events **out)
{
	long ncpus = sysconf(_SC_NPROCESSORS_CONF), page = sysconf(_SC_PAGESIZE);
	struct ksym_events *e;
	int err = -ENODEV;

	if (ncpus <= 0)
		return -ENODEV;
	e = calloc(1, sizeof(*e) + ncpus * sizeof(e->rings[0]));
	if (!e)
		return -ENOMEM;
	e->data_len = RING_PAGES * page;
	e->map_len = page + e->data_len;
	for (long cpu = 0; cpu < ncpus; cpu++) {
		struct ksym_ring *r = &e->rings[e->n];
		void *map;

		r->fd = open_cpu(cpu);
		if (r->fd < 0) {
			err = r->fd; /* -ENODEV for a CPU that is offline: skipped */
			continue;
		}
		map = mmap(NULL, e->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (map == MAP_FAILED) {
			err = -errno;
			close(r->fd);
			continue;
		}
		r->meta = map;
		e->n++;
	}
	if (!e->n) {
		free(e);
		return err;
	}
	*out = e;
	return 0;
}

void ksym_events_free(struct ksym_events *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++) {
		munmap(e->rings[i].meta, e->map_len);
		close(e->rings[i].fd);
	}
	free(e);
}

/* len bytes of the ring from position pos (which wraps), into out. */
static void copy_out(const struct ksym_events *e, const struct ksym_ring *r, uint64_t pos,
		     void *out, size_t len)
{
	const char *data = (const char *)r->meta + (e->map_len - e->data_len);
	size_t at = pos % e->data_len, first = e->data_len - at < len ? e->data_len - at : len;

	memcpy(out, data + at, first);
	memcpy((char *)out + first, data, len - first);
}

static bool read_ring(const struct ksym_events *e, struct ksym_ring *r,
		      void (*each)(void *ctx, const struct ksym_record *rec), void *ctx)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	bool lost = false;

	while (tail < head) {
		union {
			struct perf_event_header h;
			char bytes[RECORD_MAX + 1];
		} rec;
		struct {
			uint64_t addr;
			uint32_t len;
			uint16_t type, flags;
		} k;

		copy_out(e, r, tail, &rec.h, sizeof(rec.h));
		if (rec.h.size < sizeof(rec.h) || rec.h.size > head - tail) {
			lost = true; /* cannot happen; resynchronised by skipping all */
			break;
		}
		if (rec.h.type == PERF_RECORD_LOST) {
			lost = true;
		} else if (rec.h.type == PERF_RECORD_KSYMBOL && rec.h.size <= RECORD_MAX &&
			   rec.h.size > sizeof(rec.h) + sizeof(k)) {
			struct ksym_record out;

			copy_out(e, r, tail, rec.bytes, rec.h.size);
			rec.bytes[rec.h.size] = '\0';
			memcpy(&k, rec.bytes + sizeof(rec.h), sizeof(k));
			out = (struct ksym_record){
				.addr = k.addr,
				.len = k.len,
				.unregister = k.flags & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER,
				.name = rec.bytes + sizeof(rec.h) + sizeof(k),
			};
			each(ctx, &out);
		}
		tail += rec.h.size;
	}
	__atomic_store_n(&r->meta->data_tail, head, __ATOMIC_RELEASE);
	return lost;
}

bool ksym_events_read(struct ksym_events *e,
		      void (*each)(void *ctx, const struct ksym_record *r), void *ctx)
{
	bool lost = false;

	for (size_t i = 0; i < e->n; i++)
		lost |= read_ring(e, &e->rings[i], each, ctx);
	return lost;
}
