# SPDX-License-Identifier: Apache-2.0
"""Runs one command and reports what it left behind, as JSON on stdout.

usage (as root):
  unshare --mount --propagation private /usr/bin/python3 leftovers.py SPEC_JSON
SPEC_JSON: {"argv": [...], "env": {...}, "timeout": seconds}

In its own mount namespace this script mounts a fresh tmpfs on /tmp (so any
entry there afterwards was made by the command, not by the other programs
of this machine) and makes its mounts shared again, within this namespace:
a root kiwi-run that forgets to make its own mounts private propagates them
back here, where they show up in the mountinfo diff. It becomes a child
subreaper, so every process the command leaves behind is reparented here,
is reported, and is then killed and reaped.
"""
import json
import os
import subprocess
import sys
import time

from procs import become_subreaper, children_of_self, describe_pid, kill_and_reap


def mountinfo():
    with open("/proc/self/mountinfo") as f:
        return f.read().splitlines()


def main():
    spec = json.loads(sys.argv[1])
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "kiwi-leftovers", "/tmp"],
                   check=True)
    subprocess.run(["mount", "--make-rshared", "/"], check=True)
    become_subreaper()

    before = mountinfo()
    r = subprocess.run(spec["argv"], env=spec["env"], capture_output=True, text=True,
                       timeout=spec["timeout"], stdin=subprocess.DEVNULL)
    time.sleep(0.1)  # let a dying sandbox's orphans reach us
    after = mountinfo()
    tmp = sorted(os.listdir("/tmp"))
    left = children_of_self()
    described = [describe_pid(pid) for pid in left]
    kill_and_reap(left)
    json.dump({
        "returncode": r.returncode,
        "stdout": r.stdout,
        "stderr": r.stderr,
        "mounts_added": [l for l in after if l not in before],
        "mounts_removed": [l for l in before if l not in after],
        "tmp_entries": tmp,
        "processes": described,
    }, sys.stdout)


if __name__ == "__main__":
    main()
