// SPDX-License-Identifier: GPL-2.0
/* aperture record: perf record + perf report in one step, with no daemon and no mount.
 *
 * The command is forked and held on a pipe before exec, so it is a target of the cpu
 * collector from its first instruction; the collector follows its forks (and every thread
 * shares its process's entry). The mappings of a process are read when the kernel reports
 * that it forked or exec'd, and again soon after, once its libraries are mapped, by the
 * collector's own thread: a short-lived child is gone by the time a drain would look, and
 * its frames could not be named. When the command's process exits, the last samples are
 * drained and the profile is written with the same renderers the tree uses. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "collectors/cpu.h"
#include "daemon/config.h"
#include "daemon/value.h"
#include "daemon/record_cmd.h"
#include "symbols/symbols.h"
#include "views/views.h"

#define RECORD_DEFAULT_HZ 999
#define RECORD_MAX_HZ 10000
#define RECORD_DRAIN_MS 250
/* Once the collector has read an exec'd program's mappings with its libraries, a drain this
 * soon names its first samples while it surely still runs (mappings missing an address are
 * read again at a drain). */
#define RECORD_EXEC_DRAIN_MS 20
#define RECORD_TOP_ROWS 20
/* As env(1), nice(1) and timeout(1): the wrapper's own failure, a command that could not be
 * run, one that was not found. Anything else is the command's own status. */
#define EXIT_OWN 125
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

struct record {
	unsigned hz;
	enum cpu_unwind unwind;
	const char *dir_arg;      /* -o, or NULL for the default */
	char **cmd;
	char dir[4096];
	bool made_dir;
	struct symbolizer *syms;
	struct cpu_collector *cpu;
	struct profile *profile;
	pid_t pid;
	int go_fd, exec_err_fd;   /* the held child's pipes */
	sigset_t forwarded, old_mask;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: aperture record [-F HZ] [-o DIR] [--unwind fp|dwarf|auto] [--] CMD [ARGS...]\n"
		"\n"
		"Runs CMD, profiling it and every process it forks from its first instruction\n"
		"(on-CPU samples with user and kernel stacks), and when it exits writes\n"
		"DIR/cpu.folded, DIR/flame.svg and DIR/cpu.pprof and prints the top functions to\n"
		"stderr. Needs no running daemon; needs root (BPF and perf events).\n"
		"\n"
		"  -F, --frequency HZ  samples per second per CPU, 1..%d (default %d)\n"
		"  -o, --output DIR    where to write (created if missing; default\n"
		"                      ./aperture-CMD-YYYYmmdd-HHMMSS)\n"
		"      --unwind MODE   how user stacks are walked: fp (frame pointers), dwarf\n"
		"                      (CFI, from a copy of the stack) or auto (default: dwarf\n"
		"                      until the first samples show frame pointers give whole\n"
		"                      stacks, as config/unwind)\n"
		"  -h, --help          this text\n"
		"\n"
		"Exits with CMD's status (128+N if a signal N killed it); %d if aperture itself\n"
		"failed (bad options, no BPF, output not writable), %d if CMD could not be run,\n"
		"%d if it was not found. SIGINT and SIGQUIT reach CMD from the terminal;\n"
		"SIGTERM and SIGHUP sent to aperture are passed on to CMD.\n",
		RECORD_MAX_HZ, RECORD_DEFAULT_HZ, EXIT_OWN, EXIT_CANNOT_RUN, EXIT_NOT_FOUND);
}

