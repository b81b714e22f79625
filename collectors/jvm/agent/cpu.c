/* Java stacks for the daemon's CPU samples.
 *
 * The daemon's BPF program sends a signal to each thread of this JVM it samples. The handler
 * walks the thread's Java stack with AsyncGetCallTrace, HotSpot's walker for signal handlers
 * (what async-profiler and honest-profiler use), and stores it with the thread id and the
 * CLOCK_MONOTONIC time in a fixed ring; the daemon matches it to its sample by thread and
 * time. The ring is a bounded multi-producer queue (per-slot sequence numbers): the handler
 * never locks or allocates, and when the ring is full it counts a drop.
 *
 * AsyncGetCallTrace only names methods that have a jmethodID, which HotSpot makes lazily: the
 * methods of every loaded class get theirs when sampling starts, and those of each class
 * prepared later in ClassPrepare. The handler stays installed once installed (a signal sent
 * just before a stop may still come) and does nothing while sampling is off. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "collectors/jvm/agent/agent.h"

#define RING 2048
#define DEPTH 128
#define NAMES 16384

typedef struct {
	jint lineno; /* the bci; negative for native methods */
	jmethodID method_id;
} asgct_frame;

typedef struct {
	JNIEnv *env_id;
	jint num_frames; /* > 0, or a negative reason the walk failed */
	asgct_frame *frames;
} asgct_trace;

typedef void (*asgct_fn)(asgct_trace *trace, jint depth, void *ucontext);

struct sample {
	_Atomic uint64_t seq;
	pid_t tid;
	uint64_t ns;
	jint n;
	asgct_frame frames[DEPTH];
};

struct name {
	jmethodID method;
	char *text; /* "pkg.Class.method" */
};

static JavaVM *cpu_vm;
static asgct_fn asgct;
static struct sample *ring;
static _Atomic uint64_t ring_head; /* next slot a handler takes */
static uint64_t ring_tail;         /* next slot the drain reads */
static _Atomic uint64_t ring_dropped, walk_failed;
static _Atomic int walk_last_error; /* AsyncGetCallTrace's reason, e.g. -3 GC active */
static _Atomic bool active;
static int installed_signo;
static struct name *names;

static void on_signal(int signo, siginfo_t *si, void *ucontext)
{
	int saved_errno = errno;
	asgct_trace trace;
	struct sample *s;
	struct timespec ts;
	uint64_t pos;
	JNIEnv *env;

	/* Only the kernel's signals: BPF sends them as SI_KERNEL, kill(2) as SI_USER. */
	if (!atomic_load(&active) || si->si_code != SI_KERNEL ||
	    (*cpu_vm)->GetEnv(cpu_vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK)
		goto out;
	pos = atomic_load(&ring_head);
	do {
		s = &ring[pos % RING];
		if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos) {
			atomic_fetch_add(&ring_dropped, 1);
			goto out;
		}
	} while (!atomic_compare_exchange_weak(&ring_head, &pos, pos + 1));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	trace = (asgct_trace){ .env_id = env, .frames = s->frames };
	asgct(&trace, DEPTH, ucontext);
	s->tid = syscall(SYS_gettid);
	s->ns = (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	s->n = trace.num_frames;
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
out:
	errno = saved_errno;
	(void)signo;
}

/* Gives the methods of cls their jmethodIDs (made by GetClassMethods). */
static void method_ids(jvmtiEnv *jvmti, jclass cls)
{
	jmethodID *methods;
	jint n;

	if ((*jvmti)->GetClassMethods(jvmti, cls, &n, &methods) == JVMTI_ERROR_NONE)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)methods);
}

/* AsyncGetCallTrace walks nothing unless ClassLoad events are on: it needs no callback. */
void JNICALL cpu_on_class_load(jvmtiEnv *jvmti, JNIEnv *env, jthread thread, jclass cls)
{
}

void JNICALL cpu_on_class_prepare(jvmtiEnv *jvmti, JNIEnv *env, jthread thread, jclass cls)
{
	if (atomic_load(&active))
		method_ids(jvmti, cls);
}

static void all_method_ids(jvmtiEnv *jvmti, JNIEnv *env)
{
	jclass *classes;
	jint n;

	if ((*jvmti)->GetLoadedClasses(jvmti, &n, &classes) != JVMTI_ERROR_NONE)
		return;
	for (jint i = 0; i < n; i++) {
		method_ids(jvmti, classes[i]);
		(*env)->DeleteLocalRef(env, classes[i]);
	}
	(*jvmti)->Deallocate(jvmti, (unsigned char *)classes);
}

