/* What the agent's files share: reply buffers and the event collectors. */
#ifndef APERTURE_JVM_AGENT_H
#define APERTURE_JVM_AGENT_H

#include <jvmti.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPLY_MAX (16u << 20)
#define MAX_DEPTH 64   /* frames kept of a stack, from the leaf */

/* A reply being built; past REPLY_MAX or out of memory it only sets overflow. */
struct buf {
	char *data;
	size_t len, cap;
	bool overflow;
};

void buf_add(struct buf *b, const char *s, size_t n);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A tab, then s with tabs and line breaks made spaces. */
void buf_field(struct buf *b, const char *s);

/* events.c: allocation samples and monitor contention, aggregated by stack in a bounded table.
 * start takes the capabilities it can and says which in b; stop gives them back. */
void events_start(jvmtiEnv *jvmti, long interval, struct buf *b);
void events_stop(jvmtiEnv *jvmti);
void events_drain(jvmtiEnv *jvmti, JNIEnv *env, long interval, struct buf *b);
/* Whether m has JIT-compiled code now (known while events are on). */
bool events_compiled(jmethodID m);
/* A tab, then m's name as "pkg.Class.method", with "_[j]" if jit. */
void java_frame_name(jvmtiEnv *jvmti, JNIEnv *env, jmethodID m, bool jit, struct buf *b);

/* cpu.c: Java stacks walked on the daemon's signal signo, for its CPU samples. start says
 * "cpu=on|busy|unavailable|error" in b (busy: the program handles signo itself); drain adds
 * the stacks walked since ("C" records) and the failures ("E"); stop turns it off. */
void cpu_start(JavaVM *vm, jvmtiEnv *jvmti, JNIEnv *env, int signo, struct buf *b);
void cpu_stop(jvmtiEnv *jvmti);
void cpu_drain(jvmtiEnv *jvmti, JNIEnv *env, struct buf *b);
void JNICALL cpu_on_class_prepare(jvmtiEnv *jvmti, JNIEnv *env, jthread thread, jclass cls);
void JNICALL cpu_on_class_load(jvmtiEnv *jvmti, JNIEnv *env, jthread thread, jclass cls);

/* Counts us of waiting for a lock to thread's stack (frames leaf first), as the monitor
 * events do, with leaf as a last frame: a string that stays as it is until events_stop. */
void events_count_wait(const char *thread, const jvmtiFrameInfo *frames, jint depth,
		       const char *leaf, uint64_t us);

/* parked.c: j.u.c lock waits, sampled by a thread of its own (see there) and counted with
 * the monitor events. start (after events_start) says "juc=on|error" in b; stop (before
 * events_stop) ends the thread. */
void parked_start(JavaVM *vm, jvmtiEnv *jvmti, struct buf *b);
void parked_stop(JNIEnv *env);

/* list.c: every live Java thread as "T" records (protocol.h) from JVMTI alone, without a
 * safepoint: no stack, lock or owner. -1 when the thread list can't be had. */
int threads_list(jvmtiEnv *jvmti, JNIEnv *env, struct buf *b);

#endif
