/* Kernel code loaded and unloaded while we run: BPF programs, their trampolines and
 * dispatchers, out-of-line ftrace and kprobe code. The kernel reports each as a
 * PERF_RECORD_KSYMBOL (start, length, the name kallsyms gives it) to perf events with
 * attr.ksymbol set, on the CPU where it happened, so a dummy event per CPU with a small ring
 * sees them all, as perf does. That names a program loaded a moment ago exactly, where
 * /proc/kallsyms would have to be read again (60 ms of CPU here). Modules are not
 * reported. */
#ifndef APERTURE_SYMBOLS_KSYM_EVENTS_H
#define APERTURE_SYMBOLS_KSYM_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

struct ksym_events;

struct ksym_record {
	uint64_t addr;
	uint32_t len;
	bool unregister;
	const char *name; /* valid during the callback */
};

/* 0, or -errno when no CPU's event could be opened (no perf events for us, or a kernel
 * before 5.1). */
int ksym_events_open(struct ksym_events **out);
void ksym_events_free(struct ksym_events *e);

/* Calls each() for every record that came since the last call, and empties the rings.
 * Returns true if some were lost (a ring was full): then what each() saw is not all. */
bool ksym_events_read(struct ksym_events *e,
		      void (*each)(void *ctx, const struct ksym_record *r), void *ctx);

#endif
