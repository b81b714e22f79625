/* Allocation samples (SampledObjectAlloc) and monitor contention (MonitorContendedEnter and
 * Entered), counted by thread and Java stack in a fixed table the daemon drains once a second;
 * parked.c counts its sampled j.u.c lock waits in the same table.
 *
 * Callbacks run on the application's threads: they take one short lock, never allocate, and
 * when the table is full they count a drop instead of growing it. Method names are resolved
 * at drain time on the agent's own thread. A frame is marked JIT when its method had compiled
 * code at the time of the event (CompiledMethodLoad/Unload keep that set).
 *
 * An allocation sample costs its thread a stack walk, and a JVM allocating gigabytes a second
 * takes thousands at the configured interval: past ALLOC_RATE_MAX samples in a second the JVM
 * is told to sample half as often, each sample then counting for two (bytes and samples), and
 * back when the rate falls, so alloc.folded estimates the same totals at a bounded cost. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "collectors/jvm/agent/agent.h"
#include "collectors/jvm/protocol.h"

#define SLOTS 4096         /* stacks per drain interval; half full counts as full */
#define COMPILED_SLOTS 65536
#define ALLOC_RATE_MAX APERTURE_AGENT_ALLOC_RATE_MAX
#define ALLOC_SCALE_MAX 1024

enum kind { K_ALLOC = 1, K_MONITOR };

struct slot {
	uint64_t hash;
	uint8_t kind;
	uint8_t depth;
	char thread[32];
	uint64_t jit;              /* bit i: frames[i] was compiled */
	jmethodID frames[MAX_DEPTH]; /* leaf first */
	const char *leaf;          /* a last frame after them, or NULL (events_count_wait) */
	uint64_t value, count;     /* bytes or microseconds; samples or events */
};

struct compiled {
	jmethodID method;
	int loads;                 /* compiled versions alive (C1, C2, OSR) */
};

static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;     /* allocated once, kept: late callbacks may still come */
static size_t used;
static uint64_t dropped;
static struct compiled *compiled;
static bool alloc_on, monitors_on, jit_on;
static long cur_interval;     /* the configured one */
static unsigned alloc_scale = 1; /* the JVM samples every cur_interval * alloc_scale bytes */
static uint64_t alloc_events; /* allocation samples since the last drain */

static __thread char tls_name[32];
static __thread bool tls_named;
static __thread struct timespec tls_enter;

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 1099511628211ULL;
}

static struct compiled *compiled_find_locked(jmethodID m, bool add)
{
	size_t i = ((uintptr_t)m >> 3) % COMPILED_SLOTS;

	for (size_t n = 0; n < COMPILED_SLOTS; n++, i = (i + 1) % COMPILED_SLOTS) {
		if (compiled[i].method == m)
			return &compiled[i];
		if (!compiled[i].method) {
			if (!add)
				return NULL;
			compiled[i].method = m;
			return &compiled[i];
		}
	}
	return NULL;
}

static void JNICALL on_compiled_load(jvmtiEnv *jvmti, jmethodID m, jint size, const void *addr,
				     jint map_len, const jvmtiAddrLocationMap *map,
				     const void *info)
{
	struct compiled *c;

	pthread_mutex_lock(&events_lock);
	if ((c = compiled_find_locked(m, true)))
		c->loads++;
	pthread_mutex_unlock(&events_lock);
}

static void JNICALL on_compiled_unload(jvmtiEnv *jvmti, jmethodID m, const void *addr)
{
	struct compiled *c;

	pthread_mutex_lock(&events_lock);
	if ((c = compiled_find_locked(m, false)) && c->loads > 0)
		c->loads--;
	pthread_mutex_unlock(&events_lock);
}

bool events_compiled(jmethodID m)
{
	struct compiled *c;
	bool yes;

	pthread_mutex_lock(&events_lock);
	c = jit_on ? compiled_find_locked(m, false) : NULL;
	yes = c && c->loads > 0;
	pthread_mutex_unlock(&events_lock);
	return yes;
}

