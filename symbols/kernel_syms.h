/* Kernel addresses to names, kept current: /proc/kallsyms as read at the first name, the
 * code the kernel reports loading since (BPF programs, trampolines: ksym_events.h, with their
 * exact extent), and kallsyms read again at once when reports were lost, and when an address
 * may be in code loaded since that nothing reported (a module) at most every
 * KERNEL_SYMS_REREAD_MS (a read costs 60 ms of CPU here). Thread-safe. */
#ifndef APERTURE_SYMBOLS_KERNEL_SYMS_H
#define APERTURE_SYMBOLS_KERNEL_SYMS_H

#include <stddef.h>
#include <stdint.h>

#define KERNEL_SYMS_REREAD_MS 1000
/* An address no symbol covers (a module loaded since, or one of the kernel's own gaps) makes
 * kallsyms be read again at most this often. */
#define KERNEL_SYMS_REREAD_GAP_MS 10000

struct kernel_syms;

/* kallsyms is read, and the reports of loads opened, at the first name asked, in the process
 * that asks. Without kallsyms (unreadable, or addresses hidden) every name is -ENOENT.
 * 0 or -ENOMEM. */
int kernel_syms_new(struct kernel_syms **out);
void kernel_syms_free(struct kernel_syms *ks);

/* Forgets kallsyms and the reports until the next name asks for them again (60 ms of CPU):
 * for a daemon whose targets are all gone, which names nothing meanwhile. */
void kernel_syms_drop(struct kernel_syms *ks);

/* The function at addr into buf: 0, -ENOENT if none is known, -ENOSPC if len is too small. */
int kernel_syms_name(struct kernel_syms *ks, uint64_t addr, char *buf, size_t len);

#endif
