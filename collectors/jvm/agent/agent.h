/* What the agent's files share: reply buffers and the event collectors. */
#ifndef APERTURE_JVM_AGENT_H
#define APERTURE_JVM_AGENT_H

#include <jvmti.h>
#include <stdbool.h>
#include <stddef.h>

#define REPLY_MAX (16u << 20)

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

/* list.c: every live Java thread as "T" records (protocol.h) from JVMTI alone, without a
 * safepoint: no stack, lock or owner. -1 when the thread list can't be had. */
int threads_list(jvmtiEnv *jvmti, JNIEnv *env, struct buf *b);

#endif
