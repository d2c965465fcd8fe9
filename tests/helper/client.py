# SPDX-License-Identifier: Apache-2.0
"""The unprivileged caller of kiwi-helper, driven by the tests.

Run as a test user (setpriv). Reads one JSON command per line on stdin,
writes one JSON answer per line on stdout. It owns the socketpair (so the
helper sees this user as its peer), the sandboxes (children in a fresh user
and network namespace, waiting), and the fds it sends.

  python3 client.py HELPER
"""
import ctypes
import json
import os
import resource
import signal
import socket
import struct
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PTRACE_ATTACH = 16
PTRACE_SEIZE = 0x4206
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4


def deny_write():
    """A seccomp filter: write(2) fails with EIO, all else allowed. An
    unprivileged process may load one only with no_new_privs set."""
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    ld_nr, jeq, ret = 0x20, 0x15, 0x06
    insns = [(ld_nr, 0, 0, 0), (jeq, 0, 1, 1),   # nr == __NR_write (x86_64: 1)?
             (ret, 0, 0, 0x00050000 | 5),        # SECCOMP_RET_ERRNO | EIO
             (ret, 0, 0, 0x7fff0000)]            # SECCOMP_RET_ALLOW
    prog = b"".join(struct.pack("HBBI", *i) for i in insns)
    buf = ctypes.create_string_buffer(prog)
    fprog = struct.pack("HxxxxxxQ", len(insns), ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                                                                  ctypes.addressof(fbuf), 0, 0):
        os._exit(126)


