/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "kiwi/err.h"

Test(err, sets_fields_and_returns_minus_one)
{
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_error(&e, ENOENT, "rootfs", "cannot use `%s`", "/x"), -1);
	cr_assert_eq(e.errnum, ENOENT);
	cr_assert_str_eq(e.step, "rootfs");
	cr_assert_str_eq(e.msg, "cannot use `/x`");
}

Test(err, null_err_is_allowed)
{
	cr_assert_eq(kiwi_error(NULL, EPERM, "x", "y"), -1);
	cr_assert_eq(kiwi_error_wrap(NULL, "z"), -1);
}

Test(err, format_includes_strerror_and_step)
{
	kiwi_err e = { 0 };
	char buf[256];
	kiwi_error(&e, ENOENT, "bind", "cannot use bind source `%s`", "/nope");
	kiwi_error_format(&e, buf, sizeof(buf));
	cr_assert_str_eq(buf, "bind: cannot use bind source `/nope`: No such file or directory");
	kiwi_error(&e, 0, "args", "no command");
	kiwi_error_format(&e, buf, sizeof(buf));
	cr_assert_str_eq(buf, "args: no command");
}

Test(err, wrap_prefixes_context)
{
	kiwi_err e = { 0 };
	kiwi_error(&e, EINVAL, "json", "malformed");
	kiwi_error_wrap(&e, "profile `%s`", "p.json");
	cr_assert_str_eq(e.msg, "profile `p.json`: malformed");
	cr_assert_str_eq(e.step, "json");
}

Test(err, overlong_messages_truncate_safely)
{
	kiwi_err e = { 0 };
	char big[2000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	kiwi_error(&e, E2BIG, "a-very-long-step-name-that-will-not-fit-at-all", "%s", big);
	cr_assert_eq(strlen(e.msg), KIWI_ERR_MSG_MAX - 1);
	cr_assert_eq(strlen(e.step), KIWI_ERR_STEP_MAX - 1);
	kiwi_error_wrap(&e, "%s", big);
	cr_assert_eq(strlen(e.msg), KIWI_ERR_MSG_MAX - 1);
	char out[64];
	kiwi_error_format(&e, out, sizeof(out));
	cr_assert_eq(strlen(out), sizeof(out) - 1);
}

Test(err, hint_for_userns_eperm)
{
	kiwi_err e = { 0 };
	kiwi_error(&e, EPERM, "clone3", "cannot create the sandbox's namespaces");
	cr_assert_not_null(kiwi_error_hint(&e));
	char buf[512];
	kiwi_error_format(&e, buf, sizeof(buf));
	cr_assert(strstr(buf, "user namespaces may be disabled") != NULL);
	kiwi_error(&e, EPERM, "mount", "x");
	cr_assert_null(kiwi_error_hint(&e));
}
