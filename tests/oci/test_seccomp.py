# SPDX-License-Identifier: Apache-2.0
"""runtime-spec config-linux.md "Seccomp": actions, errnoRet, the filter
in force for the container process (and an exec'd one)."""
from oci import control


def filter_with(*rules, default="SCMP_ACT_ALLOW"):
    return {"defaultAction": default, "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": list(rules)}


def test_errno_action(rt, bundle):
    bundle.linux["seccomp"] = filter_with(
        {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"})
    r = rt.run(bundle.args("report", "mkdir=/tmp/d", "write=/tmp/f"))
    assert r.rc == 0, r
    assert r.report()["status"]["Seccomp"] == "2"
    assert r.step("mkdir")["errno"] == 1  # EPERM, the default errno
    assert r.step("write")["ok"], "other syscalls pass"


def test_errno_ret(rt, bundle):
    bundle.linux["seccomp"] = filter_with(
        {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 42})
    r = rt.run(bundle.args("mkdir=/tmp/d"))
    assert r.rc == 0, r
    assert r.step("mkdir")["errno"] == 42


def test_kill_process_action(rt, bundle):
    bundle.linux["seccomp"] = filter_with(
        {"names": ["uname"], "action": "SCMP_ACT_KILL_PROCESS"})
    r = rt.run(bundle.args("uname", "report"))
    assert r.rc == 128 + 31, r  # SIGSYS
    assert not r.lines


def test_default_action_errno(rt, bundle):
    """An allow-list: everything not named fails with the default errno."""
    allowed = ["read", "write", "close", "exit", "exit_group", "execve", "brk", "mmap",
               "munmap", "mprotect", "arch_prctl", "set_tid_address", "set_robust_list",
               "rseq", "prlimit64", "readlink", "readlinkat", "getrandom", "futex", "fstat",
               "newfstatat", "statx", "ioctl", "openat", "rt_sigaction", "rt_sigprocmask",
               "rt_sigreturn", "getpid", "capget", "capset", "prctl", "setgroups", "setuid",
               "setgid", "setresuid", "setresgid", "getppid", "fcntl", "dup2", "dup3",
               "epoll_pwait", "nanosleep", "lseek", "sigaltstack", "getcwd", "chdir",
               "seccomp", "fchown", "fchdir", "setsid", "getuid", "geteuid", "close_range",
               "umask", "pread64", "sched_getaffinity", "clock_gettime", "keyctl",
               "setns", "unshare", "socket", "connect", "sendmsg", "recvmsg", "select",
               "pselect6", "poll", "ppoll", "faccessat", "faccessat2", "access", "uname"]
    bundle.linux["seccomp"] = filter_with({"names": allowed, "action": "SCMP_ACT_ALLOW"},
                                          default="SCMP_ACT_ERRNO")
    r = rt.run(bundle.args("mkdir=/tmp/d", "uname"))
    assert r.rc == 0, r
    assert r.step("mkdir")["errno"] == 1
    assert r.step("uname")["ok"]


def test_exec_gets_the_filter(rt, bundle):
    from test_lifecycle import waiting
    bundle.linux["seccomp"] = filter_with(
        {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 43})
    cid, _ = waiting(rt, bundle)
    r = rt.cmd("exec", cid, "/usr/local/bin/oci-probe", "mkdir=/tmp/x")
    assert r.rc == 0, r
    assert r.step("mkdir")["errno"] == 43


def test_unknown_action_refused(rt, bundle):
    control(rt, bundle.args("report"))
    bundle.linux["seccomp"] = filter_with({"names": ["mkdir"], "action": "SCMP_ACT_NO_SUCH"})
    r = rt.run(bundle.args("report"))
    assert r.rc != 0 and r.err.strip(), r


def test_arg_condition(rt, bundle):
    """A rule with an argument condition applies only when it matches: the
    probe's mkdir passes mode 0755."""
    def rules(mode):
        return filter_with(
            {"names": ["mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 44,
             "args": [{"index": 2, "value": mode, "op": "SCMP_CMP_EQ"}]},
            {"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 44,
             "args": [{"index": 1, "value": mode, "op": "SCMP_CMP_EQ"}]})
    bundle.linux["seccomp"] = rules(0o755)
    r = rt.run(bundle.args("mkdir=/tmp/d"))
    assert r.rc == 0, r
    assert r.step("mkdir")["errno"] == 44
    bundle.linux["seccomp"] = rules(0o700)
    r = rt.run(bundle.args("mkdir=/tmp/d"))
    assert r.rc == 0, r
    assert r.step("mkdir")["ok"]
