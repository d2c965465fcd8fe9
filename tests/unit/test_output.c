/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "kiwi/output.h"

static size_t copy(const struct kiwi_tail *t, char *out)
{
	size_t n = kiwi_tail_copy(t, out);
	out[n] = '\0';
	return n;
}

Test(tail, keeps_everything_below_its_size)
{
	char buf[8], out[9];
	struct kiwi_tail t = { .buf = buf, .size = sizeof(buf) };
	kiwi_tail_add(&t, "abc", 3);
	kiwi_tail_add(&t, "de", 2);
	cr_assert_eq(copy(&t, out), 5);
	cr_assert_str_eq(out, "abcde");
}

Test(tail, keeps_the_last_bytes_across_the_wrap)
{
	char buf[8], out[9];
	struct kiwi_tail t = { .buf = buf, .size = sizeof(buf) };
	kiwi_tail_add(&t, "0123456", 7);
	kiwi_tail_add(&t, "789", 3);
	cr_assert_eq(copy(&t, out), 8);
	cr_assert_str_eq(out, "23456789");
	cr_assert_eq(t.written, 10);
}

Test(tail, a_chunk_larger_than_the_ring_keeps_its_end)
{
	char buf[4], out[5];
	struct kiwi_tail t = { .buf = buf, .size = sizeof(buf) };
	kiwi_tail_add(&t, "x", 1);
	kiwi_tail_add(&t, "abcdefghij", 10);
	cr_assert_eq(copy(&t, out), 4);
	cr_assert_str_eq(out, "ghij");
	cr_assert_eq(t.written, 11);
}

Test(tail, size_zero_keeps_nothing)
{
	struct kiwi_tail t = { 0 };
	kiwi_tail_add(&t, "abc", 3);
	cr_assert_eq(t.written, 0);
}
