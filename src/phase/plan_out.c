/* SPDX-License-Identifier: Apache-2.0 */
/* What a plan turns into: the one argv the install sandbox runs, and the
 * JSON `kiwi-run plan` prints. */
#include "plan_int.h"
#include "kiwi/cleanup.h"
#include "kiwi/json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Appends s to the shell text as one single-quoted word: inside single
 * quotes nothing is special but the quote, written as '\''. */
static void shell_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	fputc('\'', f);
}

/* "a && b && c": the first failing step ends the script with its status. */
static char *shell_script(const struct kiwi_plan *plan)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	for (size_t i = 0; i < plan->n_steps; i++) {
		if (i > 0)
			fputs(" && ", f);
		for (size_t k = 0; plan->steps[i].argv[k]; k++) {
			if (k > 0)
				fputc(' ', f);
			shell_quote(f, plan->steps[i].argv[k]);
		}
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

char **kiwi_plan_command(const struct kiwi_plan *plan)
{
	if (plan->n_steps == 0)
		return NULL;
	if (plan->n_steps == 1) {
		size_t n = 0;
		while (plan->steps[0].argv[n])
			n++;
		char **v = calloc(n + 1, sizeof(*v));
		for (size_t i = 0; v && i < n; i++)
			if (!(v[i] = strdup(plan->steps[0].argv[i]))) {
				plan_strv_free(v);
				return NULL;
			}
		return v;
	}
	char **v = calloc(4, sizeof(*v));
	if (!v)
		return NULL;
	v[0] = strdup("/bin/sh");
	v[1] = v[0] ? strdup("-c") : NULL;
	v[2] = v[1] ? shell_script(plan) : NULL;
	if (!v[2]) {
		plan_strv_free(v);
		return NULL;
	}
	return v;
}

void kiwi_plan_command_free(char **argv)
{
	plan_strv_free(argv);
}

static void write_strv(kiwi_json_writer *w, char *const *v)
{
	kiwi_jw_open_array(w);
	for (size_t i = 0; v && v[i]; i++)
		kiwi_jw_string(w, v[i]);
	kiwi_jw_close_array(w);
}

static void write_steps(kiwi_json_writer *w, const struct kiwi_plan *plan)
{
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < plan->n_steps; i++) {
		const struct kiwi_plan_step *s = &plan->steps[i];
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "ecosystem");
		kiwi_jw_string(w, s->ecosystem);
		kiwi_jw_key(w, "tool");
		kiwi_jw_string(w, s->tool);
		kiwi_jw_key(w, "argv");
		write_strv(w, s->argv);
		kiwi_jw_key(w, "cache");
		kiwi_jw_string(w, s->cache);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
}

void kiwi_plan_write(struct kiwi_json_writer *w, const struct kiwi_plan *plan)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "steps");
	write_steps(w, plan);
	kiwi_jw_key(w, "command");
	char **cmd = kiwi_plan_command(plan);
	if (cmd)
		write_strv(w, cmd);
	else
		kiwi_jw_null(w);
	kiwi_plan_command_free(cmd);
	kiwi_jw_key(w, "skipped");
	kiwi_jw_string(w, plan->n_steps == 0 && !plan->refused ? plan->skipped : NULL);
	kiwi_jw_key(w, "refused");
	kiwi_jw_string(w, plan->refused);
	kiwi_jw_key(w, "evidence");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < plan->n_evidence; i++) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "file");
		kiwi_jw_string(w, plan->evidence[i].file);
		kiwi_jw_key(w, "why");
		kiwi_jw_string(w, plan->evidence[i].why);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_close_object(w);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int kiwi_plan_write_json(int fd, const struct kiwi_plan *plan, kiwi_err *err)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	if (!w)
		return kiwi_error(err, ENOMEM, "plan", "cannot write the plan");
	kiwi_plan_write(w, plan);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	bool nl = len > 0 && text[len - 1] == '\n';   /* yajl's pretty printer ends lines itself */
	if (!text || write_all(fd, text, len) < 0 || (!nl && write_all(fd, "\n", 1) < 0))
		return kiwi_error(err, errno ? errno : ENOMEM, "plan", "cannot write the plan");
	return 0;
}
