"""Every process a test starts dies with the test run, even with a run killed by SIGKILL.

Servers run in sessions of their own (so that a test can signal a server and its children, such
as prodserver's timeout worker, together), which also puts them out of reach of whatever ends
the test run: a killed pytest left llama.cpp's server running, holding two threads for 90 min.
So every process the tests start goes through ``popen`` or ``run`` (subprocess's, with the same
arguments), which mark its environment with this test process's id (``MARK_VARIABLE``; children
inherit it). A watchdog, started with the first of them, waits on a pipe from the test process;
when the pipe closes (the test process has ended, however it ended: no polling, no signal that
fires when a thread ends) it kills every process that carries the mark (Linux: /proc).
Playwright's browsers need none of this: its driver ends them when the test process goes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid

MARK_VARIABLE = "LAB_TEST_RUN"
MARK = uuid.uuid4().hex  # this test process's; an xdist worker has its own
WATCHDOG = r"""
import os, signal, sys, time
mark = ("%s=" + sys.argv[1]).encode()
sys.stdin.buffer.read()  # returns when the test process is gone
deadline = time.monotonic() + 10
while time.monotonic() < deadline:  # again, for children started while the first were killed
    killed = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%%s/environ" %% name, "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            os.kill(int(name), signal.SIGKILL)
            killed += 1
        except OSError:
            pass  # gone meanwhile, a zombie (no environment), or not ours to read
    if not killed:
        break
    time.sleep(0.2)
""" % MARK_VARIABLE

_watchdog: subprocess.Popen | None = None
_watchdog_lock = threading.Lock()


def marked(env: dict | None = None) -> dict:
    """``env`` (or this process's environment) with the mark, the watchdog running."""
    global _watchdog
    with _watchdog_lock:
        if _watchdog is None and os.path.isdir("/proc"):
            # Its own session: a Ctrl-C of the test run's terminal leaves it to do its job. The pipe's
            # write end stays in this process alone (Python's pipes are not inherited).
            _watchdog = subprocess.Popen([sys.executable, "-I", "-c", WATCHDOG, MARK], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
    return {**(os.environ if env is None else env), MARK_VARIABLE: MARK}


def popen(args, *, env: dict | None = None, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` of a process that dies with the test run."""
    return subprocess.Popen(args, env=marked(env), **kwargs)


def run(args, *, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` of a process that dies with the test run."""
    return subprocess.run(args, env=marked(env), **kwargs)
