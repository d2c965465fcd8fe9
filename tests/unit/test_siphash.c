/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>

#include "kiwi/siphash.h"

/* The paper's example (appendix A): key 00..0f, message 00..0e. */
Test(siphash, the_papers_test_vector)
{
	uint8_t key[16], msg[15];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	cr_assert_eq(kiwi_siphash24(key, msg, sizeof(msg)), 0xa129ca6149be45e5ull);
}

Test(siphash, another_key_another_tag)
{
	uint8_t a[16] = { 0 }, b[16] = { 1 };
	cr_assert_neq(kiwi_siphash24(a, "entry", 5), kiwi_siphash24(b, "entry", 5));
	cr_assert_neq(kiwi_siphash24(a, "entry", 5), kiwi_siphash24(a, "entrz", 5));
}
