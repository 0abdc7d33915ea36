"""A test run killed with SIGKILL leaves no process behind: the oTree server it started, its
timeout worker, the real model's llama.cpp server and the browser all go (tests/processes.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import processes
from tests.lab_server import PROJECT
from tests.real_model_server import server_python

INNER_TEST = '''
import asyncio
import os
import time
from pathlib import Path

from tests.browser_participant import launch_browser
from tests.lab_server import LabServer, make_project_copy
from tests.real_model_server import LlamaServer


def test_starts_what_the_suite_starts(tmp_path):
    from playwright.async_api import async_playwright

    LabServer(make_project_copy(tmp_path / "project")).start()
    if os.environ["WITH_LLAMA"]:
        LlamaServer(os.environ["WITH_LLAMA"], 512, tmp_path).start()

    async def browse():
        async with async_playwright() as playwright:
            await (await launch_browser(playwright)).new_page()
            Path(os.environ["READY_FILE"]).write_text("ready")
            await asyncio.sleep(600)

    asyncio.run(browse())
'''


def processes_with(variable: str, value: str) -> list[int]:
    """Every process whose environment has ``variable=value`` (what a process inherits from its parent)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"{variable}={value}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.server
@pytest.mark.browser
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds processes in /proc")
def test_nothing_outlives_a_killed_test_run(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    ready, mark = tmp_path / "ready", f"{os.getpid()}-{time.monotonic_ns()}"
    llama = server_python() or ""
    run = processes.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           str(tmp_path / "test_inner.py")], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(PROJECT), READY_FILE=str(ready), WITH_LLAMA=llama,
                                   INNER_RUN=mark),
                          stdout=open(tmp_path / "inner.log", "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while not ready.exists():
        assert run.poll() is None and time.monotonic() < deadline, (tmp_path / "inner.log").read_text()[-3000:]
        time.sleep(0.2)
    started = processes_with("INNER_RUN", mark)
    # pytest, prodserver, its timeout worker, Playwright's driver and Chromium's processes (and llama.cpp's)
    assert len(started) >= 5 + bool(llama), started

    run.send_signal(signal.SIGKILL)
    run.wait()
    killed_at = time.monotonic()
    while processes_with("INNER_RUN", mark) and time.monotonic() - killed_at < 10:
        time.sleep(0.1)
    assert processes_with("INNER_RUN", mark) == [], "left behind by a killed test run"
    assert time.monotonic() - killed_at < 5
