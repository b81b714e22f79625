/* Types shared by exec_watch.bpf.c and daemon/exec_watch.c. */
#ifndef APERTURE_BPF_EXEC_WATCH_H
#define APERTURE_BPF_EXEC_WATCH_H

#define EXEC_WATCH_COMM_LEN 16
/* After a wake-up the daemon reads the ring again this long after, for events that did not
 * wake it. */
#define EXEC_WATCH_GAP_MS 20

/* A process that just exec'd, or was just forked (its first thread). */
struct exec_watch_event {
	__u32 pid;  /* tgid, in the daemon's (the initial) PID namespace */
	__u32 exec; /* 1: exec'd, 0: forked */
	char comm[EXEC_WATCH_COMM_LEN]; /* its comm now: the new program's after an exec */
};

#endif
