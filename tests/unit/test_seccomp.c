/* SPDX-License-Identifier: Apache-2.0 */
/* Profile parsing, and what the compiled filters decide, checked by running
 * the BPF in a userspace interpreter (seccomp_bpf.c). The kernel-side load
 * is tested by tests/seccomp/test_seccomp_kernel.c. */
#include "kiwi/cleanup.h"
#include "kiwi/json.h"
#include "kiwi/seccomp.h"
#include "seccomp_bpf.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | (e))

static uint32_t decide(const struct kiwi_seccomp *f, uint32_t arch, int nr, uint64_t a0, uint64_t a1)
{
	struct seccomp_data d = { .nr = nr, .arch = arch, .args = { a0, a1 } };
	const char *bad;
	uint32_t ret = seccomp_bpf_run(kiwi_seccomp_program(f), &d, &bad);
	cr_assert_null(bad, "the filter is invalid BPF: %s (nr %d)", bad ? bad : "", nr);
	return ret;
}

static struct kiwi_seccomp *compile_default(void)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	cr_assert_eq(kiwi_seccomp_compile_default(&f, &err), 0, "default profile: %s", err.msg);
	cr_assert_not_null(f);
	return f;
}

static struct kiwi_seccomp *compile_text(const char *text)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	cr_assert_eq(kiwi_seccomp_compile_json(text, strlen(text), "test", &f, &err), 0,
		     "profile %s: %s", text, err.msg);
	return f;
}

/* ---- the default profile, decision by decision ---- */

struct expect {
	const char *what;
	int nr;
	uint64_t a0, a1;
	uint32_t ret;
};

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
		  CLONE_NEWPID | CLONE_NEWNET)
#define THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | \
		      CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)

