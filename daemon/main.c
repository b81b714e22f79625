/* aperture: a profiler that is a filesystem. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "daemon/aggregate_cmd.h"
#include "daemon/aperture.h"
#include "daemon/render_cmd.h"
#include "fs/fs.h"
#include "daemon/record_cmd.h"
#include "daemon/http.h"
#include "daemon/rules.h"
#include "sync/client.h"

#define DEFAULT_MOUNTPOINT "/aperture"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: aperture mount [--foreground] [--allow-other] [--sync URL] [--node NAME]\n"
		"                      [--token-file FILE] [--sync-ca FILE] [--spool-dir DIR]\n"
		"                      [--rules FILE] [--http ADDR:PORT [--http-tokens FILE]]\n"
		"                      [MOUNTPOINT]\n"
		"       aperture status [MOUNTPOINT]\n"
		"       aperture render svg|json|pprof|top|folded [--title T] [--hz HZ] < IN > OUT\n"
		"       aperture record [-F HZ] [-o DIR] [--] CMD [ARGS...]\n"
		"       aperture aggregate [--listen ADDR:PORT] [--store URL] [--tokens FILE] ...\n"
		"       aperture fetch [--token-file F] URL [PATH]\n"
		"       aperture --help | --version\n"
		"\n"
		"Mounts the profiling tree at MOUNTPOINT (default " DEFAULT_MOUNTPOINT ").\n"
		"Then: echo 1 > MOUNTPOINT/targets/PID/enable; cat MOUNTPOINT/targets/PID/cpu.folded\n"
		"\n"
		"  -f, --foreground   stay in the foreground (for systemd and containers)\n"
		"  -a, --allow-other  let other users in; each sees only its own processes\n"
		"  --sync URL         push every profile to the aggregator at URL (config/sync)\n"
		"  --node NAME        this node's name there (default: the host name)\n"
		"  --token-file FILE  the bearer token the aggregator gave this node\n"
		"  --sync-ca FILE     trust this CA for an https:// aggregator\n"
		"  --spool-dir DIR    unacknowledged batches (default " SYNC_SPOOL_ROOT "/NAME)\n"
		"  --rules FILE       profiling rules (config/rules), applied to every process\n"
		"  --http ADDR:PORT   serve GET /metrics (Prometheus) there, and the page over\n"
		"                     this node's tree (stack data: loopback only, or with...)\n"
		"  --http-tokens FILE ...a read token of FILE (the aggregator's tokens format)\n"
		"  -h, --help         this text\n"
		"  -V, --version      version and library versions\n"
		"\n"
		"SIGINT or SIGTERM unmounts and detaches every BPF program; so does\n"
		"`umount MOUNTPOINT`. Needs root (BPF, perf events, FUSE mounts).\n"
		"MOUNTPOINT/README describes every file.\n"
		"`aperture record --help` describes record, which needs no mount.\n");
}

/* Every ELF file the symbolizer caches stays open, and so may hundreds of libraries. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* `aperture status [MOUNTPOINT]`: prints the tree's status; exit 0 when a daemon answers.
 * A readiness probe for images without a shell (deploy/k8s/node.yaml). */
static int cmd_status(int argc, char **argv)
{
	char path[4096], buf[4096];
	bool ok = false;
	size_t n;
	FILE *f;

	if (argc > 2) {
		usage(stderr);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/status", argc == 2 ? argv[1] : DEFAULT_MOUNTPOINT);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "aperture: %s: %s\n", path, strerror(errno));
		return 1;
	}
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		fwrite(buf, 1, n, stdout);
		ok = true;
	}
	ok = ok && !ferror(f);
	fclose(f);
	return ok ? 0 : 1;
}

/* --rules FILE: checked before anything is mounted, applied by the first pass. */
static int load_rules(struct rules *r, const char *path)
{
	char why[256], *text = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "r"), *mem;
	int err = 0, c;

	if (!f) {
		fprintf(stderr, "aperture: --rules %s: %s\n", path, strerror(errno));
		return -errno;
	}
	mem = open_memstream(&text, &len);
	while (mem && (c = getc(f)) != EOF)
		putc(c, mem);
	fclose(f);
	if (!mem || fclose(mem))
		err = -ENOMEM;
	if (!err)
		err = rules_load(r, text, len, why, sizeof(why));
	if (err)
		fprintf(stderr, "aperture: --rules %s: %s\n", path,
			err == -ENOMEM ? strerror(ENOMEM) : why);
	free(text);
	return err;
}

