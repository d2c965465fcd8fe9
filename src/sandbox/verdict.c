/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/verdict.h"
#include "kiwi/cleanup.h"
#include "kiwi/egress.h"
#include "kiwi/fslayer.h"
#include "kiwi/json.h"
#include "kiwi/helper.h"
#include "kiwi/net_audit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double us_to_ms(uint64_t us)
{
	return (double)(us / 1000) + (double)(us % 1000) / 1000.0;
}

static void write_error(kiwi_json_writer *w, const kiwi_err *e)
{
	if (!e) {
		kiwi_jw_null(w);
		return;
	}
	char text[1024];
	kiwi_error_format(e, text, sizeof(text));
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "step");
	kiwi_jw_string(w, e->step);
	kiwi_jw_key(w, "errno");
	kiwi_jw_int(w, e->errnum);
	kiwi_jw_key(w, "message");
	kiwi_jw_string(w, text);
	kiwi_jw_close_object(w);
}

static void write_started_at(kiwi_json_writer *w, const struct kiwi_sandbox_result *r)
{
	struct tm tm;
	char date[32], stamp[64];
	gmtime_r(&r->started_at.tv_sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(stamp, sizeof(stamp), "%s.%06dZ", date, (int)(r->started_at.tv_nsec / 1000));
	kiwi_jw_string(w, stamp);
}

static void write_bool_key(kiwi_json_writer *w, const char *key, bool v)
{
	kiwi_jw_key(w, key);
	kiwi_jw_bool(w, v);
}

static void write_int_key(kiwi_json_writer *w, const char *key, long long v)
{
	kiwi_jw_key(w, key);
	kiwi_jw_int(w, v);
}

/* Which bound ended the run, if one did; one name, so that no two fields
 * can tell different stories. */
static const char *killed_by(const struct kiwi_sandbox_result *r)
{
	if (r->timed_out)
		return "timeout";
	if (r->output_limit_hit)
		return "output_limit";
	if (r->has_cgroup && r->cg.oom_killed)
		return "oom";
	if (r->killed_whole)
		return "external";
	return NULL;
}

/* Facts only a cgroup can tell are null without one, never a guess. */
static void write_cgroup(kiwi_json_writer *w, const struct kiwi_sandbox_result *r)
{
	bool cg = r->has_cgroup;
	kiwi_jw_key(w, "oom_killed");
	cg && r->cg.memory_known ? kiwi_jw_bool(w, r->cg.oom_killed) : kiwi_jw_null(w);
	kiwi_jw_key(w, "peak_memory_kib");
	cg && r->cg.peak_known ? kiwi_jw_int(w, (long long)r->cg.peak_memory_kib) : kiwi_jw_null(w);
	kiwi_jw_key(w, "pids_limit_hit");
	cg && r->cg.pids_known ? kiwi_jw_bool(w, r->cg.pids_limit_hit) : kiwi_jw_null(w);
	kiwi_jw_key(w, "cgroup");
	kiwi_jw_string(w, cg ? r->cgroup_name : NULL);
}

/* Which mechanism held each bound; null where nothing did. */
static void write_mechanisms(kiwi_json_writer *w, const struct kiwi_sandbox_result *r)
{
	static const char *const pids[] = { NULL, "cgroup", "rlimit" };
	kiwi_jw_key(w, "bounds");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "pids");
	kiwi_jw_string(w, pids[r->pids_bound]);
	kiwi_jw_key(w, "memory");
	kiwi_jw_string(w, r->memory_bound ? "cgroup" : NULL);
	kiwi_jw_key(w, "disk");
	kiwi_jw_string(w, !r->started ? NULL : r->disk_backend == KIWI_DISK_LOOP ? "loop" : "tmpfs");
	/* Layered binds: bound in place where the layer cannot hold them. */
	kiwi_jw_key(w, "workspace_in_place");
	kiwi_jw_bool(w, r->binds_in_place);
	kiwi_jw_close_object(w);
}

