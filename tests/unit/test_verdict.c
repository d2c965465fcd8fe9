/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kiwi/json.h"
#include "kiwi/verdict.h"

static kiwi_json *render(const struct kiwi_verdict *v)
{
	int fd = memfd_create("verdict", 0);
	cr_assert_geq(fd, 0);
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_verdict_write(fd, v, &e), 0, "%s", e.msg);
	char buf[4096];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	close(fd);
	cr_assert_gt(n, 1);
	cr_assert_eq(buf[n - 1], '\n', "one object, one line");
	cr_assert_null(memchr(buf, '\n', (size_t)n - 1));
	kiwi_json *j = kiwi_json_parse(buf, (size_t)n, &e);
	cr_assert_not_null(j, "%s", e.msg);
	return j;
}

Test(verdict, a_normal_run)
{
	struct kiwi_sandbox_result r = {
		.started = true, .exit_code = 3, .wall_ns = 1234567,
		.started_at = { .tv_sec = 1700000000, .tv_nsec = 5000 },
		.cpu_user_us = 1500, .cpu_sys_us = 2,
	};
	struct kiwi_verdict v = { .result = &r, .exit_code = 3 };
	_cleanup_json_ kiwi_json *j = render(&v);
	long long i;
	double d;
	cr_assert(kiwi_json_int(kiwi_json_get(j, "version"), &i) && i == KIWI_VERDICT_VERSION);
	cr_assert(kiwi_json_int(kiwi_json_get(j, "exit_code"), &i) && i == 3);
	cr_assert_eq(kiwi_json_type_of(kiwi_json_get(j, "signal")), KIWI_JSON_NULL);
	cr_assert_eq(kiwi_json_type_of(kiwi_json_get(j, "error")), KIWI_JSON_NULL);
	cr_assert(kiwi_json_double(kiwi_json_get(j, "wall_ms"), &d) && d > 1.233 && d < 1.236);
	cr_assert(kiwi_json_double(kiwi_json_get(j, "cpu_user_ms"), &d) && d == 1.5);
	cr_assert_str_eq(kiwi_json_string(kiwi_json_get(j, "started_at")), "2023-11-14T22:13:20.000005Z");
}

Test(verdict, a_signal_and_an_error)
{
	struct kiwi_sandbox_result r = { .started = false, .exit_code = -1, .signal = 9,
					 .started_at = { .tv_sec = 0, .tv_nsec = 999999999 } };
	kiwi_err e = { 0 };
	kiwi_error(&e, ENOENT, "rootfs", "cannot use rootfs `%s`", "/nope");
	struct kiwi_verdict v = { .result = &r, .error = &e, .exit_code = 125 };
	_cleanup_json_ kiwi_json *j = render(&v);
	long long i;
	cr_assert(kiwi_json_int(kiwi_json_get(j, "signal"), &i) && i == 9);
	cr_assert_str_eq(kiwi_json_string(kiwi_json_get(j, "started_at")), "1970-01-01T00:00:00.999999Z");
	kiwi_json *err = kiwi_json_get(j, "error");
	cr_assert_str_eq(kiwi_json_string(kiwi_json_get(err, "step")), "rootfs");
	cr_assert(kiwi_json_int(kiwi_json_get(err, "errno"), &i) && i == ENOENT);
	cr_assert(strstr(kiwi_json_string(kiwi_json_get(err, "message")), "/nope"));
}

Test(verdict, exit_status_convention)
{
	struct kiwi_sandbox_result r = { .exit_code = 7 };
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_sandbox_exit_status(&r, &e, false), 7);
	r.signal = 9;
	cr_assert_eq(kiwi_sandbox_exit_status(&r, &e, false), 137);
	kiwi_error(&e, ENOENT, "exec", "x");
	cr_assert_eq(kiwi_sandbox_exit_status(&r, &e, true), 127);
	kiwi_error(&e, EACCES, "exec", "x");
	cr_assert_eq(kiwi_sandbox_exit_status(&r, &e, true), 126);
	kiwi_error(&e, ENOENT, "rootfs", "x");
	cr_assert_eq(kiwi_sandbox_exit_status(&r, &e, true), 125);
}

Test(verdict, unwritable_fd_is_an_error)
{
	struct kiwi_sandbox_result r = { 0 };
	struct kiwi_verdict v = { .result = &r };
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_verdict_write(-1, &v, &e), -1);
	cr_assert_str_eq(e.step, "verdict");
	cr_assert_eq(e.errnum, EBADF);
}

Test(verdict, cleanup_error_is_reported_beside_the_result)
{
	struct kiwi_sandbox_result r = { .started = true, .exit_code = 0, .cleanup_failed = true };
	kiwi_error(&r.cleanup_error, EBUSY, "cgroup", "cannot remove `%s`", "/kiwi.slice/kiwi-x");
	struct kiwi_verdict v = { .result = &r, .exit_code = 0 };
	_cleanup_json_ kiwi_json *j = render(&v);
	cr_assert_eq(kiwi_json_type_of(kiwi_json_get(j, "error")), KIWI_JSON_NULL,
		     "a leak after a clean run is not the run's error");
	kiwi_json *c = kiwi_json_get(j, "cleanup_error");
	cr_assert_str_eq(kiwi_json_string(kiwi_json_get(c, "step")), "cgroup");
	long long e;
	cr_assert(kiwi_json_int(kiwi_json_get(c, "errno"), &e) && e == EBUSY);
	r.cleanup_failed = false;
	_cleanup_json_ kiwi_json *clean = render(&v);
	cr_assert_eq(kiwi_json_type_of(kiwi_json_get(clean, "cleanup_error")), KIWI_JSON_NULL);
}
