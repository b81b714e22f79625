/* System call and lock-wait statistics of one target: what the sys collector writes and the
 * syscalls.json and locks.json views read.
 *
 * Rows are latency distributions keyed by what they describe: a system call by (number,
 * errno), a user-space lock wait by (lock address, holder, waiting stack), a kernel lock by
 * (address, flags). They add up from enable (or reset) on. Thread-safe: one writer, any
 * number of readers; refcounted like profiles, so a view outlives a dropped target. */
#ifndef APERTURE_STORE_SYSSTATS_H
#define APERTURE_STORE_SYSSTATS_H

#include <stdint.h>
#include <stddef.h>

#define LATENCY_HIST 32 /* bucket i counts times in [2^i, 2^(i+1)) ns; the last is open */

struct latency {
	uint64_t count;
	uint64_t total_ns;
	uint64_t max_ns;
	uint64_t hist[LATENCY_HIST];
};

void latency_add(struct latency *into, const struct latency *from);

enum sys_row_kind {
	SYS_ROW_CALL,   /* a: system call number, b: errno (0 = success) */
	SYS_ROW_LOCK,   /* addr: futex word, a: holder tid (0 = unknown), holder, stack */
	SYS_ROW_KLOCK,  /* addr: kernel lock, a: contention flags (LCB_F_*), holder = its symbol */
};

struct sys_row {
	enum sys_row_kind kind;
	uint32_t a, b;
	uint64_t addr;
	const char *holder; /* holder's thread name, or the kernel lock's symbol; NULL = none */
	const char *stack;  /* waiting stack as a folded line without count; NULL = none */
	struct latency lat;
};

struct sys_table;

struct sys_table *sys_table_new(void);
struct sys_table *sys_table_ref(struct sys_table *t);
void sys_table_unref(struct sys_table *t);

/* Adds lat to the row described by row (its lat is ignored; strings are copied).
 * Returns 0 or -ENOMEM. */
int sys_table_add(struct sys_table *t, const struct sys_row *row, const struct latency *lat);

/* Forgets every row. */
void sys_table_reset(struct sys_table *t);

/* A copy of the rows, owned by the caller; strings stay valid until sys_snapshot_free. */
struct sys_snapshot {
	struct sys_row *rows;
	size_t nrows;
	struct sys_table *owner;
};

int sys_table_snapshot(struct sys_table *t, struct sys_snapshot **out);
void sys_snapshot_free(struct sys_snapshot *s);

#endif
