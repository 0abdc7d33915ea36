"""The server is killed (kill -9) while participants are mid-round and stays down past their
pages' deadlines: when it is back, every participant moves on by themselves, closed tab or open.

- A closed tab (participant A, gone after sending message 1; associates are agents): oTree's timeout worker deletes
  tasks more than 60 s overdue when it starts, so A was never advanced and the next round's
  start waited for A forever. lab/server/timeout_worker.py reschedules them.
- An open tab (participant B in Chromium, message 2 typed, not sent): its timer runs out during
  the outage; the page says it is reconnecting instead of "This site can't be reached", keeps
  the text, and submits it when the server answers again (stored as the unsent draft).

The outage: by default the server is down OUTAGE_SECONDS (20 s) and, while it is down, every
deadline in the database is moved CLOCK_SHIFT_SECONDS (75 s) into the past, which is what the
server sees after a 95 s outage (the worker's 60 s threshold is what has to be beaten) without
waiting for it. LAB_TEST_OUTAGE_SECONDS=90 runs a real 90 s outage instead.
"""

import asyncio
import os
import threading
import time

import pytest

from tests.browser_participant import PAGE_RE, WAIT_PAGES, launch_browser
from tests.browser_participant import Script, answer
from tests.http_participant import HttpParticipant
from tests.lab_server import current_page

REAL_OUTAGE = float(os.environ.get("LAB_TEST_OUTAGE_SECONDS", "0"))
OUTAGE_SECONDS = REAL_OUTAGE or 20
CLOCK_SHIFT_SECONDS = 0 if REAL_OUTAGE else 75
# Two rounds: the second round's start waits for the closed tab. (The test ends with the game
# with chat: the next game's intro page has no time limit, so a closed tab stops there.)
LIMITS = dict(rounds_per_game=2, language="en", message_1_seconds=3, read_1_seconds=3, message_2_seconds=10,
              read_2_seconds=3, decision_seconds=3, result_seconds=3)
DRAFT = "typed before the kill"


def move_deadlines_into_the_past(server, seconds: float) -> None:
    """What the database looks like after an outage ``seconds`` longer than the real one."""
    server.execute([
        f"UPDATE otree_taskqueuemessage SET epoch_time = epoch_time - {int(seconds)}",
        f"UPDATE otree_participant SET _timeout_expiration_time = _timeout_expiration_time - {seconds} "
        "WHERE _timeout_expiration_time IS NOT NULL",
    ])


@pytest.mark.browser
@pytest.mark.server
@pytest.mark.timeout(900)
def test_pages_move_on_by_themselves_after_an_outage(lab_server, postgres_url):
    # PostgreSQL only, the lab's database: what a restart finds is oTree's task rows and the
    # participants' deadlines, read and rescheduled by the same ORM code on either database
    # (SQLite's restarts: test_restart.py); ~165 s of a worker each.
    from playwright.async_api import async_playwright

    server = lab_server(postgres_url)
    # Agents (the offline simulated model) as associates: every round still starts for all
    # participants together, so the second round waits for the closed tab.
    session = server.create_session("hf_informed_wc_first", 2, llm_provider="simulated", **LIMITS)
    code_a, code_b = [p["code"] for p in session["participants"]]

    class TabClosed(Exception):
        pass

    def close_after_message_1(participant, page, index):
        if len(participant.pages) > 1 and participant.pages[-2][0] == "Message1":
            raise TabClosed

    closed = HttpParticipant(server.base_url, code_a, messages={1: "from A before the kill", 2: "never"})
    closed.on_page = close_after_message_1
    closed_thread = threading.Thread(target=lambda: pytest.raises(TabClosed, closed.play))
    closed_thread.start()
    seen = dict(banner=False, pages=[])

    async def outage(page):
        await asyncio.to_thread(server.stop, True)
        killed_at = time.monotonic()
        if CLOCK_SHIFT_SECONDS:
            await asyncio.to_thread(move_deadlines_into_the_past, server, CLOCK_SHIFT_SECONDS)
        await page.wait_for_selector("#lab-reconnecting", timeout=15_000)
        seen["banner"] = await page.locator("#lab-reconnecting").inner_text()
        assert "/Message2/" in page.url and await page.locator("#id_message").input_value() == DRAFT
        await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - killed_at)))
        await asyncio.to_thread(server.start)
        started = time.monotonic()
        while "/Message2/" in page.url and time.monotonic() - started < 60:
            await asyncio.sleep(0.1)
        seen["open_tab_resumed_seconds"] = time.monotonic() - started

    async def open_tab():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            page = await (await browser.new_context()).new_page()
            await page.goto(server.start_url(code_b))
            script = Script(messages={1: "from B before the kill", 2: "A again"})
            deadline = time.monotonic() + 400
            while time.monotonic() < deadline:
                match = PAGE_RE.search(page.url)
                if not match:
                    await asyncio.sleep(0.3)
                    continue
                name, url_before = match["page"], page.url
                seen["pages"].append(name)
                if match["app"] == "game_without_chat":
                    break
                if name == "Message2" and "outage" not in seen:
                    seen["outage"] = True
                    await page.locator("#id_message").click()
                    await page.keyboard.type(DRAFT)
                    await outage(page)
                elif name not in WAIT_PAGES and not name.startswith("AgentWait"):
                    await answer(page, name, script)
                while page.url == url_before and time.monotonic() < deadline:
                    await asyncio.sleep(0.3)
            await browser.close()

    asyncio.run(open_tab())
    closed_thread.join(timeout=60)
    assert seen["pages"][-1] == "GameIntro" and seen["pages"].count("Result") == 2, (
        seen["pages"][-8:], server.log()[-3000:])
    assert seen["banner"].startswith("The connection to the server was lost")
    print(f"open tab submitted {seen['open_tab_resumed_seconds']:.1f} s after the server listened again")

    # The closed tab went through every timed page of the game to the next untimed one.
    deadline = time.monotonic() + 180  # each of its pages: the limit + 6 s (oTree's worker)
    while "game_without_chat" not in current_page(server, code_a) and time.monotonic() < deadline:
        time.sleep(2)
    assert "game_without_chat/GameIntro" in current_page(server, code_a), server.log()[-3000:]

    stored = server.query("SELECT sender_code, stage, text, sent_in_time, unsent_draft FROM game_with_chat_message "
                          "WHERE sender_kind = 'human' ORDER BY id")
    rows = [(sender, stage, text, bool(in_time), draft or "") for sender, stage, text, in_time, draft in stored]
    assert len(rows) == 8  # 2 participants x 2 rounds x 2 messages
    for row in [
        (code_a, 1, "from A before the kill", True, ""),
        (code_b, 1, "from B before the kill", True, ""),
        (code_a, 2, "", False, ""),
        (code_b, 2, "", False, DRAFT),  # the open tab's text, submitted when the server was back
    ]:
        assert row in rows, rows
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    flags = sorted((d["player_code"] == code_a, d["round"], d["timed_out"])
                   for d in decisions if d["game"] == "WC" and d["player_kind"] == "human")
    assert flags == [(False, "1", "False"), (False, "2", "False"), (True, "1", "True"), (True, "2", "True")]