static const struct expect native[] = {
	{ "read", SYS_read, 0, 0, SECCOMP_RET_ALLOW },
	{ "execve", SYS_execve, 0, 0, SECCOMP_RET_ALLOW },
	{ "exit_group", SYS_exit_group, 0, 0, SECCOMP_RET_ALLOW },
	{ "keyctl", SYS_keyctl, 0, 0, RET_ERRNO(EPERM) },
	{ "add_key", SYS_add_key, 0, 0, RET_ERRNO(EPERM) },
	{ "request_key", SYS_request_key, 0, 0, RET_ERRNO(EPERM) },
	{ "bpf", SYS_bpf, 0, 0, RET_ERRNO(EPERM) },
	{ "userfaultfd", SYS_userfaultfd, 0, 0, RET_ERRNO(EPERM) },
	{ "perf_event_open", SYS_perf_event_open, 0, 0, RET_ERRNO(EPERM) },
	{ "ptrace", SYS_ptrace, 0, 0, RET_ERRNO(EPERM) },
	{ "kexec_load", SYS_kexec_load, 0, 0, RET_ERRNO(EPERM) },
	{ "finit_module", SYS_finit_module, 0, 0, RET_ERRNO(EPERM) },
	{ "mount", SYS_mount, 0, 0, RET_ERRNO(EPERM) },
	{ "umount2", SYS_umount2, 0, 0, RET_ERRNO(EPERM) },
	{ "pivot_root", SYS_pivot_root, 0, 0, RET_ERRNO(EPERM) },
	{ "fsopen", SYS_fsopen, 0, 0, RET_ERRNO(EPERM) },
	{ "open_tree", SYS_open_tree, 0, 0, RET_ERRNO(EPERM) },
	{ "mount_setattr", SYS_mount_setattr, 0, 0, RET_ERRNO(EPERM) },
	{ "open_by_handle_at", SYS_open_by_handle_at, 0, 0, RET_ERRNO(EPERM) },
	{ "name_to_handle_at", SYS_name_to_handle_at, 0, 0, RET_ERRNO(EPERM) },
	{ "setns", SYS_setns, 0, 0, RET_ERRNO(EPERM) },
	{ "io_uring_setup", SYS_io_uring_setup, 0, 0, RET_ERRNO(EPERM) },
	{ "acct", SYS_acct, 0, 0, RET_ERRNO(EPERM) },
	{ "swapon", SYS_swapon, 0, 0, RET_ERRNO(EPERM) },
	{ "reboot", SYS_reboot, 0, 0, RET_ERRNO(EPERM) },
	{ "syslog", SYS_syslog, 0, 0, RET_ERRNO(EPERM) },
	{ "settimeofday", SYS_settimeofday, 0, 0, RET_ERRNO(EPERM) },
	{ "clock_settime", SYS_clock_settime, 0, 0, RET_ERRNO(EPERM) },
	{ "adjtimex", SYS_adjtimex, 0, 0, RET_ERRNO(EPERM) },
	{ "known but unlisted (tuxcall)", SYS_tuxcall, 0, 0, RET_ERRNO(EPERM) },
	{ "clone, fork-like", SYS_clone, SIGCHLD, 0, SECCOMP_RET_ALLOW },
	{ "clone, thread", SYS_clone, THREAD_FLAGS, 0, SECCOMP_RET_ALLOW },
	{ "clone, vfork", SYS_clone, CLONE_VM | CLONE_VFORK | SIGCHLD, 0, SECCOMP_RET_ALLOW },
	{ "clone CLONE_NEWUSER", SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, RET_ERRNO(EPERM) },
	{ "clone CLONE_NEWNS", SYS_clone, CLONE_NEWNS | SIGCHLD, 0, RET_ERRNO(EPERM) },
	{ "clone CLONE_NEWNET", SYS_clone, CLONE_NEWNET, 0, RET_ERRNO(EPERM) },
	{ "clone every ns flag", SYS_clone, NS_FLAGS, 0, RET_ERRNO(EPERM) },
	{ "clone3", SYS_clone3, 0, 0, RET_ERRNO(ENOSYS) },
	{ "unshare CLONE_FS", SYS_unshare, CLONE_FS | CLONE_FILES, 0, SECCOMP_RET_ALLOW },
	{ "unshare CLONE_NEWUSER", SYS_unshare, CLONE_NEWUSER, 0, RET_ERRNO(EPERM) },
	{ "unshare CLONE_NEWTIME", SYS_unshare, 0x80, 0, RET_ERRNO(EPERM) },
	{ "ioctl TCGETS", SYS_ioctl, 0, TCGETS, SECCOMP_RET_ALLOW },
	{ "ioctl FIONREAD", SYS_ioctl, 3, FIONREAD, SECCOMP_RET_ALLOW },
	{ "ioctl TIOCSTI", SYS_ioctl, 0, TIOCSTI, RET_ERRNO(EPERM) },
	{ "ioctl TIOCSTI, high bits set", SYS_ioctl, 0, 0xdead00000000ull | TIOCSTI, RET_ERRNO(EPERM) },
	{ "ioctl TIOCLINUX", SYS_ioctl, 0, TIOCLINUX, RET_ERRNO(EPERM) },
	{ "ioctl, sign-extended request", SYS_ioctl, 0, 0xffffffff80085401ull, SECCOMP_RET_ALLOW },
	{ "socket AF_UNIX", SYS_socket, AF_UNIX, SOCK_STREAM, SECCOMP_RET_ALLOW },
	{ "socket AF_INET", SYS_socket, AF_INET, SOCK_DGRAM, SECCOMP_RET_ALLOW },
	{ "socket AF_INET6", SYS_socket, AF_INET6, SOCK_STREAM, SECCOMP_RET_ALLOW },
	{ "socket AF_NETLINK", SYS_socket, AF_NETLINK, SOCK_RAW, SECCOMP_RET_ALLOW },
	{ "socket AF_PACKET", SYS_socket, AF_PACKET, SOCK_RAW, RET_ERRNO(EPERM) },
	{ "socket AF_VSOCK", SYS_socket, AF_VSOCK, SOCK_STREAM, RET_ERRNO(EPERM) },
	{ "personality query", SYS_personality, 0xffffffff, 0, SECCOMP_RET_ALLOW },
	{ "personality PER_LINUX", SYS_personality, PER_LINUX, 0, SECCOMP_RET_ALLOW },
	{ "personality PER_LINUX32", SYS_personality, PER_LINUX32, 0, SECCOMP_RET_ALLOW },
	{ "personality ADDR_NO_RANDOMIZE", SYS_personality, ADDR_NO_RANDOMIZE, 0, RET_ERRNO(EPERM) },
	{ "personality READ_IMPLIES_EXEC", SYS_personality, READ_IMPLIES_EXEC, 0, RET_ERRNO(EPERM) },
	{ "newer than the profile (457)", 457, 0, 0, RET_ERRNO(ENOSYS) },
	{ "newer than the profile (1000)", 1000, 0, 0, RET_ERRNO(ENOSYS) },
	{ "last number below the x32 bit", 0x3fffffff, 0, 0, RET_ERRNO(ENOSYS) },
	{ "x32 read", 0x40000000, 0, 0, SECCOMP_RET_KILL_PROCESS },
	{ "x32 keyctl", 0x40000000 | SYS_keyctl, 0, 0, SECCOMP_RET_KILL_PROCESS },
	{ "x32 execve (520)", 0x40000000 | 520, 0, 0, SECCOMP_RET_KILL_PROCESS },
};

