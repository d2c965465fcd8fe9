/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-rootfs unpack: into a directory, or into the cache (--cache). */
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/oci_image.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int cancelled;

static void on_signal(int sig)
{
	(void)sig;
	cancelled = 1;
}

struct progress {
	bool tty;
	struct timespec start;
	double last; /* seconds since start of the last event shown */
};

static double since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void write_stats(kiwi_json_writer *w, const struct kiwi_extract_stats *st)
{
	kiwi_jw_key(w, "layers");
	kiwi_jw_int(w, st->layers);
	kiwi_jw_key(w, "entries");
	kiwi_jw_int(w, (long long)st->entries);
	kiwi_jw_key(w, "bytes");
	kiwi_jw_int(w, (long long)st->bytes);
	kiwi_jw_key(w, "blobBytes");
	kiwi_jw_int(w, (long long)st->blob_bytes);
}

static void on_progress(void *arg, const struct kiwi_extract_stats *st)
{
	struct progress *p = arg;
	/* At most one JSON event a second (a reader keeping the last line must
	 * not drown), a few a second on a terminal. */
	double now = since(&p->start);
	if (now - p->last < (cli_json ? 1.0 : 0.2))
		return;
	p->last = now;
	if (cli_json) {
		_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
		if (!w)
			return;
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "event");
		kiwi_jw_string(w, "progress");
		write_stats(w, st);
		kiwi_jw_close_object(w);
		cli_print_json(w);
	} else if (p->tty) {
		fprintf(stderr, "\r\033[Klayer %u: %.1f MiB read, %.1f MiB written, %llu entries, %.1fs",
			st->layers + 1, (double)st->blob_bytes / 1048576.0, (double)st->bytes / 1048576.0,
			(unsigned long long)st->entries, now);
	}
}

static void report(const char *rootfs, const struct kiwi_image *img,
		   const struct kiwi_extract_stats *st, const struct progress *p)
{
	if (p->tty && !cli_json)
		fputs("\r\033[K", stderr);
	if (st->devices_skipped)
		cli_note("%llu device nodes not created (creating them needs CAP_MKNOD)",
			 (unsigned long long)st->devices_skipped);
	if (st->owners_skipped)
		cli_note("%llu entries keep your own uid/gid: ownership needs root",
			 (unsigned long long)st->owners_skipped);
	if (st->xattrs_skipped)
		cli_note("%llu extended attributes not restored (security.capability needs --keep-capabilities)",
			 (unsigned long long)st->xattrs_skipped);
	if (!cli_json) {
		puts(rootfs);
		return;
	}
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return;
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "event");
	kiwi_jw_string(w, "unpacked");
	kiwi_jw_key(w, "rootfs");
	kiwi_jw_string(w, rootfs);
	kiwi_jw_key(w, "manifest");
	kiwi_jw_string(w, img ? img->manifest.digest : NULL);
	write_stats(w, st);
	kiwi_jw_key(w, "devicesSkipped");
	kiwi_jw_int(w, (long long)st->devices_skipped);
	kiwi_jw_key(w, "ownersSkipped");
	kiwi_jw_int(w, (long long)st->owners_skipped);
	kiwi_jw_key(w, "seconds");
	kiwi_jw_double(w, since(&p->start));
	kiwi_jw_close_object(w);
	cli_print_json(w);
}

int cmd_unpack(int argc, char **argv)
{
	enum { OPT_MAX_SIZE = 256, OPT_MAX_ENTRIES, OPT_CAPS, OPT_CACHE, OPT_CACHE_DIR, OPT_JSON };
	static const struct option opts[] = {
		{ "platform", required_argument, NULL, 'p' },
		{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
		{ "max-entries", required_argument, NULL, OPT_MAX_ENTRIES },
		{ "keep-capabilities", no_argument, NULL, OPT_CAPS },
		{ "cache", no_argument, NULL, OPT_CACHE },
		{ "cache-dir", required_argument, NULL, OPT_CACHE_DIR },
		{ "json", no_argument, NULL, OPT_JSON },
		{ 0 },
	};
	struct kiwi_extract_stats st = { 0 };
	struct kiwi_unpack_opts o = { .stats = &st };
	struct progress p = { .tty = isatty(STDERR_FILENO) };
	bool cache = false;
	const char *cache_dir = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "p:", opts, NULL)) != -1) {
		switch (c) {
		case 'p': o.platform = optarg; break;
		case OPT_MAX_SIZE:
			if (!cli_parse_size(optarg, &o.extract.max_size))
				return cli_usage("--max-size `%s` is not a size like 512M or 8G", optarg);
			break;
		case OPT_MAX_ENTRIES:
			if (!cli_parse_size(optarg, &o.extract.max_entries))
				return cli_usage("--max-entries `%s` is not a positive number", optarg);
			break;
		case OPT_CAPS: o.extract.keep_capabilities = true; break;
		case OPT_CACHE: cache = true; break;
		case OPT_CACHE_DIR: cache_dir = optarg; cache = true; break;
		case OPT_JSON: cli_json = true; break;
		default: return cli_usage("unpack: bad option");
		}
	}
	if (argc - optind != (cache ? 1 : 2))
		return cli_usage(cache ? "unpack --cache takes one image reference"
				       : "unpack takes an image reference and a destination");
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	o.extract.cancel = &cancelled;
	o.extract.progress = on_progress;
	o.extract.progress_arg = &p;
	clock_gettime(CLOCK_MONOTONIC, &p.start);
	kiwi_err err = { 0 };
	if (cache) {
		_cleanup_free_ char *rootfs = NULL;
		struct kiwi_image_config cfg;
		if (kiwi_image_ensure_unpacked(argv[optind], cache_dir, &o, &rootfs, &cfg, NULL, &err) < 0)
			return cli_fail(&err);
		kiwi_image_config_clear(&cfg);
		report(rootfs, NULL, &st, &p);
		return 0;
	}
	struct kiwi_image img;
	if (kiwi_image_unpack(argv[optind], argv[optind + 1], &o, &img, &err) < 0)
		return cli_fail(&err);
	report(argv[optind + 1], &img, &st, &p);
	kiwi_image_clear(&img);
	return 0;
}
