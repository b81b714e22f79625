/* j.u.c lock waits, sampled. JVMTI has no event for LockSupport.park (the monitor events
 * only cover synchronized), and rebinding Unsafe.park would miss every caller C2 compiled it
 * into (it is an intrinsic), so a thread of the agent looks at every Java thread 10 times a
 * second: one that is parked (JVMTI_THREAD_STATE_PARKED) with a Lock's synchronizer as its
 * blocker (LockSupport.getBlocker) is waiting to acquire that lock, and the time since the
 * previous look is added to its Java stack, under a leaf frame naming the synchronizer's
 * class with "_[approx]". A Condition's waiters park on a ConditionObject and latches and
 * semaphores on a Sync that belongs to no Lock: neither counts, as neither is contention.
 *
 * Cost is bounded: a look takes no safepoint (thread states and the blocker field are read
 * as they are; a stack is taken by a handshake with that parked thread only), and the next
 * look waits at least 100 times the CPU time the last round took, waking up included (up to
 * a second), so the sampler stays within 1 % of one CPU however many threads there are
 * (measured at 20 looks a second: 0.25 % with 15 threads and none parked, 0.7 % with 2 of 20
 * parked, 1.0 % with 100 of 1000; at 10, 0.11 % with 15 threads). Weighting each look by the
 * time since the previous one keeps the estimate unbiased when looks are late or spaced out;
 * the cost is CPU time, not wall time, as a look preempted on a loaded machine costs the JVM
 * nothing more. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "collectors/jvm/agent/agent.h"
#include "collectors/jvm/protocol.h"

#define INTERVAL_US (APERTURE_AGENT_JUC_INTERVAL_MS * 1000)
#define COST_FACTOR 100       /* a look waits >= COST_FACTOR times its own cost */
#define MAX_WAIT_US 1000000
#define MAX_GAP_US (2 * MAX_WAIT_US) /* a look after a longer stall (the JVM stopped) */
#define CLASSES 64
#define APPROX "_[approx]"    /* the leaf frame's mark: sampled, not timed */

struct lock_class {
	jclass cls;               /* global ref */
	bool lock;                /* a Lock's synchronizer */
	char name[144];           /* "java.util.concurrent.locks.ReentrantLock$NonfairSync_[approx]" */
};

/* The JNI handles a look needs, resolved by the sampler thread. */
struct refs {
	jclass lock_support, aqs, aqls, lock, rw_lock, stamped, class_class;
	jmethodID get_blocker, enclosing;
};

static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t parked_wake;
/* Learnt by the sampler; their names stay until parked_stop, as the counts keep them. */
static struct lock_class classes[CLASSES];
static size_t nclasses;
static bool running, stopping;
static pthread_t sampler;
static JavaVM *parked_vm;
static jvmtiEnv *parked_jvmti;

