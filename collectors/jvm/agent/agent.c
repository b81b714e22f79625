/* Aperture's JVMTI agent, loaded into a running HotSpot JVM by the daemon's attach client.
 *
 * Agent_OnAttach runs on the JVM's single attach-listener thread (which also serves jcmd), so
 * it only starts a session thread and returns. The session thread attaches itself to the VM as
 * a daemon thread, connects to the unix socket the daemon listens on (its path is in the load
 * options, inside the JVM's own filesystem view), says hello, then answers one request at a
 * time until the daemon hangs up. Then it gives back every capability (DisposeEnvironment) and
 * detaches: loading the agent again starts a new session in the same loaded library.
 *
 * Never harm the JVM: every JNI call is checked and its exception cleared, local references
 * live in bounded frames, replies are capped, and on any error the request fails and the
 * session carries on or ends: the JVM is never stopped or left with pending exceptions. */
#include <errno.h>
#include <jni.h>
#include <jvmti.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "collectors/jvm/agent/agent.h"
#include "collectors/jvm/protocol.h"

static JavaVM *agent_vm;
static pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;
static bool session_live;

void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->overflow)
		return;
	if (b->len + n > REPLY_MAX) {
		b->overflow = true;
		return;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *bigger;

		while (cap < b->len + n)
			cap *= 2;
		bigger = realloc(b->data, cap);
		if (!bigger) {
			b->overflow = true;
			return;
		}
		b->data = bigger;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		buf_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A field of a record: tabs and line breaks would split records, so they become spaces. */
void buf_field(struct buf *b, const char *s)
{
	buf_add(b, "\t", 1);
	for (; s && *s; s++) {
		char c = (*s == '\t' || *s == '\n' || *s == '\r') ? ' ' : *s;

		buf_add(b, &c, 1);
	}
}

/* The classes and methods a session calls, resolved once per session. */
struct jni_ids {
	jobject tmx; /* global ref: the platform ThreadMXBean */
	jmethodID dump_all, find_deadlocked, get_infos, cpu_time;
	jmethodID ti_id, ti_name, ti_daemon, ti_state, ti_lock, ti_owner_id, ti_owner_name,
		ti_stack, ti_monitors, ti_syncs, ti_native;
	jmethodID enum_name;
	jmethodID li_class, li_hash, mi_depth;
	jmethodID ste_class, ste_method, ste_file, ste_line, ste_native;
};

static bool failed(JNIEnv *env)
{
	if (!(*env)->ExceptionCheck(env))
		return false;
	(*env)->ExceptionClear(env);
	return true;
}

static jmethodID method(JNIEnv *env, const char *cls, const char *name, const char *sig)
{
	jclass c = (*env)->FindClass(env, cls);
	jmethodID m;

	if (!c || failed(env))
		return NULL;
	m = (*env)->GetMethodID(env, c, name, sig);
	if (failed(env))
		m = NULL;
	(*env)->DeleteLocalRef(env, c);
	return m;
}

#define TI "java/lang/management/ThreadInfo"
#define LI "java/lang/management/LockInfo"
#define STE "java/lang/StackTraceElement"

static int ids_init(JNIEnv *env, struct jni_ids *ids)
{
	jclass mf;
	jmethodID get;
	jobject tmx;

	memset(ids, 0, sizeof(*ids));
	mf = (*env)->FindClass(env, "java/lang/management/ManagementFactory");
	if (!mf || failed(env))
		return -1;
	get = (*env)->GetStaticMethodID(env, mf, "getThreadMXBean",
					"()Ljava/lang/management/ThreadMXBean;");
	if (!get || failed(env))
		return -1;
	tmx = (*env)->CallStaticObjectMethod(env, mf, get);
	if (!tmx || failed(env))
		return -1;
	ids->tmx = (*env)->NewGlobalRef(env, tmx);
	(*env)->DeleteLocalRef(env, tmx);
	(*env)->DeleteLocalRef(env, mf);
	if (!ids->tmx)
		return -1;
#define M(field, cls, name, sig) \
	if (!(ids->field = method(env, cls, name, sig))) return -1
	M(dump_all, "java/lang/management/ThreadMXBean", "dumpAllThreads",
	  "(ZZ)[L" TI ";");
	M(find_deadlocked, "java/lang/management/ThreadMXBean", "findDeadlockedThreads", "()[J");
	M(get_infos, "java/lang/management/ThreadMXBean", "getThreadInfo", "([JZZ)[L" TI ";");
	M(cpu_time, "java/lang/management/ThreadMXBean", "getThreadCpuTime", "(J)J");
	M(ti_id, TI, "getThreadId", "()J");
	M(ti_name, TI, "getThreadName", "()Ljava/lang/String;");
	M(ti_daemon, TI, "isDaemon", "()Z");
	M(ti_state, TI, "getThreadState", "()Ljava/lang/Thread$State;");
	M(ti_lock, TI, "getLockInfo", "()L" LI ";");
	M(ti_owner_id, TI, "getLockOwnerId", "()J");
	M(ti_owner_name, TI, "getLockOwnerName", "()Ljava/lang/String;");
	M(ti_stack, TI, "getStackTrace", "()[L" STE ";");
	M(ti_monitors, TI, "getLockedMonitors", "()[Ljava/lang/management/MonitorInfo;");
	M(ti_syncs, TI, "getLockedSynchronizers", "()[L" LI ";");
	M(ti_native, TI, "isInNative", "()Z");
	M(enum_name, "java/lang/Enum", "name", "()Ljava/lang/String;");
	M(li_class, LI, "getClassName", "()Ljava/lang/String;");
	M(li_hash, LI, "getIdentityHashCode", "()I");
	M(mi_depth, "java/lang/management/MonitorInfo", "getLockedStackDepth", "()I");
	M(ste_class, STE, "getClassName", "()Ljava/lang/String;");
	M(ste_method, STE, "getMethodName", "()Ljava/lang/String;");
	M(ste_file, STE, "getFileName", "()Ljava/lang/String;");
	M(ste_line, STE, "getLineNumber", "()I");
	M(ste_native, STE, "isNativeMethod", "()Z");
#undef M
	return 0;
}

/* A String-returning call's result as a field ("" when null). -1 on an exception. */
static int string_field(JNIEnv *env, struct buf *b, jobject obj, jmethodID m)
{
	jstring s = (*env)->CallObjectMethod(env, obj, m);
	const char *chars;

	if (failed(env))
		return -1;
	if (!s) {
		buf_field(b, "");
		return 0;
	}
	chars = (*env)->GetStringUTFChars(env, s, NULL);
	if (!chars || failed(env)) {
		(*env)->DeleteLocalRef(env, s);
		return -1;
	}
	buf_field(b, chars);
	(*env)->ReleaseStringUTFChars(env, s, chars);
	(*env)->DeleteLocalRef(env, s);
	return 0;
}

/* "<hash>\t<class>" of a LockInfo, or two empty fields for null. */
static int lock_fields(JNIEnv *env, const struct jni_ids *ids, struct buf *b, jobject li)
{
	jint hash;

	if (!li) {
		buf_field(b, "");
		buf_field(b, "");
		return 0;
	}
	hash = (*env)->CallIntMethod(env, li, ids->li_hash);
	if (failed(env))
		return -1;
	buf_printf(b, "\t%x", (unsigned)hash);
	return string_field(env, b, li, ids->li_class);
}

/* One thread's records (see protocol.h). Runs in its own local frame. */
static int thread_records(JNIEnv *env, const struct jni_ids *ids, struct buf *b, jobject ti)
{
	jlong id, owner, cpu;
	jboolean daemon, native;
	jobject state, lock;
	jobjectArray stack, monitors, syncs;
	jsize n;

	id = (*env)->CallLongMethod(env, ti, ids->ti_id);
	if (failed(env))
		return -1;
	cpu = (*env)->CallLongMethod(env, ids->tmx, ids->cpu_time, id);
	if (failed(env))
		cpu = -1;
	daemon = (*env)->CallBooleanMethod(env, ti, ids->ti_daemon);
	native = (*env)->CallBooleanMethod(env, ti, ids->ti_native);
	owner = (*env)->CallLongMethod(env, ti, ids->ti_owner_id);
	state = (*env)->CallObjectMethod(env, ti, ids->ti_state);
	if (failed(env) || !state)
		return -1;
	buf_printf(b, "T\t%lld", (long long)id);
	if (string_field(env, b, ti, ids->ti_name) || string_field(env, b, state, ids->enum_name))
		return -1;
	buf_printf(b, "\t%d\t%d\t%lld\t%lld", daemon ? 1 : 0, native ? 1 : 0, (long long)cpu,
		   (long long)owner);
	if (string_field(env, b, ti, ids->ti_owner_name))
		return -1;
	lock = (*env)->CallObjectMethod(env, ti, ids->ti_lock);
	if (failed(env) || lock_fields(env, ids, b, lock))
		return -1;
	buf_add(b, "\n", 1);

	stack = (*env)->CallObjectMethod(env, ti, ids->ti_stack);
	if (failed(env) || !stack)
		return -1;
	n = (*env)->GetArrayLength(env, stack);
	for (jsize i = 0; i < n; i++) {
		jobject f = (*env)->GetObjectArrayElement(env, stack, i);
		jint line;
		jboolean nat;

		if (failed(env) || !f)
			return -1;
		line = (*env)->CallIntMethod(env, f, ids->ste_line);
		nat = (*env)->CallBooleanMethod(env, f, ids->ste_native);
		if (failed(env))
			return -1;
		buf_add(b, "F", 1);
		if (string_field(env, b, f, ids->ste_class) ||
		    string_field(env, b, f, ids->ste_method) ||
		    string_field(env, b, f, ids->ste_file))
			return -1;
		buf_printf(b, "\t%d\t%d\n", (int)line, nat ? 1 : 0);
		(*env)->DeleteLocalRef(env, f);
	}

	monitors = (*env)->CallObjectMethod(env, ti, ids->ti_monitors);
	if (failed(env))
		return -1;
	n = monitors ? (*env)->GetArrayLength(env, monitors) : 0;
	for (jsize i = 0; i < n; i++) {
		jobject m = (*env)->GetObjectArrayElement(env, monitors, i);
		jint depth;

		if (failed(env) || !m)
			return -1;
		depth = (*env)->CallIntMethod(env, m, ids->mi_depth);
		if (failed(env))
			return -1;
		buf_printf(b, "M\t%d", (int)depth);
		if (lock_fields(env, ids, b, m))
			return -1;
		buf_add(b, "\n", 1);
		(*env)->DeleteLocalRef(env, m);
	}

	syncs = (*env)->CallObjectMethod(env, ti, ids->ti_syncs);
	if (failed(env))
		return -1;
	n = syncs ? (*env)->GetArrayLength(env, syncs) : 0;
	for (jsize i = 0; i < n; i++) {
		jobject s = (*env)->GetObjectArrayElement(env, syncs, i);

		if (failed(env) || !s)
			return -1;
		buf_add(b, "S", 1);
		if (lock_fields(env, ids, b, s))
			return -1;
		buf_add(b, "\n", 1);
		(*env)->DeleteLocalRef(env, s);
	}
	return 0;
}

enum threads_kind { ALL_THREADS, SOME_STACKS, DEADLOCKED };

#define SOME_MAX 16

/* The ids in "stacks <id> <id>...", as a Java long[]; NULL if malformed. */
static jlongArray parse_ids(JNIEnv *env, const char *text)
{
	jlong v[SOME_MAX];
	jsize n = 0;
	jlongArray a;

	for (;;) {
		long long id;
		int used;

		while (*text == ' ')
			text++;
		if (!*text)
			break;
		if (n == SOME_MAX || sscanf(text, "%lld%n", &id, &used) != 1 || id <= 0)
			return NULL;
		v[n++] = id;
		text += used;
	}
	a = n ? (*env)->NewLongArray(env, n) : NULL;
	if (!a || failed(env))
		return NULL;
	(*env)->SetLongArrayRegion(env, a, 0, n, v);
	return failed(env) ? NULL : a;
}

/* Records of every live thread with the locks each holds, of a few threads' stacks (which
 * stops the JVM only as long as it takes to walk those), or of the threads in deadlock
 * cycles. */
static int threads_request(JNIEnv *env, const struct jni_ids *ids, enum threads_kind kind,
			   const char *some, struct buf *b)
{
	jobjectArray infos;
	jsize n;
	int err = 0;

	if ((*env)->PushLocalFrame(env, 64) < 0) {
		failed(env);
		return -1;
	}
	if (kind == SOME_STACKS) {
		jlongArray tids = parse_ids(env, some);

		if (!tids) {
			err = -1;
			goto out;
		}
		infos = (*env)->CallObjectMethod(env, ids->tmx, ids->get_infos, tids, JNI_FALSE,
						 JNI_FALSE);
	} else if (kind == DEADLOCKED) {
		jlongArray tids = (*env)->CallObjectMethod(env, ids->tmx, ids->find_deadlocked);

		if (failed(env)) {
			err = -1;
			goto out;
		}
		if (!tids)
			goto out;
		infos = (*env)->CallObjectMethod(env, ids->tmx, ids->get_infos, tids, JNI_TRUE,
						 JNI_TRUE);
	} else {
		/* The held synchronizers cost a walk of the heap at a safepoint. */
		infos = (*env)->CallObjectMethod(env, ids->tmx, ids->dump_all, JNI_TRUE, JNI_TRUE);
	}
	if (failed(env) || !infos) {
		err = -1;
		goto out;
	}
	n = (*env)->GetArrayLength(env, infos);
	for (jsize i = 0; !err && i < n; i++) {
		jobject ti;

		if ((*env)->PushLocalFrame(env, 64) < 0) {
			failed(env);
			err = -1;
			break;
		}
		ti = (*env)->GetObjectArrayElement(env, infos, i);
		if (failed(env))
			err = -1;
		else if (ti)  /* null: the thread ended between the two calls */
			err = thread_records(env, ids, b, ti);
		(*env)->PopLocalFrame(env, NULL);
	}
out:
	(*env)->PopLocalFrame(env, NULL);
	return err;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A reply: "<status> <length>\n" then length bytes (the records, or an error text). */
static int reply(int fd, int status, const char *data, size_t len)
{
	char head[64];
	int n = snprintf(head, sizeof(head), "%d %zu\n", status, len);

	return write_all(fd, head, n) || write_all(fd, data, len) ? -1 : 0;
}

static int reply_text(int fd, int status, const char *text)
{
	return reply(fd, status, text, strlen(text));
}

/* One request line, without its newline; -1 at end of stream or on a line too long. */
static int read_line(int fd, char *line, size_t size)
{
	size_t len = 0;

	for (;;) {
		ssize_t r = read(fd, line + len, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (line[len] == '\n') {
			line[len] = 0;
			return 0;
		}
		if (++len == size)
			return -1;
	}
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

static void serve(JNIEnv *env, jvmtiEnv *jvmti, int fd)
{
	struct jni_ids ids;
	char line[256], *vm_version = NULL;
	bool ready = ids_init(env, &ids) == 0, events = false, cpu = false;
	long interval;
	int signo;

	if (jvmti)
		(*jvmti)->GetSystemProperty(jvmti, "java.vm.version", &vm_version);
	snprintf(line, sizeof(line), "%s %d %s %s\n", APERTURE_AGENT_HELLO, APERTURE_AGENT_PROTOCOL,
		 ready ? "ready" : "no-management", vm_version ? vm_version : "unknown");
	if (vm_version)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)vm_version);
	if (write_all(fd, line, strlen(line)))
		goto out;
	while (read_line(fd, line, sizeof(line)) == 0) {
		struct buf b = {0};
		int err;

		if (!ready) {
			err = reply_text(fd, 1, "java.management is not available in this JVM");
		} else if (!strcmp(line, "threads") || !strncmp(line, "stacks ", 7) ||
			   !strcmp(line, "deadlocks")) {
			err = threads_request(env, &ids, line[0] == 't' ? ALL_THREADS :
					      line[0] == 's' ? SOME_STACKS : DEADLOCKED, line + 6,
					      &b);
			if (b.overflow)
				err = reply_text(fd, 1, "reply too large");
			else if (err)
				err = reply_text(fd, 1, "a JNI call failed");
			else
				err = reply(fd, 0, b.data ? b.data : "", b.len);
		} else if (!strcmp(line, "list") && jvmti) {
			err = threads_list(jvmti, env, &b);
			err = b.overflow ? reply_text(fd, 1, "reply too large") :
			      err ? reply_text(fd, 1, "the JVM's thread list is not available") :
				    reply(fd, 0, b.data ? b.data : "", b.len);
		} else if (sscanf(line, "events %ld", &interval) == 1 && jvmti && interval > 0) {
			events_start(jvmti, interval, &b);
			parked_start(agent_vm, jvmti, &b);
			events = true;
			err = reply(fd, 0, b.data, b.len);
		} else if (sscanf(line, "cpu %d", &signo) == 1 && events && signo > 0 &&
			   signo < SIGRTMIN) {
			cpu_start(agent_vm, jvmti, env, signo, &b);
			cpu = true;
			err = reply(fd, 0, b.data, b.len);
		} else if (sscanf(line, "drain %ld", &interval) == 1 && events && interval > 0 &&
			   (*env)->PushLocalFrame(env, 16) == 0) {
			events_drain(jvmti, env, interval, &b);
			if (cpu)
				cpu_drain(jvmti, env, &b);
			(*env)->PopLocalFrame(env, NULL);
			err = b.overflow ? reply_text(fd, 1, "reply too large") :
					   reply(fd, 0, b.data ? b.data : "", b.len);
		} else {
			failed(env);
			err = reply_text(fd, 1, "unknown request");
		}
		free(b.data);
		if (err)
			break;
	}
out:
	if (cpu)
		cpu_stop(jvmti);
	if (events) {
		parked_stop(env);
		events_stop(jvmti);
	}
	if (ids.tmx)
		(*env)->DeleteGlobalRef(env, ids.tmx);
}

static void *session_main(void *arg)
{
	char *path = arg;
	JavaVMAttachArgs aa = { .version = JNI_VERSION_1_8, .name = "Aperture Agent" };
	jvmtiEnv *jvmti = NULL;
	JNIEnv *env;
	int fd;

	/* Its own name in /proc, not the attach listener's it would inherit. */
	pthread_setname_np(pthread_self(), "aperture-agent");
	if ((*agent_vm)->AttachCurrentThreadAsDaemon(agent_vm, (void **)&env, &aa) != JNI_OK)
		goto out;
	if ((*agent_vm)->GetEnv(agent_vm, (void **)&jvmti, JVMTI_VERSION_11) != JNI_OK)
		jvmti = NULL;
	fd = connect_to(path);
	if (fd >= 0) {
		serve(env, jvmti, fd);
		close(fd);
	}
	/* Gives back whatever capabilities this session took. */
	if (jvmti)
		(*jvmti)->DisposeEnvironment(jvmti);
	(*agent_vm)->DetachCurrentThread(agent_vm);
out:
	free(path);
	pthread_mutex_lock(&agent_lock);
	session_live = false;
	pthread_mutex_unlock(&agent_lock);
	return NULL;
}

/* options: "v=<protocol>,sock=<path>". Returns an APERTURE_AGENT_E* code. */
JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	const char *sock;
	pthread_attr_t attr;
	pthread_t thread;
	char *path;
	int v, err;

	if (!options || sscanf(options, "v=%d,", &v) != 1 || !(sock = strstr(options, ",sock=")))
		return APERTURE_AGENT_EOPTIONS;
	if (v != APERTURE_AGENT_PROTOCOL)
		return APERTURE_AGENT_EVERSION;
	path = strdup(sock + strlen(",sock="));
	if (!path)
		return APERTURE_AGENT_ETHREAD;
	pthread_mutex_lock(&agent_lock);
	if (session_live) {
		pthread_mutex_unlock(&agent_lock);
		free(path);
		return APERTURE_AGENT_EBUSY;
	}
	agent_vm = vm;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&thread, &attr, session_main, path);
	pthread_attr_destroy(&attr);
	session_live = err == 0;
	pthread_mutex_unlock(&agent_lock);
	if (err) {
		free(path);
		return APERTURE_AGENT_ETHREAD;
	}
	return 0;
}