class Caller:
    def __init__(self, helper):
        self.helper = helper
        self.sock = None
        self.proc_pid = None
        self.sandboxes = {}   # id -> (pid, release pipe write end)
        self.saved = {}       # name -> fd

    # -- the helper --
    def start(self, env=None, argv=None, rlimits=None, nice=0, sched_idle=False, seccomp_write=False,
              cgroup=None):
        """The helper, exec'd with what a hostile caller can set first:
        resource limits {"CPU": [soft, hard], ...} (hard None: as it is), a nice value, the
        SCHED_IDLE policy, a seccomp filter making write(2) fail, a cgroup
        of the caller's own (a directory path) to start it in."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                null = os.open("/dev/null", os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.dup2(theirs.fileno(), 3, inheritable=True)
                os.closerange(4, 1024)
                if nice:
                    os.nice(nice)
                if sched_idle:
                    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
                for name, (soft, hard) in (rlimits or {}).items():
                    res = getattr(resource, f"RLIMIT_{name}")
                    resource.setrlimit(res, (soft, resource.getrlimit(res)[1] if hard is None else hard))
                if seccomp_write:
                    deny_write()
                if cgroup:
                    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                        f.write("0")
                os.execve(self.helper, [self.helper] + (argv or []), env or {})
            finally:
                os._exit(127)
        theirs.close()
        self.sock, self.proc_pid = mine, pid
        return {"pid": pid}

    def request(self, req, fds=(), raw=None):
        fds = [self.fd_of(spec) for spec in fds]
        data = raw.encode() if raw is not None else json.dumps(req).encode()
        try:
            if fds:
                socket.send_fds(self.sock, [data], fds)
            else:
                self.sock.send(data)
        except OSError as e:
            # a helper that refused at start answered and left: read why
            ans = self.answer()
            return ans if "closed" not in ans else {"send_error": e.errno}
        finally:
            for fd in fds:
                if fd not in self.saved.values():
                    os.close(fd)
        return self.answer()

    def answer(self):
        self.sock.settimeout(60)
        try:
            data = self.sock.recv(65536)
        except OSError as e:
            return {"recv_error": e.errno}
        if not data:
            return {"closed": True}
        return json.loads(data)

    def request_keep_fd(self, req, fds=(), name="answer"):
        """A request whose answer brings an fd (disk's mount), saved as name."""
        fds = [self.fd_of(spec) for spec in fds]
        try:
            socket.send_fds(self.sock, [json.dumps(req).encode()], fds)
        finally:
            for fd in fds:
                os.close(fd)
        self.sock.settimeout(60)
        data, got, _, _ = socket.recv_fds(self.sock, 65536, 1)
        if got:
            self.saved[name] = got[0]
        return {**json.loads(data), "with_fd": bool(got)}

    def create_at(self, name, path):
        """A file made and written below the saved directory fd name."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=self.saved[name])
            try:
                os.write(fd, b"x" * 4096)
                os.fsync(fd)
            finally:
                os.close(fd)
            return {"errno": 0}
        except OSError as e:
            return {"errno": e.errno}

    def stat_at(self, name, path=""):
        """Owner of path below the saved fd name ("" : the fd itself)."""
        try:
            st = os.stat(path, dir_fd=self.saved[name]) if path else os.fstat(self.saved[name])
            return {"uid": st.st_uid, "gid": st.st_gid}
        except OSError as e:
            return {"errno": e.errno}

    def close(self):
        self.sock.close()
        _, status = os.waitpid(self.proc_pid, 0)
        return {"status": os.waitstatus_to_exitcode(status)}

    # -- sandboxes: waiting children in a user and network namespace --
    def sandbox(self, userns=True, netns=True):
        r, w = os.pipe()
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            # only the pipes: a copy of the helper's socket here would
            # keep the helper from seeing its caller go
            lo = 3
            for keep in sorted((r, ready_w)):
                os.closerange(lo, keep)
                lo = keep + 1
            os.closerange(lo, 4096)
            flags = (CLONE_NEWUSER if userns else 0) | (CLONE_NEWNET if netns else 0)
            ok = libc.unshare(flags) == 0 if flags else True
            os.write(ready_w, b"1" if ok else b"0")
            os.read(r, 1)
            os._exit(0)
        os.close(r)
        os.close(ready_w)
        ok = os.read(ready_r, 1) == b"1"
        os.close(ready_r)
        sid = len(self.sandboxes)
        self.sandboxes[sid] = (pid, w)
        return {"id": sid, "pid": pid, "ok": ok}

    def end_sandbox(self, sid):
        pid, w = self.sandboxes.pop(sid)
        os.close(w)
        os.waitpid(pid, 0)
        return {"ended": pid}

    def fd_of(self, spec):
        kind, arg = next(iter(spec.items()))
        if kind == "sandbox":
            return os.pidfd_open(self.sandboxes[arg][0])
        if kind == "pid":
            return os.pidfd_open(arg)
        if kind == "path":
            return os.open(arg, os.O_RDONLY)
        if kind == "saved":
            return self.saved[arg]
        raise ValueError(spec)

    def save(self, name, spec):
        self.saved[name] = self.fd_of(spec)
        return {"fd": self.saved[name]}

    def read(self, path):
        try:
            with open(path) as f:
                return {"text": f.read()}
        except OSError as e:
            return {"errno": e.errno}

    def nest(self, path, depth):
        """mkdir path/n/n/... depth times, or until the kernel refuses."""
        made = 0
        try:
            for _ in range(depth):
                path = os.path.join(path, "n")
                os.mkdir(path)
                made += 1
        except OSError as e:
            return {"made": made, "errno": e.errno}
        return {"made": made, "errno": 0}

    def write(self, path, text):
        """One write(2), as an attack on a cgroup file would be made."""
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as e:
            return {"errno": e.errno}
        try:
            os.write(fd, text.encode())
            return {"errno": 0}
        except OSError as e:
            return {"errno": e.errno}
        finally:
            os.close(fd)

    # -- attacks on the helper process itself --
    def ptrace(self, pid):
        out = {}
        for name, req in (("attach", PTRACE_ATTACH), ("seize", PTRACE_SEIZE)):
            r = libc.ptrace(req, pid, None, None)
            out[name] = 0 if r == 0 else ctypes.get_errno()
        for name in ("mem", "environ", "ns/user"):
            try:
                fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY)
                os.close(fd)
                out[name] = 0
            except OSError as e:
                out[name] = e.errno
        try:
            os.kill(pid, signal.SIGKILL)
            out["kill"] = 0
        except OSError as e:
            out["kill"] = e.errno
        return out


def main():
    caller = Caller(sys.argv[1])
    for line in sys.stdin:
        cmd = json.loads(line)
        name = cmd.pop("cmd")
        try:
            out = getattr(caller, name)(**cmd)
        except OSError as e:
            out = {"oserror": e.errno, "what": str(e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