Test(seccomp_default, decides_native_syscalls)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_default();
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(native); i++) {
		const struct expect *e = &native[i];
		uint32_t got = decide(f, AUDIT_ARCH_X86_64, e->nr, e->a0, e->a1);
		cr_expect_eq(got, e->ret, "%s: got %#x, want %#x", e->what, got, e->ret);
	}
}

Test(seccomp_default, kills_i386_entry_points)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_default();
	static const int nrs[] = { 3 /* read */, 11 /* execve */, 288 /* keyctl */, 1 /* exit */ };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(nrs); i++)
		cr_expect_eq(decide(f, AUDIT_ARCH_I386, nrs[i], 0, 0), SECCOMP_RET_KILL_PROCESS,
			     "i386 syscall %d", nrs[i]);
	cr_expect_eq(decide(f, AUDIT_ARCH_AARCH64, 63, 0, 0), SECCOMP_RET_KILL_PROCESS);
}

/* The embedded copy must be the file in the tree; a stale object would mean
 * the profile documented is not the one enforced. */
Test(seccomp_default, embedded_copy_matches_source)
{
	size_t len;
	const char *text = kiwi_seccomp_default_text(&len);
	FILE *fp = fopen(SECCOMP_PROFILE_DIR "/default.json", "r");
	cr_assert_not_null(fp, "cannot open %s/default.json", SECCOMP_PROFILE_DIR);
	static char file[1 << 20];
	size_t n = fread(file, 1, sizeof(file), fp);
	fclose(fp);
	cr_assert_eq(n, len, "embedded %zu bytes, file has %zu: rebuild (touch src/sandbox/seccomp.c)", len, n);
	cr_assert(!memcmp(file, text, len), "embedded default differs from the file: rebuild");
}

Test(seccomp_default, loads_with_no_flags)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_default();
	cr_assert_eq(kiwi_seccomp_flags(f), 0u);
	cr_assert_lt(kiwi_seccomp_program(f)->len, 4096);
}

/* ---- profiles of our own ---- */

Test(seccomp_profile, denylist_lets_new_syscalls_through_but_not_x32)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_text(
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"keyctl\"],"
		"\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":13}]}");
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_keyctl, 0, 0), RET_ERRNO(EACCES));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_read, 0, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, 1000, 0, 0), SECCOMP_RET_ALLOW);
	/* x32 keyctl would slip past a denylist if the x32 ABI were open. */
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, 0x40000000 | SYS_keyctl, 0, 0), SECCOMP_RET_KILL_PROCESS);
}

