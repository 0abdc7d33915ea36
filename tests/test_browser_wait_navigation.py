"""A wait page moves on once (CI failure of stop 16: `Page.wait_for_url: net::ERR_ABORTED`).

oTree's wait page reloads on every message of its websocket, and the lab's wait page also
reloads by itself 3 s after the associate's time is up. On a busy server the first reload can
still be loading when the second starts; the browser then aborts the first (Playwright's
`wait_for_url` reports it as ERR_ABORTED), and under load that can repeat. Here the server
answers the wait page slowly (the test holds each reload for 1.5 s); the message that ends the
wait arrives 0.4 s before the page's own timer fires, so the timer fires while the first reload
is still loading. The page must send one request and lose none.
"""

import asyncio
import re

import pytest

from tests.browser_participant import PAGE_RE, WAIT_PAGES, Script, answer, arrive, launch_browser, leave

READY = '{"status": "ready"}'
SLOW_SERVER_SECONDS = 1.5
MESSAGE_BEFORE_TIMER = 0.4
TIMER_AFTER_TIME_UP = 3.0  # _templates/lab/Wait.html


async def _advance_to(page, start_url: str, target: str, timeout: float = 120) -> None:
    """Play the pages before ``target`` as a participant would, and stop on it."""
    await page.goto(start_url)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await page.wait_for_load_state("load")
        match = PAGE_RE.search(page.url)
        name = match["page"] if match else None
        if name == target:
            return
        if name is None or name in WAIT_PAGES:
            await page.wait_for_timeout(200)
            continue
        url_before = page.url
        await answer(page, name, Script())
        await leave(page, url_before, timeout)
    raise AssertionError(f"never reached {target}; at {page.url}")


@pytest.mark.browser
@pytest.mark.server
def test_the_wait_pages_timer_does_not_abort_a_reload_under_way(lab_server):
    from playwright.async_api import async_playwright

    server = lab_server()
    # Participant 2 sits on Message1 without typing until their time runs out; participant 1
    # waits for them and watches the countdown.
    message_1_seconds = 25
    session = server.create_session("hh_informed_wc_first", 2, rounds_per_game=1, language="en",
                                    message_1_seconds=message_1_seconds, read_1_seconds=60,
                                    message_2_seconds=60, read_2_seconds=60, decision_seconds=60,
                                    result_seconds=60)
    fast, idle = (server.start_url(p["code"]) for p in session["participants"])

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            waiting, slow = [await (await browser.new_context()).new_page() for _ in range(2)]
            wait_sockets = []

            async def only_the_test_speaks_on_the_wait_page(ws):
                # The wait page's socket hears nothing from the server, so the test decides
                # when the message that ends the wait arrives. Other pages' sockets (RoundStart's
                # wait page among them) are real.
                if "/WaitMessage1/" in waiting.url and "wait_page" in ws.url:
                    wait_sockets.append(ws)
                else:
                    ws.connect_to_server()

            await waiting.route_web_socket(lambda url: True, only_the_test_speaks_on_the_wait_page)
            await asyncio.gather(_advance_to(waiting, fast, "WaitMessage1"), _advance_to(slow, idle, "Message1"))

            documents, aborted = [], []
            # A navigation's redirect (the reload answered with the next page) is not a new request.
            waiting.on("request", lambda r: documents.append(r.url)
                       if r.resource_type == "document" and r.redirected_from is None else None)
            waiting.on("requestfailed",
                       lambda r: aborted.append(r.failure) if r.resource_type == "document" else None)

            async def slow_server(route):
                await asyncio.sleep(SLOW_SERVER_SECONDS)
                await route.continue_()

            await waiting.route(re.compile(r"/p/"), slow_server)
            await waiting.wait_for_function(
                "document.getElementById('lab-wait-time-left').textContent === '0:00'",
                timeout=(message_1_seconds + 10) * 1000, polling=50)
            await asyncio.sleep(TIMER_AFTER_TIME_UP - MESSAGE_BEFORE_TIMER)
            assert wait_sockets and documents == []
            wait_sockets[-1].send(READY)
            await asyncio.sleep(MESSAGE_BEFORE_TIMER + SLOW_SERVER_SECONDS + 2)
            await waiting.wait_for_load_state("load")
            landed = PAGE_RE.search(waiting.url)["page"]
            await browser.close()
            return documents, aborted, landed

    documents, aborted, landed = asyncio.run(run())
    assert aborted == []
    assert len(documents) == 1, documents
    assert landed == "Read1"  # participant 2's time ran out, so participant 1 reads on


@pytest.mark.browser
@pytest.mark.server
def test_a_round_start_takes_the_waiting_page_straight_to_the_next(lab_server):
    """RoundStart (lab/shared_pages/wait_for_all.py): the page waiting there goes to the next page in one
    request when the last participant arrives, instead of reloading the wait page to be
    redirected (two requests, 71 at once in a lab of 72)."""
    from playwright.async_api import async_playwright

    server = lab_server()
    session = server.create_session("hh_uninformed_wc_first", 2, rounds_per_game=1, language="en",
                                    message_1_seconds=60, read_1_seconds=60, message_2_seconds=60,
                                    read_2_seconds=60, decision_seconds=60, result_seconds=60)
    first, last = (server.start_url(p["code"]) for p in session["participants"])

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            waiting, arriving = [await (await browser.new_context()).new_page() for _ in range(2)]
            await _advance_to(waiting, first, "RoundStart")
            await waiting.wait_for_timeout(500)  # its socket has joined the wait
            documents = []
            waiting.on("request", lambda r: documents.append((r.url, r.redirected_from is not None))
                       if r.resource_type == "document" else None)
            await _advance_to(arriving, last, "Message1")
            await arrive(waiting, re.compile(r"/Message1/"), 30)
            await waiting.wait_for_load_state("load")
            title = await waiting.title()
            await browser.close()
            return documents, title

    documents, title = asyncio.run(run())
    assert len(documents) == 1, documents
    url, was_redirected = documents[0]
    assert "/Message1/" in url and not was_redirected
    assert title  # the page itself arrived, not an error