/* The installed handler, or why it could not be: the program handles signo itself. */
static const char *install(int signo)
{
	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO | SA_RESTART };
	struct sigaction old;

	if (installed_signo == signo)
		return NULL;
	if (installed_signo || sigaction(signo, NULL, &old))
		return "error";
	if ((old.sa_flags & SA_SIGINFO) || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
		return "busy";
	sigemptyset(&sa.sa_mask);
	if (sigaction(signo, &sa, NULL))
		return "error";
	installed_signo = signo;
	return NULL;
}

void cpu_start(JavaVM *vm, jvmtiEnv *jvmti, JNIEnv *env, int signo, struct buf *b)
{
	const char *why = NULL;

	if (!asgct)
		asgct = (asgct_fn)dlsym(RTLD_DEFAULT, "AsyncGetCallTrace");
	if (!asgct) {
		why = "unavailable";
		goto out;
	}
	if (!ring) {
		ring = calloc(RING, sizeof(*ring));
		names = calloc(NAMES, sizeof(*names));
		if (!ring || !names) {
			why = "error";
			goto out;
		}
		for (uint64_t i = 0; i < RING; i++)
			atomic_store(&ring[i].seq, i);
	}
	cpu_vm = vm;
	if ((*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_CLASS_PREPARE,
					       NULL) != JVMTI_ERROR_NONE ||
	    (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_CLASS_LOAD,
					       NULL) != JVMTI_ERROR_NONE) {
		why = "error";
		goto out;
	}
	atomic_store(&active, true);
	all_method_ids(jvmti, env);
	why = install(signo);
	if (why)
		atomic_store(&active, false);
out:
	buf_printf(b, "cpu=%s\n", why ? why : "on");
}

void cpu_stop(jvmtiEnv *jvmti)
{
	atomic_store(&active, false);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_CLASS_PREPARE, NULL);
	(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_CLASS_LOAD, NULL);
	for (size_t i = 0; names && i < NAMES; i++) {
		free(names[i].text);
		names[i] = (struct name){ 0 };
	}
}

/* m's name, resolved once: NULL when the table is full or JVMTI can't say. */
static const char *method_name(jvmtiEnv *jvmti, JNIEnv *env, jmethodID m)
{
	size_t i = ((uintptr_t)m >> 3) % NAMES;
	struct buf b = { 0 };

	for (size_t k = 0; k < NAMES; k++, i = (i + 1) % NAMES) {
		if (names[i].method == m)
			return names[i].text + 1; /* past the field's tab */
		if (!names[i].method)
			break;
	}
	if (names[i].method)
		return NULL;
	java_frame_name(jvmti, env, m, false, &b);
	buf_add(&b, "", 1);
	if (b.overflow || b.len < 2) {
		free(b.data);
		return NULL;
	}
	names[i].method = m;
	names[i].text = b.data;
	return b.data + 1;
}

static void add_frame(jvmtiEnv *jvmti, JNIEnv *env, jmethodID m, struct buf *b)
{
	const char *name = m ? method_name(jvmti, env, m) : NULL;

	buf_field(b, name ? name : "[unknown_Java]");
	if (name && events_compiled(m))
		buf_add(b, "_[j]", 4);
}

/* "C tid ns frame..." per walked stack, root first; then "E failed dropped last_error". */
void cpu_drain(jvmtiEnv *jvmti, JNIEnv *env, struct buf *b)
{
	uint64_t head = atomic_load(&ring_head);

	if (!ring)
		return;
	for (; ring_tail < head; ring_tail++) {
		struct sample *s = &ring[ring_tail % RING];

		if (atomic_load_explicit(&s->seq, memory_order_acquire) != ring_tail + 1)
			break; /* still being written */
		if (s->n > 0) {
			buf_printf(b, "C\t%d\t%llu", (int)s->tid, (unsigned long long)s->ns);
			if (s->n == DEPTH)
				buf_field(b, "[truncated]");
			for (jint f = s->n - 1; f >= 0; f--)
				add_frame(jvmti, env, s->frames[f].method_id, b);
			buf_add(b, "\n", 1);
		} else {
			atomic_fetch_add(&walk_failed, 1);
			atomic_store(&walk_last_error, s->n);
		}
		atomic_store_explicit(&s->seq, ring_tail + RING, memory_order_release);
	}
	buf_printf(b, "E\t%llu\t%llu\t%d\n", (unsigned long long)atomic_load(&walk_failed),
		   (unsigned long long)atomic_load(&ring_dropped), atomic_load(&walk_last_error));
}
