#!/usr/bin/env python3
"""Phase timeline of kiwi-run starts from `perf script` output.

Reads the output of `perf script -F comm,tid,time,event,trace` over a
recording of raw_syscalls:sys_enter/sys_exit and sched:sched_process_
exec/fork/exit, finds every start of the launcher (an exec whose filename
ends in the name given), its first child (the sandbox's init) and that
child's first child (the command), and prints the median and minimum of
each phase, with the system calls that took the most time in it.
Used by bench/profile.sh; see bench/README.md.
"""
import collections
import re
import statistics
import sys

LINE = re.compile(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)")
FORK = re.compile(r"pid=(\d+) child_comm=.* child_pid=(\d+)")
NR = re.compile(r"NR (\d+)")

# x86_64 numbers of the calls worth naming; others print as their number.
NAMES = {0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 10: "mprotect", 41: "socket",
         44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 56: "clone", 57: "fork",
         59: "execve", 60: "exit", 61: "wait4", 155: "pivot_root", 157: "prctl", 165: "mount",
         166: "umount2", 170: "sethostname", 231: "exit_group", 247: "waitid", 257: "openat",
         262: "newfstatat", 317: "seccomp", 428: "open_tree", 429: "move_mount", 430: "fsopen",
         431: "fsconfig", 432: "fsmount", 435: "clone3", 436: "close_range", 437: "openat2",
         442: "mount_setattr", 53: "socketpair", 282: "signalfd", 289: "signalfd4", 126: "capset",
         161: "chroot", 80: "chdir", 258: "mkdirat", 266: "symlinkat"}


def parse(path):
    events = collections.defaultdict(list)
    children = collections.defaultdict(list)
    prev = None
    for line in open(path, errors="replace"):
        if line == prev:  # perf -a may print an event once per CPU buffer
            continue
        prev = line
        m = LINE.match(line)
        if not m:
            continue
        comm, tid, t, ev, trace = m.group(1), int(m.group(2)), float(m.group(3)) * 1e3, m.group(4), m.group(5)
        events[tid].append((t, ev, trace, comm))
        if ev == "sched:sched_process_fork":
            f = FORK.search(trace)
            if f:
                children[int(f.group(1))].append(int(f.group(2)))
    return events, children


def syscall_times(evs, t0, t1):
    """Total ms per system call entered in [t0, t1)."""
    out = collections.Counter()
    open_call = None
    for t, ev, trace, _ in evs:
        if t < t0 or t >= t1:
            continue
        m = NR.search(trace)
        if not m:
            continue
        nr = int(m.group(1))
        if ev == "raw_syscalls:sys_enter":
            open_call = (nr, t)
        elif ev == "raw_syscalls:sys_exit" and open_call and open_call[0] == nr:
            out[NAMES.get(nr, "nr%d" % nr)] += t - open_call[1]
            open_call = None
    return out


def first(evs, ev, nr=None, after=float("-inf")):
    nrs = nr if isinstance(nr, tuple) else (nr,)
    for t, e, trace, _ in evs:
        if t >= after and e == ev and (nr is None or any(trace.startswith("NR %d " % n) for n in nrs)):
            return t
    return None


def main():
    path, exe = sys.argv[1], sys.argv[2]
    events, children = parse(path)
    phases = collections.defaultdict(list)
    calls = collections.defaultdict(collections.Counter)
    order = []
    runs = 0
    for tid, evs in events.items():
        if not any(e == "sched:sched_process_exec" and re.search(r"filename=\S*/%s " % re.escape(exe), tr + " ")
                   for _, e, tr, _ in evs):
            continue
        if not children.get(tid) or not children.get(children[tid][0]):
            continue
        init = children[tid][0]
        cmd = children[init][0]
        L, I, C = evs, events[init], events[cmd]
        marks = [
            ("launcher execve", first(L, "raw_syscalls:sys_enter", 59)),
            ("launcher start-up until clone3", first(L, "raw_syscalls:sys_exit", 59)),
            ("clone3 (namespaces)", first(L, "raw_syscalls:sys_enter", 435)),
            ("init: until the id maps are written (first receive returns)", first(L, "raw_syscalls:sys_exit", 435)),
            ("init: set-up until pivot_root", first(I, "raw_syscalls:sys_exit", (0, 45, 47))),
            ("init: pivot_root until it forks the command", first(I, "raw_syscalls:sys_enter", 155)),
            ("command: fork until its execve", C[0][0] if C else None),
            ("command: execve", first(C, "raw_syscalls:sys_enter", 59)),
            ("command: runs until it exits", first(C, "raw_syscalls:sys_exit", 59)),
            ("init: command exit until init exits", first(C, "sched:sched_process_exit")),
            ("launcher: init exit until launcher exits", first(I, "sched:sched_process_exit")),
            ("end", first(L, "sched:sched_process_exit")),
        ]
        if any(t is None for _, t in marks) or any(b[1] < a[1] for a, b in zip(marks, marks[1:])):
            continue
        runs += 1
        owner = {"launcher": L, "clone3": L, "init": I, "command": C}
        for (name, t0), (_, t1) in zip(marks, marks[1:]):
            phases[name].append(t1 - t0)
            if name not in order:
                order.append(name)
            evs = owner[name.split()[0].rstrip(":")]
            for call, ms in syscall_times(evs, t0, t1).items():
                calls[name][call] += ms
        phases["total"].append(marks[-1][1] - marks[0][1])
    if runs == 0:
        print("no complete start of %s found in the recording" % exe)
        return 1
    print("Phases of %d starts (ms; the top system calls are mean ms per start inside that phase)\n" % runs)
    print("| phase | median | min | top system calls |")
    print("|---|---:|---:|---|")
    for name in order + ["total"]:
        v = phases[name]
        top = ", ".join("%s %.3f" % (c, ms / runs) for c, ms in calls[name].most_common(3))
        print("| %s | %.3f | %.3f | %s |" % (name, statistics.median(v), min(v), top))
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