Test(seccomp_profile, enosys_line_follows_highest_named_syscall)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_text(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\",\"write\"],"
		"\"action\":\"SCMP_ACT_ALLOW\"}, {\"names\":[\"getpid\"],\"action\":\"SCMP_ACT_KILL\"}]}");
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_read, 0, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_getpid, 0, 0), SECCOMP_RET_KILL_THREAD);
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_close, 0, 0), RET_ERRNO(EPERM));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_getpid + 1, 0, 0), RET_ERRNO(ENOSYS));
}

Test(seccomp_profile, listed_arches_are_filtered_not_killed)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_text(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":38,"
		"\"architectures\":[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"],"
		"\"flags\":[\"SECCOMP_FILTER_FLAG_LOG\"],"
		"\"syscalls\":[{\"names\":[\"read\",\"exit_group\"],\"action\":\"SCMP_ACT_ALLOW\"}]}");
	cr_expect_eq(kiwi_seccomp_flags(f), SECCOMP_FILTER_FLAG_LOG);
	cr_expect_eq(decide(f, AUDIT_ARCH_I386, 3, 0, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_I386, 4, 0, 0), RET_ERRNO(ENOSYS));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, 0x40000000, 0, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, 0x40000001, 0, 0), RET_ERRNO(ENOSYS));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, 0x40000000 | 600, 0, 0), RET_ERRNO(ENOSYS));
}

Test(seccomp_profile, unknown_syscall_names_are_skipped)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_text(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"no_such_call\",\"read\"],"
		"\"action\":\"SCMP_ACT_ALLOW\"}]}");
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_read, 0, 0), SECCOMP_RET_ALLOW);
}

Test(seccomp_profile, docker_includes_and_excludes)
{
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_text(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":["
		"{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\"},"
		"{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}},"
		"{\"names\":[\"write\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"arches\":[\"amd64\"]}},"
		"{\"names\":[\"close\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"arches\":[\"s390x\"]}},"
		"{\"names\":[\"getpid\"],\"action\":\"SCMP_ACT_ALLOW\",\"excludes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}},"
		"{\"names\":[\"open\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"minKernel\":\"99.0\"}},"
		"{\"names\":[\"stat\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"minKernel\":\"3.0\"}}]}");
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_mount, 0, 0), RET_ERRNO(EPERM));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_write, 0, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_close, 0, 0), RET_ERRNO(EPERM));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_getpid, 0, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_open, 0, 0), RET_ERRNO(EPERM));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_stat, 0, 0), SECCOMP_RET_ALLOW);
}

Test(seccomp_profile, corpus_docker_style_profile)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	cr_assert_eq(kiwi_seccomp_compile_file(SECCOMP_CORPUS_DIR "/docker-style.json", &f, &err), 0,
		     "%s", err.msg);
	/* Its archMap adds i386 and x32 on amd64: filtered, not killed. */
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_read, 0, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_keyctl, 0, 0), RET_ERRNO(EPERM));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_clone, CLONE_NEWUSER, 0), RET_ERRNO(EPERM));
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_clone, SIGCHLD, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(decide(f, AUDIT_ARCH_I386, 3, 0, 0), SECCOMP_RET_ALLOW);
	kiwi_seccomp_free(f);
}

/* ---- malformed profiles: each refused, naming the field ---- */

struct malformed {
	const char *json;
	const char *needle;  /* must appear in the error message */
};

