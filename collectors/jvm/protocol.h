/* The channel between the daemon and its JVMTI agent, version APERTURE_AGENT_PROTOCOL.
 *
 * The daemon listens on a unix socket inside the target's filesystem view and loads the agent
 * with the options "v=<protocol>,sock=<path as the JVM sees it>". The agent connects and sends
 * one line: "aperture-agent <protocol> <ready|no-management> <java.vm.version>". Then the
 * daemon sends one request line at a time and reads "<status> <length>\n" and length bytes:
 * status 0 and records, or status 1 and an error text.
 *
 * Requests: "threads" (every live thread), "stacks <id> <id>..." (at most 16 threads by Java
 * thread id, without the locks each holds, which cost HotSpot a heap walk), "deadlocks" (the
 * threads in deadlock cycles, as ThreadMXBean.findDeadlockedThreads finds them: monitors and
 * ownable synchronizers) and "list" (every live thread's T record from JVMTI alone, without a
 * safepoint: no frames, lock or owner). Their records are lines of tab-separated fields:
 *   T id name state daemon in_native cpu_ns lock_owner_id lock_owner_name lock_hash lock_class
 *   F class method file line is_native          one per stack frame, top first
 *   M depth hash class                          a monitor the thread holds, locked at frame depth
 *   S hash class                                an ownable synchronizer the thread holds
 * Hashes are identity hash codes in hex; cpu_ns is -1 when unknown; lock_owner_id is -1 when
 * none.
 *
 * "events <interval>" turns on allocation sampling (one sample per interval bytes, on
 * average), monitor contention, JIT tracking and the j.u.c lock-wait sampler, and answers two
 * lines saying which it got: "alloc=on|solo-held|error monitors=on|error jit=on|error" and
 * "juc=on|error" (solo-held: another agent holds the solo capability
 * can_generate_sampled_object_alloc_events). "drain <interval>" answers what was counted
 * since the last drain and resets it (applying a changed interval):
 *   D lost                                  events dropped: the agent's table was full
 *   I bytes                                 bytes between allocation samples now
 *   A bytes samples thread frame...         allocation samples by stack, root first
 *   M microseconds events thread frame...   monitor contention by stack, root first
 * Frames are "package.Class.method", with "_[j]" when the method had JIT-compiled code. An M
 * record whose last frame is "<class>_[approx]" is a sampled j.u.c lock wait: every
 * APERTURE_AGENT_JUC_INTERVAL_MS (or longer, to keep the sampler within 1 % of a CPU) each
 * thread parked on a Lock's synchronizer of that class is counted the time since the previous
 * look; events then counts looks. While the JVM allocates faster than
 * APERTURE_AGENT_ALLOC_RATE_MAX samples a second at the configured interval, the agent has it
 * sample every interval * 2^k bytes and scales each A record's bytes and samples by 2^k, so
 * they still estimate what the configured interval would have counted.
 *
 * "cpu <signo>" (after "events") installs a handler for signo that walks the receiving
 * thread's Java stack with AsyncGetCallTrace (the daemon's BPF program sends it to each
 * thread it samples) and answers "cpu=on|busy|unavailable|error" (busy: the program handles
 * signo itself; unavailable: no AsyncGetCallTrace). Then each drain also answers
 *   C tid ns frame...                       a walked stack, root first: the thread id in the
 *                                           JVM's pid namespace, CLOCK_MONOTONIC ns
 *   E failed dropped last_error             walks failed and stacks dropped so far, and
 *                                           AsyncGetCallTrace's last reason (e.g. -3 GC) */
#ifndef APERTURE_COLLECTORS_JVM_PROTOCOL_H
#define APERTURE_COLLECTORS_JVM_PROTOCOL_H

#define APERTURE_AGENT_PROTOCOL 3
#define APERTURE_AGENT_HELLO "aperture-agent"
/* How often the agent looks for threads parked on a j.u.c lock. */
#define APERTURE_AGENT_JUC_INTERVAL_MS 100
/* Allocation samples a second beyond which the agent samples less often. */
#define APERTURE_AGENT_ALLOC_RATE_MAX 1000

/* Agent_OnAttach's return codes, shown by the attach listener as "return code: N". */
enum {
	APERTURE_AGENT_EOPTIONS = 101, /* options malformed */
	APERTURE_AGENT_EVERSION = 102, /* another protocol version */
	APERTURE_AGENT_EBUSY = 103,    /* a session of another daemon is live */
	APERTURE_AGENT_ETHREAD = 104,  /* could not start its thread */
};

#endif
