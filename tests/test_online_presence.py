"""Who has a page open (lab/online/presence.py): arrivals and a restart, on the production server,
SQLite and PostgreSQL.

The arrival probe: 50 participants follow the study link at random moments, each asking for
their first page 0.5-3 s after the link (seeded gaps: a redirect chain on a slow phone or a busy
machine) while others reload their pages and the dashboard is polled; as a browser does, a page
opens its socket once it is there. With a grace of ``GRACE`` seconds nobody of them may be
dropped: the grace counts from their arrival, not from the server's start. Two who follow the link
and never ask for their first page are dropped one grace after they came.

The restart: one participant closes their tab, the server is killed (kill -9) and started again,
and every tab reconnects its socket but one. The closed tab is dropped one grace after its close
(or as soon as the server is back, if that is later), not one grace after the restart nor after
timed-out pages; the tab that never reconnects is dropped one grace after the server last saw it,
not before the open tabs had time to reconnect; nobody else is.
"""

from __future__ import annotations

import random
import threading
import time
from urllib.parse import urljoin

import pytest
import requests

from tests.http_participant import PageSockets
from tests.test_online_dropouts import ONLINE, study_link

GRACE = 10
ARRIVALS = 50
NEVER_LOADED = 2  # follow the link, never ask for their first page
ARRIVAL_SPREAD_SECONDS = 15
GAP_SECONDS = (0.5, 3.0)
# A drop is made by the watcher's next look (every 2 s) once due, under the global lock.
WATCHER_MARGIN_SECONDS = 5


def dropped(server, code: str) -> dict:
    """{participant code: dropped_at} of the session's dropped participants, with the reason."""
    rows = server.export("payment", "custom_export", code)
    return {row["participant_code"]: (row["dropped_reason"], float(row["dropped_at"]))
            for row in rows if row["dropped_reason"]}


def dropped_once(server, code: str, codes: set, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        found = dropped(server, code)
        if codes <= set(found) or time.monotonic() > deadline:
            return found
        time.sleep(1)


class Arrival:
    """One participant: the study link, oTree's start, and (``gap`` seconds later) the first page."""

    def __init__(self, server, session: dict, number: int, gap: float | None) -> None:
        self.server, self.link, self.gap = server, study_link(session, number), gap
        self.http = requests.Session()
        self.code = ""
        self.came_at = self.first_page = None

    def arrive(self, tabs: PageSockets) -> None:
        self.came_at = time.time()
        seated = self.http.get(self.link, timeout=60, allow_redirects=False)
        assert seated.status_code == 302, seated.text[:300]
        start = urljoin(self.server.base_url, seated.headers["location"])
        self.code = start.rstrip("/").rsplit("/", 1)[1]
        first = self.http.get(start, timeout=60, allow_redirects=False)  # InitializeParticipant
        assert first.status_code in (302, 307), first.text[:300]
        if self.gap is None:
            return  # the tab closed on the way in
        time.sleep(self.gap)
        page = self.http.get(urljoin(self.server.base_url, first.headers["location"]), timeout=60)
        assert page.status_code == 200, page.text[:300]
        self.first_page = page.url  # a dropped participant lands on the exit page
        assert tabs.open_for_page(self.code, page.text)


@pytest.mark.server
def test_arrivals_are_never_dropped_and_closed_tabs_are_timed_across_a_restart(lab_server, database_url):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1")
    session = server.create_session("hf_informed_wc_first", ARRIVALS + NEVER_LOADED, **dict(
        ONLINE, rounds_per_game=1, dropout_closed_tab_seconds=GRACE, online_instructions_seconds=600))
    code = session["code"]
    rng = random.Random("arrivals")
    arrivals = [Arrival(server, session, number, rng.uniform(*GAP_SECONDS) if number >= NEVER_LOADED else None)
                for number in range(ARRIVALS + NEVER_LOADED)]
    starts = sorted(rng.uniform(0, ARRIVAL_SPREAD_SECONDS) for _ in range(ARRIVALS))
    arrives_in = [0.0] * NEVER_LOADED + starts
    tabs = PageSockets(server.base_url)
    errors, stop = [], threading.Event()

    def attend(arrival, delay):
        time.sleep(delay)
        try:
            arrival.arrive(tabs)
        except Exception as error:  # noqa: BLE001  reported below
            errors.append((arrival.link, error))

    def other_traffic():
        # Those who have arrived reload their page; the experimenter's dashboard is polled.
        reloads = requests.Session()
        while not stop.is_set():
            for arrival in [a for a in arrivals if a.first_page]:
                arrival.http.get(arrival.first_page, timeout=60)
                if stop.is_set():
                    break
            reloads.get(f"{server.base_url}/LabDashboardData/{code}", timeout=60)

    busy = threading.Thread(target=other_traffic)
    threads = [threading.Thread(target=attend, args=(a, delay)) for a, delay in zip(arrivals, arrives_in)]
    busy.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors, errors
        elsewhere = [a.first_page for a in arrivals[NEVER_LOADED:] if "/Welcome/" not in a.first_page]
        assert not elsewhere, f"{len(elsewhere)} of {ARRIVALS} arrivals dropped on arrival: {elsewhere[:3]}"
        never_loaded = {a.code: a.came_at for a in arrivals[:NEVER_LOADED]}
        found = dropped_once(server, code, set(never_loaded), GRACE + WATCHER_MARGIN_SECONDS)
        # Nobody who asked for their first page within the grace of their arrival was dropped.
        assert set(found) == set(never_loaded), {c: found[c] for c in set(found) - set(never_loaded)}
        for c, came_at in never_loaded.items():
            reason, at = found[c]
            assert reason == "closed_tab" and GRACE <= at - came_at <= GRACE + WATCHER_MARGIN_SECONDS, (at - came_at)
    finally:
        stop.set()
        busy.join()

    # The restart: one tab closes (its close is recorded by the watcher's next look), the server
    # dies; all tabs but one reconnect to the new server.
    closed, unreturned = arrivals[NEVER_LOADED], arrivals[NEVER_LOADED + 1]
    closed_at = time.time()
    tabs.close(closed.code)
    time.sleep(4)
    killed_at = time.time()
    server.stop(kill=True)
    for arrival in arrivals[NEVER_LOADED:]:
        tabs.close(arrival.code)
    server.start()
    up_at = time.time()
    for arrival in arrivals[NEVER_LOADED + 2:]:
        assert tabs.open_for_page(arrival.code, arrival.http.get(arrival.first_page, timeout=60).text)
    found = dropped_once(server, code, {closed.code, unreturned.code}, 2 * GRACE + WATCHER_MARGIN_SECONDS)
    tabs.close_all()
    assert set(found) == set(never_loaded) | {closed.code, unreturned.code}, found
    reason, at = found[closed.code]
    assert reason == "closed_tab"
    assert closed_at + GRACE <= at <= max(closed_at + GRACE, up_at) + WATCHER_MARGIN_SECONDS, (
        at - closed_at, up_at - closed_at)
    reason, at = found[unreturned.code]
    # Open when the server died: timed from then, but given the time a tab takes to reconnect.
    assert reason == "closed_tab" and killed_at + GRACE - 10 <= at and up_at + GRACE - 5 <= at, (
        at - killed_at, at - up_at)
    assert at <= max(killed_at + GRACE, up_at + GRACE) + WATCHER_MARGIN_SECONDS, (at - killed_at, at - up_at)
