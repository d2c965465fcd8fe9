/* SPDX-License-Identifier: Apache-2.0 */
/* SipHash-2-4, from the paper's description. Written here rather than
 * taken from libcrypto: linking libcrypto into kiwi-run would cost every
 * sandbox start its dynamic loading, for one short MAC. Checked against
 * the paper's test vector in tests/unit/test_siphash.c. */
#include "kiwi/siphash.h"

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = rotl(v[1], 13) ^ v[0];
	v[0] = rotl(v[0], 32);
	v[2] += v[3];
	v[3] = rotl(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = rotl(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = rotl(v[1], 17) ^ v[2];
	v[2] = rotl(v[2], 32);
}

static void absorb(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	sip_round(v);
	v[0] ^= m;
}

uint64_t kiwi_siphash24(const uint8_t key[16], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
	uint64_t v[4] = { k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
			  k1 ^ 0x7465646279746573ull };
	size_t whole = len - len % 8;
	for (size_t i = 0; i < whole; i += 8)
		absorb(v, load_le64(p + i));
	uint64_t last = (uint64_t)(len & 0xff) << 56;
	for (size_t i = 0; i < len % 8; i++)
		last |= (uint64_t)p[whole + i] << (8 * i);
	absorb(v, last);
	v[2] ^= 0xff;
	for (int i = 0; i < 4; i++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}
