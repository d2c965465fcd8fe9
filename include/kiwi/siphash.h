/* SPDX-License-Identifier: Apache-2.0 */
/* SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed pseudo-random
 * function with a 128-bit key, used as a MAC where kiwi-run must tell its
 * own files from ones written by someone without the key. */
#ifndef KIWI_SIPHASH_H
#define KIWI_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t kiwi_siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