static int cmd_mount(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "allow-other", no_argument, NULL, 'a' },
		{ "sync", required_argument, NULL, 'S' },
		{ "node", required_argument, NULL, 'N' },
		{ "token-file", required_argument, NULL, 'T' },
		{ "sync-ca", required_argument, NULL, 'C' },
		{ "spool-dir", required_argument, NULL, 'D' },
		{ "rules", required_argument, NULL, 'R' },
		{ "http", required_argument, NULL, 'H' },
		{ "http-tokens", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct fs_options opt = { .mountpoint = DEFAULT_MOUNTPOINT };
	struct sync_options so = {0};
	const char *sync_url = NULL, *rules_file = NULL;
	struct node_http_options ho = {0};
	struct node_http *http = NULL;
	char why[512];
	struct aperture a;
	struct fs *fs = NULL;
	int c, err;

	while ((c = getopt_long(argc, argv, "fah", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': opt.foreground = true; break;
		case 'a': opt.allow_other = true; break;
		case 'S': sync_url = optarg; break;
		case 'N': so.node = optarg; break;
		case 'T': so.token_file = optarg; break;
		case 'C': so.ca_file = optarg; break;
		case 'D': so.spool_dir = optarg; break;
		case 'R': rules_file = optarg; break;
		case 'H': ho.listen = optarg; break;
		case 'K': ho.tokens = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		opt.mountpoint = argv[optind++];
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	raise_fd_limit();
	err = aperture_init(&a, opt.mountpoint);
	if (err) {
		fprintf(stderr, "aperture: %s\n", strerror(-err));
		return 1;
	}
	if (!a.cpu)
		fprintf(stderr, "aperture: cpu profiling unavailable: %s\n", a.cpu_error);
	err = sync_url ? config_write(&a, CONFIG_SYNC, sync_url, strlen(sync_url)) : 0;
	if (err) {
		fprintf(stderr, "aperture: --sync: %s\n", a.last_error);
		goto out;
	}
	err = sync_client_new(&a, &so, &a.sync, why, sizeof(why));
	if (err) {
		fprintf(stderr, "aperture: %s\n", why);
		goto out;
	}
	err = rules_new(&a, &a.rules);
	if (!err && rules_file)
		err = load_rules(a.rules, rules_file);
	if (err)
		goto out;
	err = fs_mount(&a, &opt, &fs);
	if (err) {
		fprintf(stderr, "aperture: mounting %s: %s%s\n", opt.mountpoint, strerror(-err),
			err == -EBUSY ? " (another aperture daemon serves it)" : "");
		goto out;
	}
	err = fs_daemonize(&opt);
	if (!err)
		err = aperture_start(&a);
	/* After any fork: the threads must live in the daemon. */
	if (!err)
		err = sync_client_start(a.sync);
	if (!err && ho.listen) {
		ho.node = so.node;
		err = node_http_start(&a, &ho, &http, why, sizeof(why));
		if (err)
			fprintf(stderr, "aperture: %s\n", why);
	}
	if (!err)
		err = fs_serve(fs);
	node_http_stop(http);
	if (err)
		fprintf(stderr, "aperture: %s\n", strerror(-err));
	aperture_stop(&a);
	fs_unmount(fs);
out:
	/* Before the targets it reads go. */
	sync_client_free(a.sync);
	a.sync = NULL;
	rules_free(a.rules);
	a.rules = NULL;
	aperture_fini(&a);
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	/* Fixed thresholds, not glibc's sliding ones: once a multi-MiB block (a symbol table, a
	 * rendered profile) is freed, glibc would raise both to its size, so later blocks that
	 * large stay in the heaps and the heaps' tops are no longer given back: a daemon whose
	 * targets went would keep their memory. */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	mallopt(M_TRIM_THRESHOLD, 1 << 20);
	if (argc >= 2 && !strcmp(argv[1], "mount"))
		return cmd_mount(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "status"))
		return cmd_status(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "render"))
		return cmd_render(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "record")) {
		raise_fd_limit();
		return record_main(argc - 1, argv + 1);
	}
	if (argc >= 2 && !strcmp(argv[1], "aggregate"))
		return aggregate_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "fetch"))
		return fetch_main(argc - 1, argv + 1);
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")))
		return fs_version(stdout) ? 1 : 0;
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
