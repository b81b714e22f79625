#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "daemon/cgroup_id.h"
#include "daemon/proc_identity.h"

void cgroup_path_pick(const char *text, char *out, size_t size)
{
	const char *line = text, *v1 = NULL, *pick = NULL;

	snprintf(out, size, "/");
	for (; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] == '\n')) {
		const char *path = strchr(line, ':');

		if (!path || !(path = strchr(path + 1, ':')))
			continue;
		path++;
		if (!strncmp(line, "0::", 3))
			pick = path;
		else if (!v1 && strncmp(path, "/\n", 2) && *path && strcmp(path, "/"))
			v1 = path;
	}
	if (!pick || (!strncmp(pick, "/\n", 2) || !strcmp(pick, "/")))
		pick = v1 ? v1 : pick;
	if (pick)
		snprintf(out, size, "%.*s", (int)strcspn(pick, "\n"), pick);
}

int proc_cgroup_path(pid_t pid, char *out, size_t size)
{
	char text[4096];
	int err = proc_read_file(pid, "cgroup", text, sizeof(text));

	if (!err)
		cgroup_path_pick(text, out, size);
	return err;
}

static size_t hex_run(const char *s)
{
	size_t n = 0;

	while (isxdigit((unsigned char)s[n]) && !isupper((unsigned char)s[n]))
		n++;
	return n;
}

/* The last 64-hex-digit id of the path that starts a component or follows a '-'. */
static void container_of(const char *path, char *out)
{
	for (const char *p = path; *p; p++) {
		if (p != path && p[-1] != '/' && p[-1] != '-')
			continue;
		if (hex_run(p) == 64 && (p[64] == 0 || p[64] == '/' || p[64] == '.')) {
			memcpy(out, p, 64);
			out[64] = 0;
		}
	}
}

/* "pod<uid>" as a component or after a '-' (the systemd driver writes '_' for '-'). */
static void pod_of(const char *path, char *out)
{
	for (const char *p = strstr(path, "pod"); p; p = strstr(p + 1, "pod")) {
		size_t n = 0;

		if (p == path || (p[-1] != '/' && p[-1] != '-'))
			continue;
		p += 3;
		while (n < 36 && (isxdigit((unsigned char)p[n]) || p[n] == '-' || p[n] == '_'))
			n++;
		if (n != 36 || (p[n] && p[n] != '/' && p[n] != '.'))
			continue;
		for (size_t i = 0; i < n; i++)
			out[i] = p[i] == '_' ? '-' : p[i];
		out[n] = 0;
		return;
	}
}

void cgroup_id_parse(const char *path, struct cgroup_id *out)
{
	memset(out, 0, sizeof(*out));
	container_of(path, out->container_id);
	pod_of(path, out->pod_uid);
	if (!out->pod_uid[0] || !strstr(path, "kubepods"))
		return;
	if (strstr(path, "besteffort"))
		out->qos_class = "BestEffort";
	else if (strstr(path, "burstable"))
		out->qos_class = "Burstable";
	else
		out->qos_class = "Guaranteed";
}