static void thread_name(jvmtiEnv *jvmti, jthread thread)
{
	jvmtiThreadInfo ti;

	if (tls_named)
		return;
	tls_named = true;
	strcpy(tls_name, "[unknown thread]");
	if ((*jvmti)->GetThreadInfo(jvmti, thread, &ti) != JVMTI_ERROR_NONE)
		return;
	if (ti.name) {
		snprintf(tls_name, sizeof(tls_name), "%s", ti.name);
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
	}
}

static bool same_frames(const struct slot *s, const jvmtiFrameInfo *frames)
{
	for (int f = 0; f < s->depth; f++)
		if (s->frames[f] != frames[f].method)
			return false;
	return true;
}

/* Adds value and n (events, or the samples one stands for) to a stack. */
static void count(enum kind kind, const char *thread, const jvmtiFrameInfo *frames,
		  jint depth, const char *leaf, uint64_t value, uint64_t n)
{
	uint64_t h = kind, jit = 0;
	size_t i;

	for (const char *p = thread; *p; p++)
		h = mix(h, (unsigned char)*p);
	h = mix(h, (uintptr_t)leaf);
	pthread_mutex_lock(&events_lock);
	if (!slots)
		goto out;
	if (kind == K_ALLOC)
		alloc_events++;
	for (jint f = 0; f < depth; f++) {
		struct compiled *c = jit_on ? compiled_find_locked(frames[f].method, false) : NULL;

		if (c && c->loads > 0)
			jit |= 1ULL << f;
		h = mix(h, (uintptr_t)frames[f].method);
	}
	h = mix(h, jit);
	for (i = h % SLOTS;; i = (i + 1) % SLOTS) {
		struct slot *s = &slots[i];

		if (!s->kind) {
			if (used >= SLOTS / 2) {
				dropped++;
				goto out;
			}
			used++;
			*s = (struct slot){ .hash = h, .kind = kind, .depth = depth, .jit = jit,
					    .leaf = leaf };
			snprintf(s->thread, sizeof(s->thread), "%s", thread);
			for (jint f = 0; f < depth; f++)
				s->frames[f] = frames[f].method;
			break;
		}
		if (s->hash == h && s->kind == kind && s->depth == depth && s->jit == jit &&
		    s->leaf == leaf && !strncmp(s->thread, thread, sizeof(s->thread) - 1) &&
		    same_frames(s, frames))
			break;
	}
	slots[i].value += value;
	slots[i].count += n;
out:
	pthread_mutex_unlock(&events_lock);
}

/* Counts an event of the current thread's stack. */
static void record(jvmtiEnv *jvmti, jthread thread, enum kind kind, uint64_t value, uint64_t n)
{
	jvmtiFrameInfo frames[MAX_DEPTH];
	jint depth = 0;

	thread_name(jvmti, thread);
	if ((*jvmti)->GetStackTrace(jvmti, NULL, 0, MAX_DEPTH, frames, &depth) != JVMTI_ERROR_NONE ||
	    depth <= 0)
		return;
	count(kind, tls_name, frames, depth, NULL, value, n);
}

void events_count_wait(const char *thread, const jvmtiFrameInfo *frames, jint depth,
		       const char *leaf, uint64_t us)
{
	count(K_MONITOR, thread, frames, depth, leaf, us, 1);
}

static void JNICALL on_alloc(jvmtiEnv *jvmti, JNIEnv *env, jthread thread, jobject object,
			     jclass klass, jlong size)
{
	unsigned scale = __atomic_load_n(&alloc_scale, __ATOMIC_RELAXED);

	record(jvmti, thread, K_ALLOC, (uint64_t)size * scale, scale);
}

static void JNICALL on_contended_enter(jvmtiEnv *jvmti, JNIEnv *env, jthread thread,
				       jobject object)
{
	clock_gettime(CLOCK_MONOTONIC, &tls_enter);
}

static void JNICALL on_contended_entered(jvmtiEnv *jvmti, JNIEnv *env, jthread thread,
					 jobject object)
{
	struct timespec now;
	int64_t us;

	if (!tls_enter.tv_sec)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (now.tv_sec - tls_enter.tv_sec) * 1000000 + (now.tv_nsec - tls_enter.tv_nsec) / 1000;
	tls_enter.tv_sec = 0;
	record(jvmti, thread, K_MONITOR, us > 0 ? us : 0, 1);
}