static uint64_t clock_us(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

static bool failed(JNIEnv *env)
{
	if (!(*env)->ExceptionCheck(env))
		return false;
	(*env)->ExceptionClear(env);
	return true;
}

static jclass global_class(JNIEnv *env, const char *name)
{
	jclass local = (*env)->FindClass(env, name), global;

	if (!local || failed(env))
		return NULL;
	global = (*env)->NewGlobalRef(env, local);
	(*env)->DeleteLocalRef(env, local);
	return global;
}

static void refs_free(JNIEnv *env, struct refs *r)
{
	jclass *all[] = { &r->lock_support, &r->aqs, &r->aqls, &r->lock, &r->rw_lock,
			  &r->stamped, &r->class_class };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (*all[i])
			(*env)->DeleteGlobalRef(env, *all[i]);
	memset(r, 0, sizeof(*r));
}

static int refs_init(JNIEnv *env, struct refs *r)
{
	memset(r, 0, sizeof(*r));
	r->lock_support = global_class(env, "java/util/concurrent/locks/LockSupport");
	r->aqs = global_class(env, "java/util/concurrent/locks/AbstractQueuedSynchronizer");
	r->aqls = global_class(env, "java/util/concurrent/locks/AbstractQueuedLongSynchronizer");
	r->lock = global_class(env, "java/util/concurrent/locks/Lock");
	r->rw_lock = global_class(env, "java/util/concurrent/locks/ReadWriteLock");
	r->stamped = global_class(env, "java/util/concurrent/locks/StampedLock");
	r->class_class = global_class(env, "java/lang/Class");
	if (!r->lock_support || !r->aqs || !r->aqls || !r->lock || !r->rw_lock || !r->stamped ||
	    !r->class_class)
		goto fail;
	r->get_blocker = (*env)->GetStaticMethodID(env, r->lock_support, "getBlocker",
						   "(Ljava/lang/Thread;)Ljava/lang/Object;");
	if (!r->get_blocker || failed(env))
		goto fail;
	r->enclosing = (*env)->GetMethodID(env, r->class_class, "getEnclosingClass",
					   "()Ljava/lang/Class;");
	if (!r->enclosing || failed(env))
		goto fail;
	return 0;
fail:
	failed(env);
	refs_free(env, r);
	return -1;
}

/* Whether a blocker of class cls is a Lock's synchronizer: an AQS (or its long twin) that
 * a Lock or ReadWriteLock declares (ReentrantLock$NonfairSync, ReentrantReadWriteLock$
 * FairSync, ...), or a StampedLock, which parks on itself. */
static bool is_lock(JNIEnv *env, const struct refs *r, jclass cls)
{
	jclass outer;
	bool lock;

	if ((*env)->IsAssignableFrom(env, cls, r->stamped))
		return true;
	if (!(*env)->IsAssignableFrom(env, cls, r->aqs) &&
	    !(*env)->IsAssignableFrom(env, cls, r->aqls))
		return false;
	outer = (*env)->CallObjectMethod(env, cls, r->enclosing);
	if (failed(env) || !outer)
		return false;
	lock = (*env)->IsAssignableFrom(env, outer, r->lock) ||
	       (*env)->IsAssignableFrom(env, outer, r->rw_lock);
	(*env)->DeleteLocalRef(env, outer);
	return lock;
}

/* The classes entry of blocker's class, learning it the first time; -1 when it is no
 * Lock's or the table is full. */
static int classify(JNIEnv *env, const struct refs *r, jobject blocker)
{
	jclass cls = (*env)->GetObjectClass(env, blocker);
	struct lock_class c = {0};
	char *sig = NULL;
	int at = -1;

	if (!cls)
		return -1;
	for (size_t i = 0; i < nclasses; i++)
		if ((*env)->IsSameObject(env, cls, classes[i].cls)) {
			at = classes[i].lock ? (int)i : -1;
			goto out;
		}
	if (nclasses == CLASSES)
		goto out;
	c.lock = is_lock(env, r, cls);
	if ((*parked_jvmti)->GetClassSignature(parked_jvmti, cls, &sig, NULL) !=
	    JVMTI_ERROR_NONE)
		sig = NULL;
	/* "Lpkg/Outer$Inner;" -> "pkg.Outer$Inner_[approx]" */
	snprintf(c.name, sizeof(c.name) - sizeof(APPROX), "%s",
		 sig && sig[0] == 'L' ? sig + 1 : "[unknown lock class];");
	c.name[strcspn(c.name, ";")] = 0;
	for (char *p = c.name; *p; p++)
		if (*p == '/' || *p == '\t' || *p == '\n')
			*p = *p == '/' ? '.' : ' ';
	strcat(c.name, APPROX);
	if (sig)
		(*parked_jvmti)->Deallocate(parked_jvmti, (unsigned char *)sig);
	c.cls = (*env)->NewGlobalRef(env, cls);
	if (!c.cls)
		goto out;
	pthread_mutex_lock(&parked_lock);
	classes[nclasses] = c;
	at = c.lock ? (int)nclasses : -1;
	nclasses++;
	pthread_mutex_unlock(&parked_lock);
out:
	(*env)->DeleteLocalRef(env, cls);
	return at;
}

static void thread_name(JNIEnv *env, jthread thread, char *name, size_t size)
{
	jvmtiThreadInfo ti;

	snprintf(name, size, "[unknown thread]");
	if ((*parked_jvmti)->GetThreadInfo(parked_jvmti, thread, &ti) != JVMTI_ERROR_NONE)
		return;
	if (ti.name) {
		snprintf(name, size, "%s", ti.name);
		(*parked_jvmti)->Deallocate(parked_jvmti, (unsigned char *)ti.name);
	}
	/* Local refs: a look over many threads must not pile them up. */
	if (ti.thread_group)
		(*env)->DeleteLocalRef(env, ti.thread_group);
	if (ti.context_class_loader)
		(*env)->DeleteLocalRef(env, ti.context_class_loader);
}

/* Counts us of waiting for lock class cls to thread's Java stack. */
static void add(JNIEnv *env, jthread thread, int cls, uint64_t us)
{
	jvmtiFrameInfo frames[MAX_DEPTH];
	char name[32];
	jint depth = 0;

	if ((*parked_jvmti)->GetStackTrace(parked_jvmti, thread, 0, MAX_DEPTH, frames, &depth) !=
	    JVMTI_ERROR_NONE || depth <= 0)
		return;
	thread_name(env, thread, name, sizeof(name));
	events_count_wait(name, frames, depth, classes[cls].name, us);
}

/* One look at every Java thread; us: the time since the previous look. */
static void look(JNIEnv *env, const struct refs *r, uint64_t us)
{
	jthread *threads = NULL;
	jint n = 0;

	if ((*env)->PushLocalFrame(env, 32) < 0) {
		failed(env);
		return;
	}
	if ((*parked_jvmti)->GetAllThreads(parked_jvmti, &n, &threads) != JVMTI_ERROR_NONE)
		n = 0;
	for (jint i = 0; i < n; i++) {
		jint state = 0;
		jobject blocker;
		int cls;

		if ((*parked_jvmti)->GetThreadState(parked_jvmti, threads[i], &state) ==
		    JVMTI_ERROR_NONE && (state & JVMTI_THREAD_STATE_PARKED)) {
			blocker = (*env)->CallStaticObjectMethod(env, r->lock_support,
								 r->get_blocker, threads[i]);
			if (!failed(env) && blocker) {
				cls = classify(env, r, blocker);
				if (cls >= 0)
					add(env, threads[i], cls, us);
				(*env)->DeleteLocalRef(env, blocker);
			}
		}
		(*env)->DeleteLocalRef(env, threads[i]);
	}
	if (threads)
		(*parked_jvmti)->Deallocate(parked_jvmti, (unsigned char *)threads);
	(*env)->PopLocalFrame(env, NULL);
}

static void *sampler_main(void *arg)
{
	JavaVMAttachArgs aa = { .version = JNI_VERSION_1_8, .name = "Aperture j.u.c sampler" };
	uint64_t last, last_cpu, wait_us = INTERVAL_US;
	struct refs r;
	JNIEnv *env;

	/* Its own name in /proc (else it inherits the attach listener's), so threads/busy and
	 * top show what the sampler costs. */
	pthread_setname_np(pthread_self(), "aperture-juc");
	if ((*parked_vm)->AttachCurrentThreadAsDaemon(parked_vm, (void **)&env, &aa) != JNI_OK)
		return NULL;
	if (refs_init(env, &r))
		goto out;
	last = clock_us(CLOCK_MONOTONIC);
	last_cpu = clock_us(CLOCK_THREAD_CPUTIME_ID);
	pthread_mutex_lock(&parked_lock);
	while (!stopping) {
		uint64_t until = clock_us(CLOCK_MONOTONIC) + wait_us, now, cpu, gap;
		struct timespec ts = { .tv_sec = until / 1000000, .tv_nsec = until % 1000000 * 1000 };

		if (pthread_cond_timedwait(&parked_wake, &parked_lock, &ts) != ETIMEDOUT)
			continue;
		pthread_mutex_unlock(&parked_lock);
		now = clock_us(CLOCK_MONOTONIC);
		gap = now - last;
		last = now;
		look(env, &r, gap < MAX_GAP_US ? gap : MAX_GAP_US);
		/* The whole round's cost, waking up included. */
		cpu = clock_us(CLOCK_THREAD_CPUTIME_ID);
		wait_us = (cpu - last_cpu) * COST_FACTOR;
		last_cpu = cpu;
		wait_us = wait_us < INTERVAL_US ? INTERVAL_US :
			  wait_us > MAX_WAIT_US ? MAX_WAIT_US : wait_us;
		pthread_mutex_lock(&parked_lock);
	}
	pthread_mutex_unlock(&parked_lock);
	refs_free(env, &r);
out:
	(*parked_vm)->DetachCurrentThread(parked_vm);
	return NULL;
}

void parked_start(JavaVM *vm, jvmtiEnv *jvmti, struct buf *b)
{
	pthread_condattr_t ca;
	bool ok = false;

	pthread_mutex_lock(&parked_lock);
	if (running)
		goto out;
	parked_vm = vm;
	parked_jvmti = jvmti;
	stopping = false;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&parked_wake, &ca);
	pthread_condattr_destroy(&ca);
	running = pthread_create(&sampler, NULL, sampler_main, NULL) == 0;
	if (!running)
		pthread_cond_destroy(&parked_wake);
out:
	ok = running;
	pthread_mutex_unlock(&parked_lock);
	buf_printf(b, "juc=%s\n", ok ? "on" : "error");
}

void parked_stop(JNIEnv *env)
{
	pthread_mutex_lock(&parked_lock);
	if (!running) {
		pthread_mutex_unlock(&parked_lock);
		return;
	}
	stopping = true;
	pthread_cond_signal(&parked_wake);
	pthread_mutex_unlock(&parked_lock);
	pthread_join(sampler, NULL);
	pthread_mutex_lock(&parked_lock);
	running = false;
	pthread_cond_destroy(&parked_wake);
	for (size_t i = 0; i < nclasses; i++)
		(*env)->DeleteGlobalRef(env, classes[i].cls);
	nclasses = 0;
	pthread_mutex_unlock(&parked_lock);
}
