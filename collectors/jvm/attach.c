/* HotSpot's dynamic attach, from C, and the files an attach leaves in the target.
 *
 * Everything the JVM must reach (the agent .so, the channel's socket) goes in its /tmp as its
 * own filesystem view has it: /proc/<pid>/root/tmp. That directory is opened once without
 * following a symlink, and files are made relative to it, so a container can't redirect them
 * into the host's tree. The attach conversation itself runs in a forked helper that takes the
 * target's uid and gid (the JVM checks its peer's credentials) and that the daemon kills when
 * it runs over its time: a JVM that never answers can't hold up the daemon. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "collectors/jvm/jvm_internal.h"

/* "<what> <object>: <error>" into why; returns err. */
static int fail(char *why, size_t len, int err, const char *what, const char *object)
{
	snprintf(why, len, "%s%s: %s", what, object, strerror(-err));
	return err;
}

static int open_tmp(pid_t pid, char *why, size_t whylen)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root/tmp", (int)pid);
	fd = open(path, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(why, whylen, -errno, "opening ", path);
	return fd;
}

int jvm_agent_install(pid_t pid, const char *agent_path, const char *name, char *why,
		      size_t whylen)
{
	char tmpname[128], buf[65536];
	struct stat src, st;
	int dir, in = -1, out = -1, err = 0;
	ssize_t n;

	dir = open_tmp(pid, why, whylen);
	if (dir < 0)
		return dir;
	in = open(agent_path, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &src)) {
		err = fail(why, whylen, -errno, "reading the agent ", agent_path);
		goto out;
	}
	/* Ours (the daemon's uid) and whole: reuse it, the JVM may have it loaded already. */
	if (!fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && st.st_size == src.st_size)
		goto out;
	snprintf(tmpname, sizeof(tmpname), ".%s.%d", name, (int)getpid());
	unlinkat(dir, tmpname, 0);
	out = openat(dir, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		err = fail(why, whylen, -errno, "creating the agent in the JVM's /tmp", "");
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n) {
			n = -1;
			break;
		}
	/* Root's file, readable by everyone: the JVM's user only reads it, never replaces it. */
	if (n < 0 || fchmod(out, 0444) || fsync(out)) {
		err = fail(why, whylen, -errno, "writing the agent into the JVM's /tmp", "");
		unlinkat(dir, tmpname, 0);
		goto out;
	}
	if (renameat(dir, tmpname, dir, name)) {
		err = fail(why, whylen, -errno, "placing the agent in the JVM's /tmp", "");
		unlinkat(dir, tmpname, 0);
	}
out:
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	close(dir);
	return err;
}

