/* Where a process runs, from its cgroup path: the container and the Kubernetes pod, as the
 * container runtimes and the kubelet name their cgroups:
 *   /kubepods/burstable/pod<uid>/<64 hex>                        (cgroupfs driver)
 *   /kubepods.slice/kubepods-besteffort.slice/
 *     kubepods-besteffort-pod<uid with _>.slice/cri-containerd-<64 hex>.scope (systemd)
 *   /libpod_parent/libpod-<64 hex>, /system.slice/docker-<64 hex>.scope, crio-<64 hex>
 * A pod directly under kubepods is Guaranteed (the kubelet gives the other classes their own
 * level). */
#ifndef APERTURE_DAEMON_CGROUP_ID_H
#define APERTURE_DAEMON_CGROUP_ID_H

#include <stddef.h>
#include <sys/types.h>

struct cgroup_id {
	char container_id[65]; /* "" when the path names none */
	char pod_uid[37];      /* "" outside a Kubernetes pod */
	const char *qos_class; /* "Guaranteed", "Burstable", "BestEffort", or NULL */
};

/* pid's cgroup path: the unified hierarchy's, else (a hybrid machine whose unified path is
 * "/") the first other hierarchy's that is not "/". -ENOENT if pid is gone. */
int proc_cgroup_path(pid_t pid, char *out, size_t size);
/* The pure half: the same from a /proc/<pid>/cgroup text. */
void cgroup_path_pick(const char *text, char *out, size_t size);

void cgroup_id_parse(const char *path, struct cgroup_id *out);

#endif
