/* SPDX-License-Identifier: Apache-2.0 */
/* How long compiling the default profile takes, i.e. what every sandbox
 * start pays before clone: JSON parse, libseccomp rule database, BPF
 * generation with the binary-tree optimisation, export through a memfd;
 * then the same through the cache of compiled programs (a temporary one).
 * Usage: bench_seccomp_compile [iterations] [profile.json] */
#include "kiwi/json.h"
#include "kiwi/seccomp.h"

#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int compile_once(const char *path, struct kiwi_seccomp **f, kiwi_err *err)
{
	return path ? kiwi_seccomp_compile_file(path, f, err) : kiwi_seccomp_compile_default(f, err);
}

/* Times n compiles; prints the median and spread under label. */
static int measure(int n, const char *path, const char *label)
{
	double *t = calloc((size_t)n, sizeof(*t));
	if (!t)
		return -1;
	unsigned insns = 0;
	for (int i = 0; i < n; i++) {
		kiwi_err err = { 0 };
		struct kiwi_seccomp *f;
		double t0 = now_us();
		if (compile_once(path, &f, &err) < 0) {
			fprintf(stderr, "bench_seccomp_compile: %s\n", err.msg);
			free(t);
			return -1;
		}
		t[i] = now_us() - t0;
		insns = kiwi_seccomp_program(f)->len;
		kiwi_seccomp_free(f);
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	printf("%-22s median %7.1f us, p10 %7.1f us, p90 %7.1f us, min %7.1f us (%u BPF instructions)\n",
	       label, t[n / 2], t[n / 10], t[n * 9 / 10], t[0], insns);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	const char *path = argc > 2 ? argv[2] : NULL;
	if (n < 1)
		n = 1;
	printf("profile: %s, %d runs each\n", path ? path : "default (embedded)", n);
	setenv("KIWI_SECCOMP_CACHE_DIR", "off", 1);
	if (measure(n, path, "compile, no cache:") < 0)
		return 1;
	char dir[] = "/tmp/kiwi-seccomp-bench-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	setenv("KIWI_SECCOMP_CACHE_DIR", dir, 1);
	int rc = measure(n, path, "compile, cache hit:");
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0 || rc < 0)
		return 1;
	size_t len;
	const char *text = kiwi_seccomp_default_text(&len);
	double t0 = now_us();
	kiwi_err err;
	kiwi_json_free(kiwi_json_parse(text, len, &err));
	printf("JSON parse of the default text alone: %.1f us\n", now_us() - t0);
	return 0;
}
