/* Blocking events of one target: worker threads that stayed off CPU longer than the
 * threshold. A bounded ring of the most recent ones and a count of all, refcounted like a
 * profile so the events outlive an enable and a render outlives the target. One writer (the
 * off-CPU collector), any number of readers. */
#ifndef APERTURE_STORE_BLOCKING_H
#define APERTURE_STORE_BLOCKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BLOCKING_RING 256

struct blocking_event {
	int64_t time_ns;     /* when the thread went off CPU, unix time in ns */
	uint64_t dur_us;     /* how long it stayed off */
	pid_t tid;
	char thread[16];     /* its name */
	bool preempted;      /* still runnable when switched out, else it slept */
	uint32_t state;      /* the task state it was switched out in */
	char *stack;         /* frames root first, ';' between them; owned by the log */
};

struct blocking_log;

struct blocking_log *blocking_log_new(void);
struct blocking_log *blocking_log_ref(struct blocking_log *l);
void blocking_log_unref(struct blocking_log *l);

/* Copies ev (and its stack) into the ring, evicting the oldest. 0 or -ENOMEM. */
int blocking_log_add(struct blocking_log *l, const struct blocking_event *ev);
void blocking_log_reset(struct blocking_log *l);

struct blocking_snapshot {
	struct blocking_event *events; /* oldest first */
	size_t n;
	uint64_t total;                /* events since made or reset, kept or not */
};

int blocking_log_snapshot(struct blocking_log *l, struct blocking_snapshot **out);
void blocking_snapshot_free(struct blocking_snapshot *s);

#endif
