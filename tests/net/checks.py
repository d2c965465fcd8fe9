# SPDX-License-Identifier: Apache-2.0
"""What a netprobe result must show, shared by the egress tests: a
connection that worked, or a denial that came at once (a reject, never a
silent drop)."""
import errno

FAST_MS = 500
# a TCP reset, or the ICMP (v4) / ICMPv6 administratively-prohibited error
REFUSED = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.EACCES}


def connected(res, what):
    assert res["ok"] and res["reply"], f"{what} should connect: {res}"


def denied_fast(res, what):
    assert not res["ok"], f"{what} should be denied: {res}"
    assert res["errno"] in REFUSED, f"{what} should be rejected, not dropped: {res}"
    assert res["ms"] < FAST_MS, f"{what} took {res['ms']} ms to fail"
