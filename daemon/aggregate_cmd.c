/* aperture aggregate: the fleet's aggregator (HTTP, a store, optionally a FUSE mount), and
 * aperture fetch: a small client for its HTTP reads. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "aggregate/aggregator.h"
#include "aggregate/http.h"
#include "daemon/aggregate_cmd.h"
#include "fs/fs.h"

#define DEFAULT_LISTEN "0.0.0.0:8040"
#define DEFAULT_DIR "/var/lib/aperture"
#define DEFAULT_STORE "sqlite:" DEFAULT_DIR "/aggregate.db"
#define RETAIN_EVERY_S 3600

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: aperture aggregate [--listen ADDR:PORT] [--store URL] [--tokens FILE]\n"
		"                          [--mount MNT] [--insecure] [--tls-cert F --tls-key F]\n"
		"                          [--retention-days N] [--threads N]\n"
		"\n"
		"Receives nodes' batches (POST /v1/batches), keeps them, and serves every node's\n"
		"tree over HTTP GET (and FUSE with --mount).\n"
		"\n"
		"  --listen ADDR:PORT   default " DEFAULT_LISTEN "\n"
		"  --store URL          sqlite:PATH (default " DEFAULT_STORE ")\n"
		"  --tokens FILE        `TOKEN node NAME`, `TOKEN read *`,\n"
		"                       `TOKEN read node:N,service:S` per line\n"
		"  --insecure           no tokens: anyone who reaches the port uploads and reads\n"
		"  --retention-days N   1..7 (default 7), deleted by day, hourly and on SIGHUP\n");
}

/* Deletes what retention no longer keeps every hour, and at once on SIGHUP. */
struct retainer {
	struct aggregator *g;
	pthread_t thread;
	volatile sig_atomic_t stop;
};

static void *retain_loop(void *arg)
{
	struct retainer *r = arg;
	struct timespec every = { .tv_sec = RETAIN_EVERY_S };
	sigset_t hup;

	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	while (!r->stop) {
		sigtimedwait(&hup, NULL, &every);
		if (r->stop)
			break;
		if (aggregator_retain(r->g, time(NULL)))
			fprintf(stderr, "aperture: retention pass failed\n");
	}
	return NULL;
}

/* Blocks, in this thread and every thread started after, SIGHUP (the retainer's) and, when
 * no FUSE loop will catch them, SIGINT and SIGTERM (sigwait'ed by stop_signals). */
static void block_signals(bool fuse, sigset_t *stop)
{
	sigset_t set;

	sigemptyset(stop);
	sigaddset(stop, SIGINT);
	sigaddset(stop, SIGTERM);
	set = *stop;
	if (fuse)
		sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int aggregate_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "store", required_argument, NULL, 's' },
		{ "tokens", required_argument, NULL, 't' },
		{ "mount", required_argument, NULL, 'm' },
		{ "insecure", no_argument, NULL, 'I' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "retention-days", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct agg_http_options hopt = { .listen = DEFAULT_LISTEN };
	const char *store_url = DEFAULT_STORE, *tokens_path = NULL, *mnt = NULL;
	struct retainer ret = {0};
	struct aggregator g;
	struct agg_store *store = NULL;
	struct tokens *tokens = NULL;
	struct agg_http *http = NULL;
	struct fs *fs = NULL;
	bool insecure = false, retaining = false;
	unsigned retention = AGG_RETENTION_DAYS_MAX;
	char why[512] = "";
	sigset_t stop;
	int c, err, sig;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': hopt.listen = optarg; break;
		case 's': store_url = optarg; break;
		case 't': tokens_path = optarg; break;
		case 'm': mnt = optarg; break;
		case 'I': insecure = true; break;
		case 'C': hopt.tls_cert = optarg; break;
		case 'K': hopt.tls_key = optarg; break;
		case 'r': retention = atoi(optarg); break;
		case 'T': hopt.threads = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || retention < 1 || retention > AGG_RETENTION_DAYS_MAX ||
	    (!tokens_path && !insecure) || (tokens_path && insecure)) {
		fprintf(stderr, "aperture: %s\n", optind < argc ? "unexpected argument" :
			(!tokens_path && !insecure) ? "--tokens FILE is required (or --insecure)" :
			(tokens_path && insecure) ? "--tokens and --insecure exclude each other" :
			"--retention-days: 1..7");
		usage(stderr);
		return 2;
	}
	if (!strcmp(store_url, DEFAULT_STORE))
		mkdir(DEFAULT_DIR, 0700);
	if (tokens_path && tokens_load(tokens_path, &tokens, why, sizeof(why))) {
		fprintf(stderr, "aperture: %s\n", why);
		return 1;
	}
	if (insecure)
		fprintf(stderr, "aperture: WARNING: --insecure: no tokens, anyone who reaches %s "
			"may upload as any node and read everything\n", hopt.listen);
	err = agg_store_open(store_url, &store, why, sizeof(why));
	if (err) {
		fprintf(stderr, "aperture: store: %s\n", why[0] ? why : strerror(-err));
		tokens_free(tokens);
		return 1;
	}
	aggregator_init(&g, store, tokens, retention);
	snprintf(g.listen, sizeof(g.listen), "%s", hopt.listen);
	g.tls = hopt.tls_cert != NULL;
	if (aggregator_retain(&g, time(NULL)))
		fprintf(stderr, "aperture: retention pass failed\n");
	block_signals(mnt != NULL, &stop);
	ret.g = &g;
	retaining = !pthread_create(&ret.thread, NULL, retain_loop, &ret);
	err = agg_http_start(&g, &hopt, &http, why, sizeof(why));
	if (err) {
		fprintf(stderr, "aperture: %s\n", why);
		goto out;
	}
	fprintf(stderr, "aperture: aggregating on %s%s, store %s\n", hopt.listen,
		g.tls ? " (https)" : "", store->url);
	if (mnt) {
		struct fs_options fo = { .mountpoint = mnt, .foreground = true };

		err = fs_mount_tree(&g.tree, &fo, &fs);
		if (!err)
			err = fs_serve(fs);
		if (err)
			fprintf(stderr, "aperture: mount %s: %s\n", mnt, strerror(-err));
		fs_unmount(fs);
	} else {
		err = sigwait(&stop, &sig) ? -EINTR : 0;
	}
