/* Every live Java thread's id, name, state and CPU time, from JVMTI alone. threads/busy asks
 * for this on every read: ThreadMXBean.dumpAllThreads would stop the JVM at a safepoint and
 * build every thread's whole stack, while these calls read each thread as it is. The daemon
 * ranks the threads and then asks for the stacks of the top few only. */
#include <stdio.h>
#include <string.h>
#include "collectors/jvm/agent/agent.h"

static const char *state_name(jint state)
{
	switch (state & JVMTI_JAVA_LANG_THREAD_STATE_MASK) {
	case JVMTI_JAVA_LANG_THREAD_STATE_NEW:
		return "NEW";
	case JVMTI_JAVA_LANG_THREAD_STATE_TERMINATED:
		return "TERMINATED";
	case JVMTI_JAVA_LANG_THREAD_STATE_RUNNABLE:
		return "RUNNABLE";
	case JVMTI_JAVA_LANG_THREAD_STATE_BLOCKED:
		return "BLOCKED";
	case JVMTI_JAVA_LANG_THREAD_STATE_WAITING:
		return "WAITING";
	case JVMTI_JAVA_LANG_THREAD_STATE_TIMED_WAITING:
		return "TIMED_WAITING";
	}
	return "UNKNOWN";
}

static bool failed(JNIEnv *env)
{
	if (!(*env)->ExceptionCheck(env))
		return false;
	(*env)->ExceptionClear(env);
	return true;
}

/* One thread's T record; its CPU time is -1 when the clock can't be read. */
static int thread_record(jvmtiEnv *jvmti, JNIEnv *env, jmethodID get_id, bool cpu_clock,
			 jthread thread, struct buf *b)
{
	jvmtiThreadInfo ti;
	jlong id, cpu = -1;
	jint state = 0;

	id = (*env)->CallLongMethod(env, thread, get_id);
	if (failed(env))
		return -1;
	if ((*jvmti)->GetThreadInfo(jvmti, thread, &ti) != JVMTI_ERROR_NONE)
		return -1;
	if ((*jvmti)->GetThreadState(jvmti, thread, &state) != JVMTI_ERROR_NONE)
		state = 0;
	if (!cpu_clock || (*jvmti)->GetThreadCpuTime(jvmti, thread, &cpu) != JVMTI_ERROR_NONE)
		cpu = -1;
	buf_printf(b, "T\t%lld", (long long)id);
	buf_field(b, ti.name ? ti.name : "");
	buf_field(b, state_name(state));
	buf_printf(b, "\t%d\t%d\t%lld\t-1\t\t\t\n", ti.is_daemon ? 1 : 0,
		   state & JVMTI_THREAD_STATE_IN_NATIVE ? 1 : 0, (long long)cpu);
	if (ti.name)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
	if (ti.thread_group)
		(*env)->DeleteLocalRef(env, ti.thread_group);
	if (ti.context_class_loader)
		(*env)->DeleteLocalRef(env, ti.context_class_loader);
	return 0;
}

int threads_list(jvmtiEnv *jvmti, JNIEnv *env, struct buf *b)
{
	jvmtiCapabilities clock = { .can_get_thread_cpu_time = 1 };
	jthread *threads = NULL;
	jmethodID get_id;
	jclass thread_class;
	bool cpu_clock;
	jint n = 0;
	int err = 0;

	/* The thread's CPU time tells threads of one name apart when the daemon matches them
	 * to the kernel's; the capability is kept for the session. */
	cpu_clock = (*jvmti)->AddCapabilities(jvmti, &clock) == JVMTI_ERROR_NONE;
	if ((*env)->PushLocalFrame(env, 32) < 0) {
		failed(env);
		return -1;
	}
	thread_class = (*env)->FindClass(env, "java/lang/Thread");
	get_id = thread_class && !failed(env) ?
		 (*env)->GetMethodID(env, thread_class, "getId", "()J") : NULL;
	if (!get_id || failed(env) ||
	    (*jvmti)->GetAllThreads(jvmti, &n, &threads) != JVMTI_ERROR_NONE) {
		err = -1;
		goto out;
	}
	for (jint i = 0; i < n; i++) {
		/* A thread that ends meanwhile is left out; the others still count. */
		thread_record(jvmti, env, get_id, cpu_clock, threads[i], b);
		(*env)->DeleteLocalRef(env, threads[i]);
	}
	(*jvmti)->Deallocate(jvmti, (unsigned char *)threads);
out:
	(*env)->PopLocalFrame(env, NULL);
	return err;
}
