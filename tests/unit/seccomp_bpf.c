/* SPDX-License-Identifier: Apache-2.0 */
#include "seccomp_bpf.h"

#include <stddef.h>
#include <string.h>

static int load_word(const struct seccomp_data *d, uint32_t off, uint32_t *out)
{
	/* The kernel only allows aligned 32-bit loads inside seccomp_data. */
	if (off % 4 || off + 4 > sizeof(*d))
		return -1;
	memcpy(out, (const char *)d + off, 4);
	return 0;
}

static int alu(uint16_t op, uint32_t *a, uint32_t v)
{
	switch (op) {
	case BPF_ADD: *a += v; return 0;
	case BPF_SUB: *a -= v; return 0;
	case BPF_MUL: *a *= v; return 0;
	case BPF_DIV: if (!v) return -1; *a /= v; return 0;
	case BPF_MOD: if (!v) return -1; *a %= v; return 0;
	case BPF_AND: *a &= v; return 0;
	case BPF_OR: *a |= v; return 0;
	case BPF_XOR: *a ^= v; return 0;
	case BPF_LSH: *a = v < 32 ? *a << v : 0; return 0;
	case BPF_RSH: *a = v < 32 ? *a >> v : 0; return 0;
	case BPF_NEG: *a = -*a; return 0;
	default: return -1;
	}
}

static int jump(uint16_t op, uint32_t a, uint32_t v, int *taken)
{
	switch (op) {
	case BPF_JEQ: *taken = a == v; return 0;
	case BPF_JGT: *taken = a > v; return 0;
	case BPF_JGE: *taken = a >= v; return 0;
	case BPF_JSET: *taken = (a & v) != 0; return 0;
	default: return -1;
	}
}

uint32_t seccomp_bpf_run(const struct sock_fprog *prog, const struct seccomp_data *d, const char **bad)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	*bad = NULL;
	for (uint32_t pc = 0; pc < prog->len; pc++) {
		const struct sock_filter *f = &prog->filter[pc];
		uint32_t src = BPF_SRC(f->code) == BPF_X ? x : f->k;
		int taken;
		switch (BPF_CLASS(f->code)) {
		case BPF_LD:
			if (BPF_MODE(f->code) == BPF_ABS && BPF_SIZE(f->code) == BPF_W) {
				if (load_word(d, f->k, &a) < 0)
					return *bad = "load outside seccomp_data", 0;
			} else if (BPF_MODE(f->code) == BPF_IMM) {
				a = f->k;
			} else if (BPF_MODE(f->code) == BPF_MEM && f->k < BPF_MEMWORDS) {
				a = mem[f->k];
			} else if (BPF_MODE(f->code) == BPF_LEN) {
				a = sizeof(*d);
			} else {
				return *bad = "unsupported load", 0;
			}
			break;
		case BPF_LDX:
			if (BPF_MODE(f->code) == BPF_IMM)
				x = f->k;
			else if (BPF_MODE(f->code) == BPF_MEM && f->k < BPF_MEMWORDS)
				x = mem[f->k];
			else if (BPF_MODE(f->code) == BPF_LEN)
				x = sizeof(*d);
			else
				return *bad = "unsupported load into X", 0;
			break;
		case BPF_ST:
		case BPF_STX:
			if (f->k >= BPF_MEMWORDS)
				return *bad = "store outside scratch memory", 0;
			mem[f->k] = BPF_CLASS(f->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			if (alu(BPF_OP(f->code), &a, src) < 0)
				return *bad = "bad ALU operation", 0;
			break;
		case BPF_JMP:
			if (BPF_OP(f->code) == BPF_JA) {
				pc += f->k;
				break;
			}
			if (jump(BPF_OP(f->code), a, src, &taken) < 0)
				return *bad = "bad jump", 0;
			pc += taken ? f->jt : f->jf;
			break;
		case BPF_RET:
			return BPF_RVAL(f->code) == BPF_A ? a : f->k;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			return *bad = "unknown instruction class", 0;
		}
	}
	return *bad = "ran off the end of the program", 0;
}