static const struct malformed malformed[] = {
	{ "", "malformed JSON" },
	{ "{\"defaultAction\":", "malformed JSON" },
	{ "[]", "top level: must be an object" },
	{ "{}", "defaultAction: missing" },
	{ "{\"defaultAction\":\"SCMP_ACT_NOPE\"}", "defaultAction: unknown action `SCMP_ACT_NOPE`" },
	{ "{\"defaultAction\":1}", "defaultAction: must be a string, not number" },
	{ "{\"defaultAction\":\"SCMP_ACT_NOTIFY\"}", "SCMP_ACT_NOTIFY is not supported" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"defaultErrnoRet\":1}", "defaultErrnoRet: only SCMP_ACT_ERRNO" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":-1}", "defaultErrnoRet: must be an integer from 0 to 4095" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":65534}", "defaultErrnoRet: must be an integer" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":\"1\"}", "defaultErrnoRet: must be an integer" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscall\":[]}", "unknown field `syscall`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":[\"SCMP_ARCH_PDP11\"]}",
	  "architectures[0]: unknown architecture `SCMP_ARCH_PDP11`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":\"SCMP_ARCH_X86\"}", "architectures: must be an array" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":[\"x86_64\"]}", "unknown architecture `x86_64`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"flags\":[\"SECCOMP_FILTER_FLAG_NEW_LISTENER\"]}", "flags[0]: unknown or unsupported flag" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"listenerPath\":\"/run/agent.sock\"}", "listenerPath: seccomp notification" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":{}}", "syscalls: must be an array, not object" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[1]}", "syscalls[0]: must be an object, not number" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"action\":\"SCMP_ACT_ALLOW\"}]}", "syscalls[0]: has neither `names` nor `name`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"]}]}", "syscalls[0].action: must be a string, not null" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":\"read\",\"action\":\"SCMP_ACT_ALLOW\"}]}", "syscalls[0].names: must be an array" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[7],\"action\":\"SCMP_ACT_ALLOW\"}]}", "syscalls[0].names[0]: must be a string" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALOW\"}]}", "syscalls[0].action: unknown action `SCMP_ACT_ALOW`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_KILL\",\"errnoRet\":1}]}", "syscalls[0].errnoRet: only SCMP_ACT_ERRNO" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"arg\":[]}]}", "syscalls[0]: unknown field `arg`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":6,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]}]}", "syscalls[0].args[0].index: must be an integer from 0 to 5" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"op\":\"SCMP_CMP_EQ\"}]}]}", "syscalls[0].args[0].value: must be an integer" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1.5,\"op\":\"SCMP_CMP_EQ\"}]}]}", "syscalls[0].args[0].value: must be an integer" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_ABOUT\"}]}]}", "syscalls[0].args[0].op: unknown operator `SCMP_CMP_ABOUT`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\",\"valuetwo\":2}]}]}", "syscalls[0].args[0]: unknown field `valuetwo`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":1,\"value\":1,\"op\":\"SCMP_CMP_NE\"},{\"index\":1,\"value\":2,\"op\":\"SCMP_CMP_NE\"}]}]}", "syscalls[0].args[1]: a second comparison on argument 1" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"kernel\":\"5\"}}]}", "syscalls[0].includes: unknown field `kernel`" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"minKernel\":\"latest\"}}]}", "minKernel `latest` is not a kernel version" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\",\"subArchitectures\":[\"SCMP_ARCH_Z80\"]}]}", "archMap[0].subArchitectures[0]: unknown architecture" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultAction\":\"SCMP_ACT_ALLOW\"}", "repeats a key" },
};

Test(seccomp_profile, malformed_profiles_name_the_field)
{
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(malformed); i++) {
		const struct malformed *m = &malformed[i];
		struct kiwi_seccomp *f = (struct kiwi_seccomp *)&f;
		kiwi_err err = { 0 };
		int rc = kiwi_seccomp_compile_json(m->json, strlen(m->json), "bad.json", &f, &err);
		cr_expect_eq(rc, -1, "accepted: %s", m->json);
		cr_expect_null(f, "left a filter behind for: %s", m->json);
		cr_expect_not_null(strstr(err.msg, m->needle), "%s\n  error: %s\n  want:  %s", m->json, err.msg,
				   m->needle);
		cr_expect_not_null(strstr(err.msg, "bad.json"), "error does not name the profile: %s", err.msg);
		cr_expect_str_eq(err.step, err.errnum ? "json" : "seccomp", "%s", m->json);
		if (!rc)
			kiwi_seccomp_free(f);
	}
}