out:
	agg_http_stop(http);
	if (retaining) {
		ret.stop = 1;
		pthread_kill(ret.thread, SIGHUP);
		pthread_join(ret.thread, NULL);
	}
	aggregator_fini(&g);
	store->ops->close(store);
	tokens_free(tokens);
	return err ? 1 : 0;
}

static size_t write_out(char *data, size_t size, size_t n, void *f)
{
	return fwrite(data, size, n, f);
}

int fetch_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "token-file", required_argument, NULL, 't' },
		{ "cacert", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *token_file = NULL, *cacert = NULL;
	struct curl_slist *headers = NULL;
	char *token = NULL, *url = NULL, *body = NULL, errbuf[CURL_ERROR_SIZE] = "";
	size_t body_len = 0;
	FILE *errs = NULL;
	long status = 0;
	CURL *curl;
	CURLcode rc;
	int c, ret = 1;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 't': token_file = optarg; break;
		case 'c': cacert = optarg; break;
		case 'h':
			printf("Usage: aperture fetch [--token-file F] [--cacert F] URL [PATH]\n"
			       "GETs URL/PATH (e.g. http://agg:8040 /nodes/n1/targets/42/cpu.folded?"
			       "last=300)\nfrom an aggregator and writes the body to stdout.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind >= argc || argc - optind > 2) {
		fprintf(stderr, "Usage: aperture fetch [--token-file F] [--cacert F] URL [PATH]\n");
		return 2;
	}
	if (token_file && !(token = secret_file_read(token_file))) {
		fprintf(stderr, "aperture: %s: cannot read the token\n", token_file);
		return 1;
	}
	if (asprintf(&url, "%s%s", argv[optind], optind + 1 < argc ? argv[optind + 1] : "") < 0)
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	curl = curl_easy_init();
	errs = open_memstream(&body, &body_len);
	if (!curl || !errs)
		goto out;
	if (token) {
		char *h;

		if (asprintf(&h, "Authorization: Bearer %s", token) < 0)
			goto out;
		headers = curl_slist_append(headers, h);
		free(h);
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_out);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, errs);
	if (cacert)
		curl_easy_setopt(curl, CURLOPT_CAINFO, cacert);
	rc = curl_easy_perform(curl);
	fclose(errs);
	errs = NULL;
	if (rc != CURLE_OK) {
		fprintf(stderr, "aperture: %s: %s\n", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
		goto out;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	/* The body goes to stdout only when it is the file asked for. */
	fwrite(body, 1, body_len, status / 100 == 2 ? stdout : stderr);
	if (status / 100 != 2)
		fprintf(stderr, "\naperture: %s: HTTP %ld\n", url, status);
	ret = status / 100 == 2 ? 0 : 1;
out:
	if (errs)
		fclose(errs);
	curl_slist_free_all(headers);
	if (curl)
		curl_easy_cleanup(curl);
	curl_global_cleanup();
	free(body);
	free(url);
	free(token);
	return ret;
}
