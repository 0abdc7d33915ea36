"""A round start costs each waiting participant one page load, not two.

RoundStart waits for everyone. The request of the last participant to arrive moves every other
participant on to their next page (lab/shared_pages/wait_for_all.py), and the push that ends the wait says
where: a page that heard it loads that page straight away (no reload of the wait page to be
redirected); a page that missed it (its socket closed, a late reload) is redirected there by
oTree, as after any move; a closed tab is on the next page all the same.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
import requests
import websockets

from tests.http_participant import HttpParticipant
from tests.lab_server import current_page

WAIT_SOCKET = re.compile(r'makeReconnectingWebSocket\("([^"]+)"\)')
# Message 1 times out soon after the round starts: a closed tab must still be advanced past it.
LIMITS = dict(message_1_seconds=3, read_1_seconds=60, message_2_seconds=60, read_2_seconds=60,
              decision_seconds=60, result_seconds=60)
# oTree's worker visits a wait page's participants 10 s after it ends; then the page's limit, and
# the worker's 6 s of slack before it submits, and its polls.
CLOSED_TAB_ADVANCED_WITHIN = 60


class ArrivedAt(Exception):
    def __init__(self, response):
        self.response = response


class PlaysUntil(HttpParticipant):
    """Plays the pages as a participant would and stops on the first page of a given name."""

    def until(self, page_name: str) -> requests.Response:
        def stop_there(participant, page, index):
            if page == page_name:
                raise ArrivedAt(participant.last_response)

        self.on_page = stop_there
        try:
            self.play(timeout=120)
        except ArrivedAt as arrived:
            return arrived.response
        raise AssertionError(f"{self.code} never reached {page_name}: {self.pages[-5:]}")

    def _request(self, *args, **kwargs):
        self.last_response = super()._request(*args, **kwargs)
        return self.last_response


async def _first_ready(ws_url: str) -> list:
    """Every message a wait page's socket hears, up to 'ready'."""
    messages = []
    async with websockets.connect(ws_url) as ws:
        while not messages or messages[-1].get("status") != "ready":
            messages.append(json.loads(await ws.recv()))
    return messages


@pytest.mark.server
def test_the_last_arrival_moves_everyone_on_and_the_push_says_where(lab_server, database_url):
    server = lab_server(database_url)
    session = server.create_session("hh_uninformed_wc_first", 4, rounds_per_game=1, language="en", **LIMITS)
    listening, missed_push, closed_tab, last = [PlaysUntil(server.base_url, p["code"])
                                                for p in session["participants"]]
    waiting = {p.code: p.until("RoundStart") for p in (listening, missed_push, closed_tab)}
    socket_path = WAIT_SOCKET.search(waiting[listening.code].text).group(1).replace("&amp;", "&")

    async def the_last_one_arrives():
        listener = asyncio.ensure_future(_first_ready(server.base_url.replace("http://", "ws://") + socket_path))
        await asyncio.sleep(0.5)  # the socket has joined its channel group
        landed = await asyncio.to_thread(last.until, "Message1")
        return await asyncio.wait_for(listener, timeout=30), landed

    messages, landed = asyncio.run(the_last_one_arrives())
    destination = messages[-1].get("to")
    assert re.fullmatch(r"game_with_chat/Message1/\d+", destination or ""), messages
    assert landed.url.endswith(f"/p/{last.code}/{destination}")

    # Heard the push: the next page answers at once, no redirect (the server has them there).
    straight = requests.get(f"{server.base_url}/p/{listening.code}/{destination}", timeout=30)
    assert straight.ok and not straight.history, straight.history
    # Missed it: the wait page's address is redirected there.
    reload = requests.get(waiting[missed_push.code].url, timeout=30)
    assert reload.ok and len(reload.history) == 1 and reload.url.endswith(f"/p/{missed_push.code}/{destination}")
    # A closed tab was moved on too, and its next page still times out (oTree's worker shows it
    # to start its timer, as after any wait page).
    assert current_page(server, closed_tab.code).endswith(destination)
    deadline = time.monotonic() + CLOSED_TAB_ADVANCED_WITHIN
    while current_page(server, closed_tab.code).endswith(destination) and time.monotonic() < deadline:
        time.sleep(1)
    assert "/Message1/" not in current_page(server, closed_tab.code)