/* 0 to go on, 1 if --help was answered, -EINVAL after saying what is wrong. */
static int parse_args(struct record *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "frequency", required_argument, NULL, 'F' },
		{ "output", required_argument, NULL, 'o' },
		{ "unwind", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t hz, unwind;
	int c;

	r->hz = RECORD_DEFAULT_HZ;
	r->unwind = CPU_UNWIND_AUTO;
	opterr = 0; /* getopt would name the program "record" */
	/* '+': options end at CMD, so CMD's own options are left alone even without "--". */
	while ((c = getopt_long(argc, argv, "+:F:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'F':
			if (value_parse_uint(optarg, strlen(optarg), 1, RECORD_MAX_HZ, &hz)) {
				fprintf(stderr, "aperture record: -F %s: the frequency is a whole "
					"number of Hz from 1 to %d\n", optarg, RECORD_MAX_HZ);
				return -EINVAL;
			}
			r->hz = hz;
			break;
		case 'o':
			if (!optarg[0]) {
				fprintf(stderr, "aperture record: -o: empty directory name\n");
				return -EINVAL;
			}
			r->dir_arg = optarg;
			break;
		case 'u':
			if (value_parse_word(optarg, strlen(optarg), config_descs[CONFIG_UNWIND].words,
					     &unwind)) {
				fprintf(stderr, "aperture record: --unwind %s: fp, dwarf or auto\n",
					optarg);
				return -EINVAL;
			}
			r->unwind = unwind;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case ':':
			fprintf(stderr, "aperture record: %s needs a value\n", argv[optind - 1]);
			fprintf(stderr, "Try 'aperture record --help'.\n");
			return -EINVAL;
		default:
			fprintf(stderr, "aperture record: unknown option %s\n", argv[optind - 1]);
			fprintf(stderr, "Try 'aperture record --help'.\n");
			return -EINVAL;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "aperture record: no command given\n"
			"Try 'aperture record --help'.\n");
		return -EINVAL;
	}
	r->cmd = argv + optind;
	return 0;
}

/* Makes the output directory before CMD runs, so a bad one costs nothing. -o DIR may exist;
 * the default name gets a -2, -3, ... suffix if a record in the same second took it. */
static int make_dir(struct record *r)
{
	const char *base = strrchr(r->cmd[0], '/');
	char stamp[32];
	struct stat st;
	struct tm tm;

	if (r->dir_arg) {
		snprintf(r->dir, sizeof(r->dir), "%s", r->dir_arg);
		if (!mkdir(r->dir, 0755)) {
			r->made_dir = true;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
		if (stat(r->dir, &st))
			return -errno;
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	}
	base = base ? base + 1 : r->cmd[0];
	localtime_r(&(time_t){ time(NULL) }, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	for (int n = 1; n < 100; n++) {
		if (n == 1)
			snprintf(r->dir, sizeof(r->dir), "aperture-%s-%s", base, stamp);
		else
			snprintf(r->dir, sizeof(r->dir), "aperture-%s-%s-%d", base, stamp, n);
		if (!mkdir(r->dir, 0755)) {
			r->made_dir = true;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Forks the child that will exec CMD once a byte arrives on its pipe. */
static int spawn_held(struct record *r)
{
	int go[2], exec_err[2];

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(exec_err, O_CLOEXEC)) {
		close(go[0]);
		close(go[1]);
		return -errno;
	}
	r->pid = fork();
	if (r->pid < 0) {
		r->pid = 0;
		close(go[0]);
		close(go[1]);
		close(exec_err[0]);
		close(exec_err[1]);
		return -errno;
	}
	if (r->pid == 0) {
		char b;
		int e;

		sigprocmask(SIG_SETMASK, &r->old_mask, NULL);
		close(go[1]);
		close(exec_err[0]);
		/* EOF: the parent could not start profiling and is giving up. */
		if (read(go[0], &b, 1) != 1)
			_exit(EXIT_OWN);
		execvp(r->cmd[0], r->cmd);
		e = errno;
		(void)!write(exec_err[1], &e, sizeof(e));
		_exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
	}
	close(go[0]);
	close(exec_err[1]);
	r->go_fd = go[1];
	r->exec_err_fd = exec_err[0];
	return 0;
}

/* Releases the held child; returns 0 once CMD runs, or the errno exec failed with. */
static int release(struct record *r)
{
	ssize_t n;
	int e;

	n = write(r->go_fd, "g", 1);
	close(r->go_fd);
	r->go_fd = -1;
	if (n != 1)
		return errno;
	/* The pipe closes at a successful exec (O_CLOEXEC): EOF means CMD runs. */
	do
		n = read(r->exec_err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(r->exec_err_fd);
	r->exec_err_fd = -1;
	return n == sizeof(e) ? e : 0;
}

static int exit_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_OWN;
}

static int64_t now_s(void)
{
	return time(NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drains every RECORD_DRAIN_MS until CMD's process has exited (not reaped: its pid stays
 * ours), reading the mappings of each process that forks or execs as it happens, and
 * passing SIGTERM and SIGHUP on to CMD. */
static int watch(struct record *r)
{
	struct pollfd fds[3] = { { .events = POLLIN }, { .events = POLLIN },
				 { .fd = cpu_collector_follow_fd(r->cpu), .events = POLLIN } };
	struct signalfd_siginfo si;
	int64_t next = now_ms() + RECORD_DRAIN_MS;
	int err = 0;

	fds[0].fd = syscall(SYS_pidfd_open, r->pid, 0);
	if (fds[0].fd < 0)
		return -errno;
	fds[1].fd = signalfd(-1, &r->forwarded, SFD_CLOEXEC);
	if (fds[1].fd < 0) {
		err = -errno;
		goto out;
	}
	for (;;) {
		int64_t wait = next - now_ms();
		int n = poll(fds, 3, wait > 0 ? wait : 0);

		if (n < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		if (fds[1].revents & POLLIN && read(fds[1].fd, &si, sizeof(si)) == sizeof(si))
			kill(r->pid, si.ssi_signo);
		if (fds[2].revents & POLLIN) {
			cpu_collector_follow_events(r->cpu);
			if (next > now_ms() + RECORD_EXEC_DRAIN_MS)
				next = now_ms() + RECORD_EXEC_DRAIN_MS;
		}
		if (fds[0].revents & POLLIN)
			break;
		if (now_ms() >= next) {
			cpu_collector_drain(r->cpu, now_s());
			next = now_ms() + RECORD_DRAIN_MS;
		}
	}
	close(fds[1].fd);
out:
	close(fds[0].fd);
	return err;
}

static int write_view(struct record *r, const char *name, const struct profile_snapshot *s,
		      const struct view_meta *m)
{
	char path[4200];
	FILE *out;
	int err;

	snprintf(path, sizeof(path), "%s/%s", r->dir, name);
	out = fopen(path, "w");
	if (!out)
		return -errno;
	if (!strcmp(name, "cpu.folded"))
		err = view_folded(s, out);
	else if (!strcmp(name, "flame.svg"))
		err = view_svg(s, m, out);
	else
		err = view_pprof(s, m, out);
	if (fclose(out) && !err)
		err = -errno;
	if (err)
		fprintf(stderr, "aperture record: writing %s: %s\n", path, strerror(-err));
	return err;
}

/* The head of view_top: its two comment lines and the first RECORD_TOP_ROWS functions. */
static void print_top(const struct profile_snapshot *s)
{
	char *text = NULL, *line, *save;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	int shown = 0;

	if (!mem)
		return;
	if (view_top(s, mem) || fclose(mem)) {
		free(text);
		return;
	}
	for (line = strtok_r(text, "\n", &save); line && shown < RECORD_TOP_ROWS + 2;
	     line = strtok_r(NULL, "\n", &save), shown++)
		fprintf(stderr, "%s\n", line);
	free(text);
}

static int report(struct record *r, uint64_t drops)
{
	static const char *const files[] = { "cpu.folded", "flame.svg", "cpu.pprof" };
	struct profile_snapshot *s;
	char title[256];
	struct view_meta m = {
		.title = title,
		.now = now_s(),
		.sample_type = "samples",
		.period_type = "cpu",
		.period_unit = "nanoseconds",
		.period = 1000000000ull / r->hz,
	};
	int err;

	snprintf(title, sizeof(title), "cpu: %s (pid %d)", r->cmd[0], (int)r->pid);
	err = profile_snapshot(r->profile, 0, &s);
	if (err)
		return err;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		int e = write_view(r, files[i], s, &m);

		err = err ? err : e;
	}
	fprintf(stderr, "aperture record: %" PRIu64 " samples at %u Hz (%.2f s on CPU), %" PRIu64
		" lost, in %s/{cpu.folded,flame.svg,cpu.pprof}\n", s->total, r->hz,
		(double)s->total / r->hz, drops, r->dir);
	print_top(s);
	profile_snapshot_free(s);
	return err;
}

/* Loads the collector and starts CMD under it. On error nothing runs any more. */
static int start(struct record *r)
{
	char why[256];
	int err, e;

	err = symbolizer_new(&r->syms);
	if (err) {
		fprintf(stderr, "aperture record: %s\n", strerror(-err));
		return err;
	}
	err = cpu_collector_new(r->syms, r->hz, &r->cpu, why, sizeof(why));
	if (err) {
		fprintf(stderr, "aperture record: cpu profiling unavailable: %s\n", why);
		return err;
	}
	cpu_collector_set_unwind(r->cpu, r->unwind);
	r->profile = profile_new("samples");
	if (!r->profile)
		return -ENOMEM;
	err = make_dir(r);
	if (err) {
		fprintf(stderr, "aperture record: %s: %s\n", r->dir, strerror(-err));
		return err;
	}
	err = spawn_held(r);
	if (err) {
		fprintf(stderr, "aperture record: fork: %s\n", strerror(-err));
		return err;
	}
	err = cpu_collector_add(r->cpu, r->pid, r->profile, why, sizeof(why));
	if (!err)
		err = cpu_collector_follow_forks(r->cpu, r->pid);
	if (err) {
		fprintf(stderr, "aperture record: profiling %d: %s\n", (int)r->pid,
			err == -ENOENT ? strerror(-err) : why);
		return err;
	}
	e = release(r);
	if (e) {
		fprintf(stderr, "aperture record: %s: %s\n", r->cmd[0], strerror(e));
		return -e;
	}
	return 0;
}

static void cleanup(struct record *r)
{
	if (r->go_fd >= 0)
		close(r->go_fd);
	if (r->exec_err_fd >= 0)
		close(r->exec_err_fd);
	cpu_collector_free(r->cpu);
	profile_unref(r->profile);
	symbolizer_free(r->syms);
	sigprocmask(SIG_SETMASK, &r->old_mask, NULL);
}

int record_main(int argc, char **argv)
{
	struct record r = { .go_fd = -1, .exec_err_fd = -1 };
	struct cpu_collector_stats stats;
	int err, status, ret = EXIT_OWN;

	err = parse_args(&r, argc, argv);
	if (err)
		return err > 0 ? 0 : EXIT_OWN;
	/* Blocked before the fork so none is missed; the child unblocks them before exec. */
	sigemptyset(&r.forwarded);
	sigaddset(&r.forwarded, SIGTERM);
	sigaddset(&r.forwarded, SIGHUP);
	sigprocmask(SIG_BLOCK, &r.forwarded, &r.old_mask);
	err = start(&r);
	if (err) {
		if (r.pid > 0) {
			if (r.go_fd >= 0)
				kill(r.pid, SIGKILL); /* still held */
			waitpid(r.pid, &status, 0);
			/* Released, its exec failed: it exited 126 or 127, our answer too. */
			if (r.go_fd < 0)
				ret = exit_status(status);
		}
		if (r.made_dir)
			rmdir(r.dir);
		goto out;
	}
	/* The terminal sends these to CMD too; CMD decides, and the profile is written. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	err = watch(&r);
	if (err)
		fprintf(stderr, "aperture record: waiting for %d: %s\n", (int)r.pid, strerror(-err));
	cpu_collector_remove(r.cpu, r.pid, now_s());
	waitpid(r.pid, &status, 0);
	cpu_collector_get_stats(r.cpu, &stats);
	ret = report(&r, stats.counts_full + stats.stacks_full + stats.stacks_lost) ?
		      EXIT_OWN : exit_status(status);
out:
	cleanup(&r);
	return ret;
}