static bool take(jvmtiEnv *jvmti, jvmtiCapabilities *caps, jvmtiError *err)
{
	*err = (*jvmti)->AddCapabilities(jvmti, caps);
	return *err == JVMTI_ERROR_NONE;
}

static bool enable(jvmtiEnv *jvmti, jvmtiEvent ev)
{
	return (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, ev, NULL) ==
	       JVMTI_ERROR_NONE;
}

void events_start(jvmtiEnv *jvmti, long interval, struct buf *b)
{
	jvmtiEventCallbacks cb = {
		.SampledObjectAlloc = on_alloc,
		.MonitorContendedEnter = on_contended_enter,
		.MonitorContendedEntered = on_contended_entered,
		.CompiledMethodLoad = on_compiled_load,
		.CompiledMethodUnload = on_compiled_unload,
		.ClassPrepare = cpu_on_class_prepare,
		.ClassLoad = cpu_on_class_load,
	};
	jvmtiCapabilities alloc = { .can_generate_sampled_object_alloc_events = 1 };
	jvmtiCapabilities mon = { .can_generate_monitor_events = 1 };
	jvmtiCapabilities jit = { .can_generate_compiled_method_load_events = 1 };
	jvmtiError err;

	pthread_mutex_lock(&events_lock);
	if (!slots)
		slots = calloc(SLOTS, sizeof(*slots));
	if (!compiled)
		compiled = calloc(COMPILED_SLOTS, sizeof(*compiled));
	pthread_mutex_unlock(&events_lock);
	if (!slots || !compiled ||
	    (*jvmti)->SetEventCallbacks(jvmti, &cb, sizeof(cb)) != JVMTI_ERROR_NONE) {
		buf_printf(b, "alloc=error monitors=error jit=error\n");
		return;
	}
	jit_on = take(jvmti, &jit, &err) && enable(jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD) &&
		 enable(jvmti, JVMTI_EVENT_COMPILED_METHOD_UNLOAD);
	/* Replays the methods compiled before the attach. */
	if (jit_on)
		(*jvmti)->GenerateEvents(jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD);
	monitors_on = take(jvmti, &mon, &err) &&
		      enable(jvmti, JVMTI_EVENT_MONITOR_CONTENDED_ENTER) &&
		      enable(jvmti, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED);
	/* The last session's rate bound, for the same interval, most likely fits again: starting
	 * from it spares the first second thousands of samples. */
	if (interval != cur_interval)
		__atomic_store_n(&alloc_scale, 1, __ATOMIC_RELAXED);
	alloc_events = 0;
	/* A solo capability: one environment in the JVM may hold it. */
	alloc_on = take(jvmti, &alloc, &err) &&
		   (*jvmti)->SetHeapSamplingInterval(jvmti, interval * alloc_scale) ==
			   JVMTI_ERROR_NONE &&
		   enable(jvmti, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC);
	cur_interval = interval;
	buf_printf(b, "alloc=%s monitors=%s jit=%s\n",
		   alloc_on ? "on" : err == JVMTI_ERROR_NOT_AVAILABLE ? "solo-held" : "error",
		   monitors_on ? "on" : "error", jit_on ? "on" : "error");
}

void events_stop(jvmtiEnv *jvmti)
{
	jvmtiCapabilities caps = {
		.can_generate_sampled_object_alloc_events = alloc_on,
		.can_generate_monitor_events = monitors_on,
		.can_generate_compiled_method_load_events = jit_on,
	};

	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC,
					   NULL);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE,
					   JVMTI_EVENT_MONITOR_CONTENDED_ENTER, NULL);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE,
					   JVMTI_EVENT_MONITOR_CONTENDED_ENTERED, NULL);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE,
					   JVMTI_EVENT_COMPILED_METHOD_LOAD, NULL);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE,
					   JVMTI_EVENT_COMPILED_METHOD_UNLOAD, NULL);
	(*jvmti)->RelinquishCapabilities(jvmti, &caps);
	pthread_mutex_lock(&events_lock);
	alloc_on = monitors_on = jit_on = false;
	if (slots)
		memset(slots, 0, SLOTS * sizeof(*slots));
	if (compiled)
		memset(compiled, 0, COMPILED_SLOTS * sizeof(*compiled));
	used = 0;
	pthread_mutex_unlock(&events_lock);
}

