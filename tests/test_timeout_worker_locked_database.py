"""oTree's timeout worker outlives SQLite's "database is locked" (lab/server/timeout_worker.py, fix 3).

The test holds the database's write lock past the 5 s busy timeout at the moment a page's
timeout task comes due, as a server request stuck under load holds it. oTree's own worker loop
lets that error out of its commit and the process exits, silently: from then on no closed tab
is advanced, and the next wait page waits for it for ever. Here the participant closes the tab
on the page after, whose timeout falls after the lock is gone: the worker must still be there.
"""

import sqlite3
import time
from pathlib import Path

import pytest
import requests

from tests.http_participant import HttpParticipant

LIMITS = dict(rounds_per_game=1, language="en", message_1_seconds=4, read_1_seconds=36, message_2_seconds=30,
              read_2_seconds=30, decision_seconds=30, result_seconds=30, llm_provider="simulated")
LOCK_SECONDS = 20  # > a server request that fails on the lock (5 s busy timeout) and the worker's commit after it (5 s)


def timeout_worker_pid(server_pid: int) -> int | None:
    for child in Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split():
        if b"timeoutsubprocess" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    return None


def is_alive(pid: int) -> bool:
    """Running, not a zombie (prodserver never reaps its worker)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def due_time(db_path: Path, page_index: int, timeout: float = 30) -> float:
    """When the timeout task of the participant's page ``page_index`` comes due."""
    deadline = time.monotonic() + timeout
    with sqlite3.connect(db_path) as connection:
        while time.monotonic() < deadline:
            rows = connection.execute(
                "SELECT epoch_time, kwargs_json FROM otree_taskqueuemessage WHERE method = 'submit_expired_url'"
            ).fetchall()
            for epoch_time, kwargs_json in rows:
                if f'"page_index": {page_index}' in kwargs_json:
                    return float(epoch_time)
            time.sleep(0.2)
    raise AssertionError(f"no timeout task for page {page_index}")


@pytest.mark.server
def test_timeout_worker_survives_a_locked_database_and_still_advances_a_closed_tab(lab_server):
    server = lab_server()
    session = server.create_session("hf_informed_wc_first", 1, **LIMITS)
    code = session["participants"][0]["code"]
    db_path = server.workdir / "db.sqlite3"
    worker = timeout_worker_pid(server.process.pid)
    assert worker is not None

    class TabClosed(Exception):
        pass

    pages = {}

    def close_tab_on_read_1(p, page, index):
        pages[page] = index
        if page == "Read1":
            raise TabClosed

    participant = HttpParticipant(server.base_url, code)
    participant.on_page = close_tab_on_read_1
    with pytest.raises(TabClosed):
        participant.play()  # Message1 answered at once: its timeout task is due with nothing to do

    message_1_due = due_time(db_path, pages["Message1"])
    read_1_due = due_time(db_path, pages["Read1"])
    assert read_1_due > message_1_due + LOCK_SECONDS + 5
    time.sleep(max(0.0, message_1_due - 1 - time.time()))
    lock = sqlite3.connect(db_path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # the write lock, as a stuck server request holds it
    time.sleep(LOCK_SECONDS)
    lock.execute("ROLLBACK")
    lock.close()

    # Read1's limit passes after the lock is gone: the worker submits it for the closed tab.
    deadline = time.time() + (read_1_due - time.time()) + 30
    location = ""
    while time.time() < deadline:
        response = requests.get(f"{server.base_url}/InitializeParticipant/{code}", timeout=30, allow_redirects=False)
        location = response.headers.get("location", "")
        if "/Read1/" not in location:
            break
        time.sleep(2)
    assert "/Message2/" in location, f"still on {location}; worker alive: {is_alive(worker)}"
    assert is_alive(worker)
    assert "timeout worker: database error" in server.log(), server.log()[-3000:]  # it did meet the lock