Test(seccomp_profile, missing_file_is_an_error)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	cr_assert_eq(kiwi_seccomp_compile_file("/nonexistent/profile.json", &f, &err), -1);
	cr_expect_eq(err.errnum, ENOENT);
	cr_expect_not_null(strstr(err.msg, "/nonexistent/profile.json"), "%s", err.msg);
}

/* ---- the cache of compiled programs ---- */

static char cache_dir[64];

/* The built-in default comes precompiled and never meets the cache; the
 * cache is exercised with the same text through the runtime compiler. */
static int compile_default_json(struct kiwi_seccomp **f, kiwi_err *err)
{
	size_t len;
	const char *text = kiwi_seccomp_default_text(&len);
	return kiwi_seccomp_compile_json(text, len, "default", f, err);
}

static struct kiwi_seccomp *compile_default_text(void)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	cr_assert_eq(compile_default_json(&f, &err), 0, "default profile: %s", err.msg);
	return f;
}

static void use_temp_cache(void)
{
	snprintf(cache_dir, sizeof(cache_dir), "/tmp/kiwi-seccomp-cache-XXXXXX");
	cr_assert_not_null(mkdtemp(cache_dir));
	setenv("KIWI_SECCOMP_CACHE_DIR", cache_dir, 1);
}

static void drop_temp_cache(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache_dir);
	cr_expect_eq(system(cmd), 0);
}

/* The one entry in the cache directory. */
static void entry_path(char *buf, size_t len)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "ls '%s'/*.bpf", cache_dir);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	cr_assert_not_null(fgets(buf, (int)len, p), "no cache entry in %s", cache_dir);
	buf[strcspn(buf, "\n")] = '\0';
	pclose(p);
}

/* Turns every EPERM return in the entry's program (the n_insns
 * instructions before the 8-byte MAC) into ALLOW, and with flip_text also changes a byte of the
 * stored profile text. */
static void tamper(bool flip_text)
{
	_cleanup_seccomp_ struct kiwi_seccomp *fresh = NULL;
	kiwi_err err = { 0 };
	setenv("KIWI_SECCOMP_CACHE_DIR", "off", 1);
	cr_assert_eq(compile_default_json(&fresh, &err), 0);
	setenv("KIWI_SECCOMP_CACHE_DIR", cache_dir, 1);
	long n = kiwi_seccomp_program(fresh)->len;
	char file[256];
	entry_path(file, sizeof(file));
	FILE *fp = fopen(file, "r+");
	cr_assert_not_null(fp);
	for (long i = 0; i < n; i++) {
		struct sock_filter ins;
		long at = -(n - i) * (long)sizeof(ins) - 8;
		cr_assert_eq(fseek(fp, at, SEEK_END), 0);
		cr_assert_eq(fread(&ins, sizeof(ins), 1, fp), 1u);
		if (ins.code != (BPF_RET | BPF_K) || ins.k != RET_ERRNO(EPERM))
			continue;
		ins.k = SECCOMP_RET_ALLOW;
		cr_assert_eq(fseek(fp, at, SEEK_END), 0);
		cr_assert_eq(fwrite(&ins, sizeof(ins), 1, fp), 1u);
	}
	if (flip_text) {
		cr_assert_eq(fseek(fp, 600, SEEK_SET), 0);
		cr_assert_eq(fputc('~', fp), '~');
	}
	fclose(fp);
}

