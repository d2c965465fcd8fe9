/* SPDX-License-Identifier: Apache-2.0 */
/* Build-time tool: compiles a seccomp profile and writes it, with the
 * profile's own text, as a C header for src/sandbox/seccomp_default.c.
 *   seccomp_precompile PROFILE.json OUT.h */
#include "kiwi/cleanup.h"
#include "kiwi/seccomp.h"

#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const kiwi_err *err)
{
	char text[1024];
	kiwi_error_format(err, text, sizeof(text));
	fprintf(stderr, "seccomp_precompile: %s\n", text);
	return 1;
}

static void write_bytes(FILE *out, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%u,%s", p[i], i % 24 == 23 ? "\n" : "");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: seccomp_precompile PROFILE.json OUT.h\n");
		return 2;
	}
	/* Compile for real: a cached program from this machine is no input. */
	setenv("KIWI_SECCOMP_CACHE_DIR", "off", 1);
	kiwi_err err = { 0 };
	_cleanup_seccomp_ struct kiwi_seccomp *f = NULL;
	if (kiwi_seccomp_compile_file(argv[1], &f, &err) < 0)
		return fail(&err);
	FILE *text = fopen(argv[1], "rb");
	FILE *out = fopen(argv[2], "w");
	if (!text || !out) {
		perror("seccomp_precompile");
		return 1;
	}
	fprintf(out, "/* Generated from %s by seccomp_precompile: do not edit. */\n", argv[1]);
	fprintf(out, "static const unsigned char kiwi_default_profile_text[] = {\n");
	unsigned char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), text)) > 0)
		write_bytes(out, buf, n);
	fprintf(out, "0 };\n\n#define KIWI_DEFAULT_PROGRAM_FLAGS %uu\n", kiwi_seccomp_flags(f));
	fprintf(out, "static const struct sock_filter kiwi_default_program[] = {\n");
	const struct sock_fprog *prog = kiwi_seccomp_program(f);
	for (unsigned i = 0; i < prog->len; i++) {
		const struct sock_filter *ins = &prog->filter[i];
		fprintf(out, "\t{ 0x%04x, %u, %u, 0x%08xu },\n", ins->code, ins->jt, ins->jf, ins->k);
	}
	fprintf(out, "};\n");
	fclose(text);
	return fclose(out) == 0 ? 0 : 1;
}
