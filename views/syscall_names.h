/* The kernel's system call table for the architecture built for, generated at build time. */
#ifndef APERTURE_VIEWS_SYSCALL_NAMES_H
#define APERTURE_VIEWS_SYSCALL_NAMES_H

/* Indexed by number; NULL for a number without a call. */
extern const char *const syscall_names[];
extern const unsigned syscall_names_count;

#endif
