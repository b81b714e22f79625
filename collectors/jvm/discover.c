/* Recognising HotSpot JVMs and what their attach needs, from /proc. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collectors/cpu.h"
#include "collectors/jvm/jvm.h"
#include "collectors/jvm/jvm_internal.h"
#include "symbols/read_file.h"

bool jvm_is_hotspot(pid_t pid)
{
	return jvm_runtime_of(pid) == JVM_HOTSPOT;
}

/* OpenJ9 also maps a libjvm.so (a shim), beside its libj9vm. */
enum jvm_runtime jvm_runtime_of(pid_t pid)
{
	enum jvm_runtime rt = JVM_NONE;
	char path[64], *line = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return JVM_NONE;
	while (getline(&line, &cap, f) > 0) {
		if (strstr(line, "/libj9vm")) {
			rt = JVM_OTHER;
			break;
		}
		if (strstr(line, "/libjvm.so"))
			rt = JVM_HOTSPOT;
	}
	free(line);
	fclose(f);
	return rt;
}

/* A task's pid on the host and in its innermost namespace, from its NSpid line. */
static int task_ids(pid_t pid, const char *tid, pid_t *host, pid_t *inner)
{
	char path[320], *line = NULL, *last;
	size_t cap = 0;
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		*host = atoi(line + 6);
		last = strrchr(line, '\t');
		*inner = last ? atoi(last + 1) : 0;
		err = *host > 0 && *inner > 0 ? 0 : -EINVAL;
		break;
	}
	free(line);
	fclose(f);
	return err;
}

int jvm_host_tids(pid_t pid, struct cpu_java_stack *v, size_t n)
{
	pid_t nspid, host = 0, inner = 0;
	char path[64];
	struct dirent *d;
	DIR *dir;

	if (proc_nspid(pid, &nspid))
		return -ESRCH;
	if (nspid == pid)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	/* A thread gone since has no host tid: its stacks match nothing. */
	for (size_t i = 0; i < n; i++)
		v[i].tid = -v[i].tid;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' || task_ids(pid, d->d_name, &host, &inner))
			continue;
		for (size_t i = 0; i < n; i++)
			if (v[i].tid == -inner)
				v[i].tid = host;
	}
	closedir(dir);
	return 0;
}

/* Whether a NUL-separated list (cmdline, environ) turns the attach mechanism off. Later flags
 * win, as in HotSpot's parsing; the environment's option variables count too. */
static int scan_flags(const char *buf, size_t len, int verdict)
{
	for (const char *p = buf; p < buf + len; p += strnlen(p, buf + len - p) + 1) {
		const char *q = p, *end = p + strnlen(p, buf + len - p);

		while ((q = memmem(q, end - q, "DisableAttachMechanism", 22))) {
			if (q >= p + 5 && !strncmp(q - 5, "-XX:+", 5))
				verdict = 1;
			else if (q >= p + 5 && !strncmp(q - 5, "-XX:-", 5))
				verdict = 0;
			q++;
		}
	}
	return verdict;
}

bool jvm_attach_disabled(pid_t pid)
{
	char path[64];
	size_t len;
	char *buf;
	int verdict = 0;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if (!read_file(path, &buf, &len)) {
		/* JAVA_TOOL_OPTIONS and JDK_JAVA_OPTIONS come before the command line, which
		 * overrides them. */
		for (const char *p = buf; p < buf + len; p += strnlen(p, buf + len - p) + 1)
			if (!strncmp(p, "JAVA_TOOL_OPTIONS=", 18) ||
			    !strncmp(p, "JDK_JAVA_OPTIONS=", 17))
				verdict = scan_flags(p, strnlen(p, buf + len - p), verdict);
		free(buf);
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (!read_file(path, &buf, &len)) {
		verdict = scan_flags(buf, len, verdict);
		free(buf);
	}
	return verdict;
}