/* "pkg.Class.method", from the class signature "Lpkg/Class;". */
void java_frame_name(jvmtiEnv *jvmti, JNIEnv *env, jmethodID m, bool jit, struct buf *b)
{
	char *name = NULL, *sig = NULL;
	jclass cls = NULL;

	if ((*jvmti)->GetMethodName(jvmti, m, &name, NULL, NULL) != JVMTI_ERROR_NONE)
		name = NULL;
	if ((*jvmti)->GetMethodDeclaringClass(jvmti, m, &cls) != JVMTI_ERROR_NONE ||
	    (*jvmti)->GetClassSignature(jvmti, cls, &sig, NULL) != JVMTI_ERROR_NONE)
		sig = NULL;
	buf_add(b, "\t", 1);
	if (sig && sig[0] == 'L') {
		for (char *p = sig + 1; *p && *p != ';'; p++) {
			char c = *p == '/' ? '.' : *p;

			/* hidden classes (lambdas) end in ".0x<address>": the address differs per
			 * run and says nothing, so it goes */
			if ((*p == '.' || *p == '/') && p[1] == '0' && p[2] == 'x')
				break;
			if (c != '\t' && c != '\n' && c != ';')
				buf_add(b, &c, 1);
		}
		buf_add(b, ".", 1);
	}
	buf_printf(b, "%s%s", name ? name : "[unknown]", jit ? "_[j]" : "");
	if (name)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)name);
	if (sig)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
	if (cls)
		(*env)->DeleteLocalRef(env, cls);
}

void events_drain(jvmtiEnv *jvmti, JNIEnv *env, long interval, struct buf *b)
{
	struct slot *copy = malloc(SLOTS * sizeof(*copy));
	size_t n = 0;
	uint64_t lost;
	unsigned scale;
	long long now;

	if (!copy) {
		b->overflow = true;
		return;
	}
	pthread_mutex_lock(&events_lock);
	for (size_t i = 0; slots && i < SLOTS; i++)
		if (slots[i].kind)
			copy[n++] = slots[i];
	if (slots)
		memset(slots, 0, SLOTS * sizeof(*slots));
	used = 0;
	lost = dropped;
	dropped = 0;
	/* Drains come once a second: alloc_events is the rate. */
	scale = alloc_scale;
	while (alloc_events * alloc_scale / scale > ALLOC_RATE_MAX && scale < ALLOC_SCALE_MAX &&
	       (long long)interval * scale * 2 <= INT32_MAX)
		scale *= 2;
	if (scale == alloc_scale && scale > 1 && alloc_events < ALLOC_RATE_MAX / 4)
		scale /= 2;
	while ((long long)interval * scale > INT32_MAX)
		scale /= 2;
	alloc_events = 0;
	if (alloc_on && (interval != cur_interval || scale != alloc_scale) &&
	    (*jvmti)->SetHeapSamplingInterval(jvmti, interval * scale) == JVMTI_ERROR_NONE) {
		cur_interval = interval;
		__atomic_store_n(&alloc_scale, scale, __ATOMIC_RELAXED);
	}
	now = alloc_on ? (long long)cur_interval * alloc_scale : 0;
	pthread_mutex_unlock(&events_lock);
	buf_printf(b, "D\t%llu\n", (unsigned long long)lost);
	if (now)
		buf_printf(b, "I\t%lld\n", now);
	for (size_t i = 0; i < n; i++) {
		const struct slot *s = &copy[i];

		buf_printf(b, "%c\t%llu\t%llu", s->kind == K_ALLOC ? 'A' : 'M',
			   (unsigned long long)s->value, (unsigned long long)s->count);
		buf_field(b, s->thread);
		for (int f = s->depth - 1; f >= 0; f--)
			java_frame_name(jvmti, env, s->frames[f], s->jit >> f & 1, b);
		if (s->leaf)
			buf_field(b, s->leaf);
		buf_add(b, "\n", 1);
	}
	free(copy);
}