int jvm_channel_listen(pid_t pid, uid_t uid, gid_t gid, char *inside, size_t insidelen,
		       char *host, size_t hostlen, int *out, char *why, size_t whylen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char name[64];
	int dir, fd, err = 0;

	dir = open_tmp(pid, why, whylen);
	if (dir < 0)
		return dir;
	snprintf(name, sizeof(name), ".aperture-%d-%d.sock", (int)getpid(), (int)pid);
	snprintf(inside, insidelen, "/tmp/%s", name);
	snprintf(host, hostlen, "/proc/%d/root/tmp/%s", (int)pid, name);
	/* Through the opened directory, not the path: its /tmp stays the one checked above. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dir, name);
	unlinkat(dir, name, 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW) ||
	    fchmodat(dir, name, 0600, 0) || listen(fd, 1)) {
		err = fail(why, whylen, -errno, "listening for the agent in the JVM's /tmp",
			   "");
		if (fd >= 0)
			close(fd);
		unlinkat(dir, name, 0);
	} else {
		*out = fd;
	}
	close(dir);
	return err;
}

int jvm_channel_accept(int lfd, pid_t pid, int timeout_ms, int *out, char *why, size_t whylen)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, n;

	n = poll(&p, 1, timeout_ms);
	if (n <= 0) {
		snprintf(why, whylen, "the agent did not connect within %d ms", timeout_ms);
		return n < 0 ? -errno : -ETIMEDOUT;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return fail(why, whylen, -errno, "accepting the agent", "");
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid != pid) {
		close(fd);
		snprintf(why, whylen, "a process other than the JVM connected to the channel");
		return -EPERM;
	}
	*out = fd;
	return 0;
}

/* What the helper tells the daemon: "<errno> <stage>" on failure, or "0 \n" and the attach
 * listener's reply. */
struct helper_args {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char trigger[64], sock[64], request[4096];
	size_t request_len;
	int listener_ms;
};

static void helper_fail(int out, int err, const char *stage)
{
	char msg[128];
	int n = snprintf(msg, sizeof(msg), "%d %s", err, stage);

	if (write(out, msg, n) < 0)
		_exit(2);
	_exit(1);
}

/* Runs in the forked child: one thread, so raw system calls only, no malloc. */
static void helper(const struct helper_args *h, int out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timespec tick = { 0, 20 * 1000 * 1000 };
	struct stat st;
	char reply[4096];
	ssize_t n;
	size_t len = 0;
	int fd;

	/* The raw calls change this process only (glibc's wrappers would signal threads the
	 * fork didn't copy). */
	if (syscall(SYS_setgroups, 0, NULL) || syscall(SYS_setresgid, h->gid, h->gid, h->gid) ||
	    syscall(SYS_setresuid, h->uid, h->uid, h->uid))
		helper_fail(out, errno, "taking the JVM's user");
	/* SIGQUIT to a JVM whose attach listener already runs prints a thread dump into its
	 * output: only signal when the socket isn't there yet. */
	if (stat(h->sock, &st)) {
		fd = open(h->trigger, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			helper_fail(out, errno, "creating the attach trigger file");
		close(fd);
		if (kill(h->pid, SIGQUIT))
			helper_fail(out, errno, "signalling the JVM");
		for (int waited = 0; stat(h->sock, &st); waited += 20) {
			if (kill(h->pid, 0) && errno == ESRCH) {
				unlink(h->trigger);
				helper_fail(out, ESRCH, "waiting for the attach listener");
			}
			if (waited >= h->listener_ms) {
				unlink(h->trigger);
				helper_fail(out, ETIMEDOUT, "waiting for the attach listener");
			}
			nanosleep(&tick, NULL);
		}
		unlink(h->trigger);
	}
	memcpy(sa.sun_path, h->sock, sizeof(h->sock));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		helper_fail(out, errno, "connecting to the attach listener");
	if (write(fd, h->request, h->request_len) != (ssize_t)h->request_len)
		helper_fail(out, errno, "sending the load request");
	while (len < sizeof(reply) && (n = read(fd, reply + len, sizeof(reply) - len)) > 0)
		len += n;
	if (write(out, "0 \n", 3) != 3 || write(out, reply, len) != (ssize_t)len)
		_exit(2);
	_exit(0);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads the helper's answer until it closes the pipe or the deadline passes. */
static int read_answer(int fd, char *buf, size_t size, int timeout_ms, size_t *len)
{
	int64_t deadline = now_ms() + timeout_ms;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	*len = 0;
	for (;;) {
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, left) == 0)
			return -ETIMEDOUT;
		n = read(fd, buf + *len, size - 1 - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (*len += n) == size - 1)
			break;
	}
	buf[*len] = 0;
	return 0;
}

/* The reply of `load`: JDK 17 says "0\nreturn code: N"; 21 and later always start with 0
 * and put any error in the text. So the text decides. */
static int parse_load_reply(const char *reply, char *why, size_t whylen)
{
	const char *rc = strstr(reply, "return code: ");
	int code;

	if (!rc) {
		const char *text = strchr(reply, '\n');

		snprintf(why, whylen, "unsupported JVM: it did not load the agent: %.150s",
			 text ? text + 1 : reply);
		for (char *p = why; *p; p++)
			if (*p == '\n')
				*p = ' ';
		return -EPROTO;
	}
	code = atoi(rc + strlen("return code: "));
	if (code == 0)
		return 0;
	snprintf(why, whylen, "the agent refused to start: code %d%s", code,
		 code == 103 ? " (another daemon's session is live in this JVM)" : "");
	return code == 103 ? -EBUSY : -EPROTO;
}

int jvm_attach_load(pid_t pid, pid_t nspid, uid_t uid, gid_t gid, const char *agent_inside,
		    const char *options, int timeout_ms, char *why, size_t whylen)
{
	struct helper_args h = { .pid = pid, .uid = uid, .gid = gid,
				 .listener_ms = timeout_ms / 2 };
	char answer[4200];
	size_t len;
	int p[2], status, err, code;
	pid_t child;

	snprintf(h.trigger, sizeof(h.trigger), "/proc/%d/root/tmp/.attach_pid%d", (int)pid,
		 (int)nspid);
	snprintf(h.sock, sizeof(h.sock), "/proc/%d/root/tmp/.java_pid%d", (int)pid, (int)nspid);
	/* Protocol 1: "1", the command and always three arguments, each ending in a NUL. */
	len = snprintf(h.request, sizeof(h.request), "1%cload%c%s%ctrue%c%s%c", 0, 0,
		       agent_inside, 0, 0, options, 0);
	if (len >= sizeof(h.request)) {
		snprintf(why, whylen, "the agent's path is too long");
		return -ENAMETOOLONG;
	}
	h.request_len = len;
	if (pipe2(p, O_CLOEXEC))
		return fail(why, whylen, -errno, "pipe", "");
	child = fork();
	if (child < 0) {
		err = -errno;
		close(p[0]);
		close(p[1]);
		return fail(why, whylen, err, "fork", "");
	}
	if (child == 0) {
		close(p[0]);
		helper(&h, p[1]);
	}
	close(p[1]);
	err = read_answer(p[0], answer, sizeof(answer), timeout_ms, &len);
	close(p[0]);
	if (err)
		kill(child, SIGKILL);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (err) {
		snprintf(why, whylen, "the JVM did not answer the attach within %d ms", timeout_ms);
		return err;
	}
	code = atoi(answer);
	if (len == 0 || (code == 0 && strncmp(answer, "0 \n", 3))) {
		snprintf(why, whylen, "the attach helper failed");
		return -EIO;
	}
	if (code) {
		const char *stage = strchr(answer, ' ');

		snprintf(why, whylen, "%s: %s", stage ? stage + 1 : "attach", strerror(code));
		return -code;
	}
	return parse_load_reply(answer + 3, why, whylen);
}
