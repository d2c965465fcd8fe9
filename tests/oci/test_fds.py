# SPDX-License-Identifier: Apache-2.0
"""--preserve-fds (runc's command line; the LISTEN_FDS convention): fds
3..3+N-1 reach the container, nothing else of the runtime's does."""
import os
import subprocess

from oci import CMD_TIMEOUT, probe_lines, one


def run_with_fds(rt, bundle, extra_args, fd3, fd4, fd5):
    """Runs `run` with fd3, fd4 and fd5 placed at 3, 4 and 5 in the runtime."""
    bundle.write()
    cid = rt.new_id()

    def place():
        for want, fd in ((3, fd3), (4, fd4), (5, fd5)):
            os.dup2(fd, want, inheritable=True)

    p = subprocess.run(rt.argv("run", "--bundle", bundle.path, *extra_args, cid),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=CMD_TIMEOUT, preexec_fn=place, close_fds=False)
    return p


def test_preserve_fds(rt, bundle, tmp_path):
    r3, w3 = os.pipe()
    f4 = tmp_path / "in4"
    f4.write_text("from fd 4")
    fd4 = os.open(f4, os.O_RDONLY)
    fd5 = os.open("/dev/null", os.O_RDONLY)
    try:
        bundle.args("report", "fd-write=3:through fd 3", "fd-read=4")
        p = run_with_fds(rt, bundle, ["--preserve-fds", "2"], w3, fd4, fd5)
        os.close(w3)
        w3 = -1
        assert p.returncode == 0, p.stderr
        lines = probe_lines(p.stdout)
        fds = one(lines, "report")["fds"]
        assert "3" in fds and "4" in fds
        assert "5" not in fds, "only N fds are preserved"
        assert os.read(r3, 100) == b"through fd 3"
        assert one(lines, "fd-read")["data"] == "from fd 4"
    finally:
        for fd in (r3, w3, fd4, fd5):
            if fd >= 0:
                os.close(fd)


def test_no_fds_leak_without_preserve(rt, bundle):
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        bundle.args("report")
        p = run_with_fds(rt, bundle, [], fd, fd, fd)
        assert p.returncode == 0, p.stderr
        fds = one(probe_lines(p.stdout), "report")["fds"]
        assert sorted(fds) == ["0", "1", "2"], fds
    finally:
        os.close(fd)