static void write_bounds(kiwi_json_writer *w, const struct kiwi_sandbox_result *r)
{
	write_bool_key(w, "timed_out", r->timed_out);
	kiwi_jw_key(w, "killed_by");
	kiwi_jw_string(w, killed_by(r));
	write_int_key(w, "stdout_bytes", (long long)r->stdout_bytes);
	write_int_key(w, "stderr_bytes", (long long)r->stderr_bytes);
	write_bool_key(w, "stdout_truncated", r->stdout_truncated);
	write_bool_key(w, "stderr_truncated", r->stderr_truncated);
	write_bool_key(w, "output_limit_hit", r->output_limit_hit);
	write_bool_key(w, "output_stalled", r->output_stalled);
	kiwi_jw_key(w, "output_stalled_ms");
	kiwi_jw_fixed(w, us_to_ms(r->output_stalled_ns / 1000), 3);
	write_int_key(w, "output_dropped_bytes", (long long)r->output_dropped);
	write_bool_key(w, "disk_full", r->disk_full);
	kiwi_jw_key(w, "disk_used_kib");
	r->started ? kiwi_jw_int(w, (long long)r->disk_used_kib) : kiwi_jw_null(w);
	write_cgroup(w, r);
	write_mechanisms(w, r);
	kiwi_jw_key(w, "landlock_abi");
	r->landlock_abi ? kiwi_jw_int(w, r->landlock_abi) : kiwi_jw_null(w);
	kiwi_jw_key(w, "network");
	const char *network = r->network ? r->network : r->egress ? "egress" : r->net_audit ? "audit" : "none";
	kiwi_jw_string(w, network);
	/* egress without a module of ours (through kiwi-helper, or failed
	 * before it was made): the fields, empty */
	if (!strcmp(network, "egress") && r->egress_tally)  /* a session's exec: its own attempts */
		kiwi_egress_write_tally(r->egress_tally, w);
	else if (!strcmp(network, "egress"))   /* the audit's fields too */
		kiwi_egress_write_verdict(r->egress ? r->egress : kiwi_helper_egress(r->helper), w);
	else if (r->net_audit)
		kiwi_net_audit_write_verdict(w, &r->net_attempts);
}

int kiwi_verdict_write(int fd, const struct kiwi_verdict *v, kiwi_err *err)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	if (!w)
		return kiwi_error(err, ENOMEM, "verdict", "cannot allocate the verdict");
	const struct kiwi_sandbox_result *r = v->result;

	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "version");
	kiwi_jw_int(w, KIWI_VERDICT_VERSION);
	kiwi_jw_key(w, "exit_code");
	kiwi_jw_int(w, v->exit_code);
	kiwi_jw_key(w, "signal");
	if (r->signal)
		kiwi_jw_int(w, r->signal);
	else
		kiwi_jw_null(w);
	kiwi_jw_key(w, "started");
	kiwi_jw_bool(w, r->started);
	kiwi_jw_key(w, "started_at");
	write_started_at(w, r);
	kiwi_jw_key(w, "wall_ms");
	kiwi_jw_fixed(w, us_to_ms(r->wall_ns / 1000), 3);
	kiwi_jw_key(w, "cpu_user_ms");
	kiwi_jw_fixed(w, us_to_ms(r->cpu_user_us), 3);
	kiwi_jw_key(w, "cpu_sys_ms");
	kiwi_jw_fixed(w, us_to_ms(r->cpu_sys_us), 3);
	kiwi_jw_key(w, "cpu_usage_ms");
	kiwi_jw_fixed(w, us_to_ms(r->cpu_user_us + r->cpu_sys_us), 3);
	write_bounds(w, r);
	kiwi_jw_key(w, "error");
	write_error(w, v->error);
	kiwi_jw_key(w, "cleanup_error");
	write_error(w, r->cleanup_failed ? &r->cleanup_error : NULL);
	if (v->extra)
		v->extra(w, v->extra_ctx);
	kiwi_jw_close_object(w);

	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	for (size_t off = 0; off <= len;) {
		const char *p = off < len ? text + off : "\n";
		size_t want = off < len ? len - off : 1;
		ssize_t n = write(fd, p, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return kiwi_error(err, n < 0 ? errno : EIO, "verdict", "cannot write the verdict");
		off += (size_t)n;
	}
	return 0;
}