static bool same_program(const struct kiwi_seccomp *a, const struct kiwi_seccomp *b)
{
	const struct sock_fprog *pa = kiwi_seccomp_program(a), *pb = kiwi_seccomp_program(b);
	return pa->len == pb->len && kiwi_seccomp_flags(a) == kiwi_seccomp_flags(b) &&
	       !memcmp(pa->filter, pb->filter, pa->len * sizeof(*pa->filter));
}

static struct kiwi_seccomp *fresh_default(void)
{
	setenv("KIWI_SECCOMP_CACHE_DIR", "off", 1);
	struct kiwi_seccomp *f = compile_default_text();
	setenv("KIWI_SECCOMP_CACHE_DIR", cache_dir, 1);
	return f;
}

Test(seccomp_cache, hit_gives_the_same_program, .init = use_temp_cache, .fini = drop_temp_cache)
{
	_cleanup_seccomp_ struct kiwi_seccomp *fresh = fresh_default();
	_cleanup_seccomp_ struct kiwi_seccomp *miss = compile_default_text();
	char file[256];
	entry_path(file, sizeof(file));
	struct stat st;
	cr_assert_eq(stat(file, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0600);
	_cleanup_seccomp_ struct kiwi_seccomp *hit = compile_default_text();
	cr_expect(same_program(fresh, miss));
	cr_expect(same_program(fresh, hit));
}

/* Proves the cache is really read, so the refusals below mean something:
 * a hit leaves the entry alone, a miss writes a new one (a new inode). */
static ino_t entry_inode(void)
{
	char file[256];
	struct stat st;
	entry_path(file, sizeof(file));
	cr_assert_eq(stat(file, &st), 0);
	return st.st_ino;
}

Test(seccomp_cache, trusted_entry_is_used, .init = use_temp_cache, .fini = drop_temp_cache)
{
	kiwi_seccomp_free(compile_default_text());
	ino_t stored = entry_inode();
	kiwi_seccomp_free(compile_default_text());
	cr_expect_eq(entry_inode(), stored, "the entry was compiled again, not read");
}

/* The entry's MAC: a program rewritten by someone without the key (a
 * sandbox given the directory) is compiled again, and replaced. */
Test(seccomp_cache, rewritten_program_is_refused, .init = use_temp_cache, .fini = drop_temp_cache)
{
	kiwi_seccomp_free(compile_default_text());
	ino_t stored = entry_inode();
	tamper(false);
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_default_text();
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_tuxcall, 0, 0), RET_ERRNO(EPERM));
	cr_expect_neq(entry_inode(), stored);
}

Test(seccomp_cache, entry_for_other_text_is_ignored, .init = use_temp_cache, .fini = drop_temp_cache)
{
	kiwi_seccomp_free(compile_default_text());
	tamper(true);
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_default_text();
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_tuxcall, 0, 0), RET_ERRNO(EPERM));
}

Test(seccomp_cache, entry_others_can_write_is_ignored, .init = use_temp_cache, .fini = drop_temp_cache)
{
	kiwi_seccomp_free(compile_default_text());
	tamper(false);
	char file[256];
	entry_path(file, sizeof(file));
	cr_assert_eq(chmod(file, 0666), 0);
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_default_text();
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_tuxcall, 0, 0), RET_ERRNO(EPERM));
}

Test(seccomp_cache, directory_others_can_write_is_ignored, .init = use_temp_cache, .fini = drop_temp_cache)
{
	kiwi_seccomp_free(compile_default_text());
	tamper(false);
	cr_assert_eq(chmod(cache_dir, 0777), 0);
	_cleanup_seccomp_ struct kiwi_seccomp *f = compile_default_text();
	cr_expect_eq(decide(f, AUDIT_ARCH_X86_64, SYS_tuxcall, 0, 0), RET_ERRNO(EPERM));
}

Test(seccomp_cache, malformed_profiles_are_not_stored, .init = use_temp_cache, .fini = drop_temp_cache)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	cr_assert_eq(kiwi_seccomp_compile_json("{}", 2, "bad", &f, &err), -1);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", cache_dir);
	cr_expect_eq(system(cmd), 0, "something was cached for a malformed profile");
}

