/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int kiwi_error(kiwi_err *err, int errnum, const char *step, const char *fmt, ...)
{
	if (!err)
		return -1;
	err->errnum = errnum;
	snprintf(err->step, sizeof(err->step), "%s", step ? step : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int kiwi_error_wrap(kiwi_err *err, const char *fmt, ...)
{
	if (!err)
		return -1;
	char prefix[KIWI_ERR_MSG_MAX];
	char old[KIWI_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncating a long chain of context is fine; losing the message is not. */
	size_t n = strnlen(prefix, sizeof(err->msg) - 1);
	memcpy(err->msg, prefix, n);
	size_t room = sizeof(err->msg) - n;
	if (room > 2) {
		memcpy(err->msg + n, ": ", 2);
		n += 2;
		size_t rest = strnlen(old, sizeof(err->msg) - n - 1);
		memcpy(err->msg + n, old, rest);
		n += rest;
	}
	err->msg[n] = '\0';
	return -1;
}

const char *kiwi_error_hint(const kiwi_err *err)
{
	if (!strcmp(err->step, "clone3") && (err->errnum == EPERM || err->errnum == ENOSPC))
		return "user namespaces may be disabled: check kernel.unprivileged_userns_clone, "
		       "user.max_user_namespaces and AppArmor's restrict_unprivileged_userns";
	if (!strcmp(err->step, "clone3") && err->errnum == ENOSYS)
		return "the kernel is older than 5.3 and lacks clone3";
	return NULL;
}

void kiwi_error_format(const kiwi_err *err, char *buf, size_t len)
{
	const char *hint = kiwi_error_hint(err);
	int n;
	if (err->errnum > 0)
		n = snprintf(buf, len, "%s: %s: %s", err->step, err->msg, strerror(err->errnum));
	else
		n = snprintf(buf, len, "%s: %s", err->step, err->msg);
	if (hint && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " (%s)", hint);
}
