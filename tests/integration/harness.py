# SPDX-License-Identifier: Apache-2.0
"""The integration harness (conftest.py in this directory) for the suites
that borrow it: tests/attacks, tests/ops, tests/phase and tests/tty.

Every suite's own conftest.py is the module `conftest`, so this directory's
cannot be imported by name: it is loaded here by path, once per process, as
`kiwi_it_conftest`, and what the suites take from it is named below. A
suite's conftest.py imports those names, and pytest finds the fixtures and
hooks among them by name there:

    sys.path.insert(0, str(HERE.parent / "integration"))
    from harness import it, kiwi, scratch, session_dir, ...  # noqa: E402,F401

A borrowed fixture resolves the fixtures it depends on in the borrowing
suite, so a suite may define its own `binaries` and `rootfs` and keep
`kiwi`. `it` is the whole module, for anything else.
"""
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE = "kiwi_it_conftest"


def _load():
    mod = sys.modules.get(MODULE)
    if mod is not None:
        return mod
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # the conftest imports procs.py
    spec = importlib.util.spec_from_file_location(MODULE, HERE / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[MODULE]
        raise
    return mod


it = _load()

# Fixtures (subreaper and no_leftover_processes are autouse: a suite that
# imports them gets them for every test).
session_dir = it.session_dir
scratch = it.scratch
test_user = it.test_user
subreaper = it.subreaper
no_leftover_processes = it.no_leftover_processes
binaries = it.binaries
kiwi_rootfs = it.kiwi_rootfs
rootfs = it.rootfs
kiwi = it.kiwi

# Hooks: a run in which every test skipped exits 77 (a skip for meson).
pytest_runtest_logreport = it.pytest_runtest_logreport
pytest_sessionfinish = it.pytest_sessionfinish

# Helpers and constants.
explain = it.explain
default_signal_state = it.default_signal_state
CANARY = it.CANARY
