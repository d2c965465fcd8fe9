#!/usr/bin/env python3
"""Fails when an #include in src/ reaches a layer above its own.

The layers, top to bottom (README, "Layout"):
    cli  ->  oci, session, phase, ops  ->  sandbox, net, helper  ->  base
A header in include/kiwi/ belongs to the folder whose .c file has its name
(kiwi/mount.h -> src/sandbox/mount.c); the few that have no such file are
named in HEADER_LAYER. A local include ("x.h", "../y/z.h") belongs to the
folder it resolves into.

    check-layers.py [REPO_ROOT]     exit 0 clean, 1 with one line per edge
"""
import os
import re
import sys

# What each folder may include, besides itself.
ALLOWED = {
    "base": set(),
    "net": {"base"},
    # sandbox.c asks kiwi-helper (through src/helper/client.c) for what only
    # root can do; the helper in turn compiles cgroup.c and userns.c.
    "sandbox": {"net", "helper", "base"},
    "helper": {"sandbox", "net", "base"},
    "tools": {"sandbox", "base"},
    "phase": {"sandbox", "net", "base"},
    # Sessions check an exec's variables by the phases' credential rules.
    "session": {"phase", "sandbox", "net", "helper", "base"},
    "oci": {"sandbox", "net", "helper", "base", "images"},
    "ops": {"sandbox", "net", "helper", "base"},
    "cli": {"oci", "phase", "session", "ops", "sandbox", "net", "helper", "base", "images"},
}
# Headers with no .c of the same name under src/.
HEADER_LAYER = {
    "cleanup.h": "base",
    "openat2.h": "base",
    "sched_attr.h": "base",
    "nlmsg.h": "net",
    "sync.h": "sandbox",
    "helper.h": "helper",
    "oci_config.h": "oci",
    "oci_runtime.h": "oci",
    "oci_image.h": "images",
    "layer.h": "images",
    "digest.h": "images",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def header_layers(src):
    layers = dict(HEADER_LAYER)
    for folder in os.listdir(src):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            continue
        for name in os.listdir(path):
            if name.endswith(".c"):
                layers.setdefault(name[:-2] + ".h", folder)
    return layers


def layer_of(include, here, src, layers):
    if include.startswith("kiwi/"):
        return layers.get(include[len("kiwi/"):])
    target = os.path.normpath(os.path.join(here, include))
    rel = os.path.relpath(target, src)
    if rel.startswith(".."):
        return None  # outside src/ (a generated header, a test's)
    return rel.split(os.sep)[0] if os.sep in rel else None


def check(root):
    src = os.path.join(root, "src")
    layers = header_layers(src)
    bad = []
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            continue
        if folder not in ALLOWED:
            bad.append(f"src/{folder}/: a folder the layering check does not know; add it to ALLOWED")
            continue
        for dirpath, _, names in os.walk(path):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                file = os.path.join(dirpath, name)
                with open(file, encoding="utf-8") as f:
                    text = f.read()
                for include in INCLUDE.findall(text):
                    to = layer_of(include, dirpath, src, layers)
                    if to is None and include.startswith("kiwi/"):
                        bad.append(f"{os.path.relpath(file, root)}: includes {include}, "
                                   "a header of no known layer; name it in HEADER_LAYER")
                        continue
                    if to is None or to == folder:
                        continue
                    if to not in ALLOWED[folder]:
                        bad.append(f"{os.path.relpath(file, root)}: includes {include} "
                                   f"from {to}/, a layer {folder}/ may not reach")
    return bad


def self_test():
    """The check must be able to fail: plant two upward includes in a tree of
    its own and expect exactly those two lines."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        files = {
            "src/base/err.c": '#include "kiwi/mount.h"\n',
            "src/sandbox/mount.c": '#include "kiwi/err.h"\n#include "../phase/plan_int.h"\n',
            "src/phase/plan_int.h": "",
            "src/phase/plan.c": '#include "plan_int.h"\n#include "kiwi/mount.h"\n',
        }
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                f.write(text)
        bad = check(root)
    want = ["src/base/err.c: includes kiwi/mount.h", "src/sandbox/mount.c: includes ../phase/plan_int.h"]
    ok = len(bad) == 2 and all(b.startswith(w) for b, w in zip(bad, want))
    print("\n".join(bad))
    print("self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = check(os.path.abspath(root))
    for line in bad:
        print(line)
    print(f"layers: {len(bad)} include(s) across a layer upward")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