Test(seccomp_profile, file_from_a_pipe)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	const char text[] = "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}";
	cr_assert_eq(write(fds[1], text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fds[1]);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
	cr_expect_eq(kiwi_seccomp_compile_file(path, &f, &err), 0, "%s", err.msg);
	close(fds[0]);
	kiwi_seccomp_free(f);
}

Test(seccomp_profile, oversized_file_is_refused)
{
	struct kiwi_seccomp *f = NULL;
	kiwi_err err = { 0 };
	cr_assert_eq(kiwi_seccomp_compile_file("/dev/zero", &f, &err), -1);
	cr_expect_eq(err.errnum, EFBIG, "%s", err.msg);
	cr_expect_null(f);
}

/* ---- the documentation keeps up with the profile ---- */

static char *slurp(const char *file)
{
	FILE *fp = fopen(file, "r");
	cr_assert_not_null(fp, "cannot open %s", file);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	return buf;
}

/* Every syscall the default profile refuses by name is named in
 * kiwi-run-seccomp(5), where its group's reason is given. */
Test(seccomp_default, man_page_names_every_refused_syscall)
{
	size_t len;
	const char *text = kiwi_seccomp_default_text(&len);
	kiwi_err err = { 0 };
	_cleanup_json_ kiwi_json *j = kiwi_json_parse(text, len, &err);
	cr_assert_not_null(j, "%s", err.msg);
	const char *man = slurp(SECCOMP_MAN_PAGE);
	const kiwi_json *rules = kiwi_json_get(j, "syscalls");
	size_t checked = 0;
	for (size_t i = 0; i < kiwi_json_len(rules); i++) {
		const kiwi_json *r = kiwi_json_at(rules, i);
		if (strcmp(kiwi_json_string(kiwi_json_get(r, "action")), "SCMP_ACT_ERRNO"))
			continue;
		const kiwi_json *names = kiwi_json_get(r, "names");
		for (size_t k = 0; k < kiwi_json_len(names); k++, checked++) {
			const char *name = kiwi_json_string(kiwi_json_at(names, k));
			/* In roff, an underscore is literal; match the bare name. */
			cr_expect_not_null(strstr(man, name), "%s is refused but not in the man page", name);
		}
	}
	cr_expect_gt(checked, 40u);
}

Test(seccomp_cache, stays_bounded, .init = use_temp_cache, .fini = drop_temp_cache)
{
	/* 64 stale entries, the first the oldest. */
	for (int i = 0; i < 64; i++) {
		char file[128];
		snprintf(file, sizeof(file), "%s/stale%02d.bpf", cache_dir, i);
		FILE *fp = fopen(file, "w");
		cr_assert_not_null(fp);
		fclose(fp);
		struct timespec times[2] = { { 1000 + i, 0 }, { 1000 + i, 0 } };
		cr_assert_eq(utimensat(AT_FDCWD, file, times, 0), 0);
	}
	kiwi_seccomp_free(compile_default_text());
	char cmd[320];
	snprintf(cmd, sizeof(cmd), "test $(ls '%s' | wc -l) -eq 64 && test ! -e '%s/stale00.bpf' && "
		 "test -e '%s/stale01.bpf'", cache_dir, cache_dir, cache_dir);
	cr_expect_eq(system(cmd), 0, "the oldest entry was not the one dropped");
}

/* What the build precompiled is exactly what the runtime compiler makes of
 * the same profile today. */
Test(seccomp_default, precompiled_matches_a_fresh_compile)
{
	setenv("KIWI_SECCOMP_CACHE_DIR", "off", 1);
	_cleanup_seccomp_ struct kiwi_seccomp *built = compile_default();
	_cleanup_seccomp_ struct kiwi_seccomp *fresh = compile_default_text();
	cr_assert(same_program(built, fresh), "the precompiled default differs from a fresh compile");
}
