"""A participant types into the message box in Chromium (keyboard only): line breaks, emoji,
Chinese, a paste at the limit. The box's counter and the server count the same, nothing typed
is lost to a reload or a rejected submission, and what is in the box at the limit is stored as
the unsent draft; on SQLite and PostgreSQL."""

import asyncio

import pytest

from lab.base.text import text_length
from tests.browser_participant import launch_browser
from tests.http_participant import HttpParticipant

MAX_CHARS = 30
LIMITS = dict(rounds_per_game=1, language="en", message_1_seconds=300, read_1_seconds=300, message_2_seconds=40,
              read_2_seconds=300, decision_seconds=300, result_seconds=300, llm_provider="simulated",
              message_max_chars=MAX_CHARS)


async def wait_until(page, predicate, timeout: float = 120) -> None:
    """Until the page's URL satisfies ``predicate`` (through redirects and reloads)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate(page.url):
        assert loop.time() < deadline, f"still on {page.url}"
        await asyncio.sleep(0.3)


def stop_at(page_name):
    class Arrived(Exception):
        pass

    def on_page(participant, page, index):
        if page == page_name:
            raise Arrived

    return on_page, Arrived


@pytest.mark.browser
@pytest.mark.server
def test_message_box_counts_like_the_server_and_loses_nothing(lab_server, database_url, tmp_path):
    from playwright.async_api import async_playwright

    server = lab_server(database_url)
    session = server.create_session("hf_informed_wc_first", 1, **LIMITS)
    code = session["participants"][0]["code"]
    walker = HttpParticipant(server.base_url, code)
    walker.on_page, arrived = stop_at("Message1")
    with pytest.raises(arrived):
        walker.play()

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            context = await browser.new_context()
            await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
            page = await context.new_page()
            await page.goto(server.start_url(code))
            assert "/Message1/" in page.url
            box = page.locator("#id_message")
            left = page.locator("#chars-left")
            await box.click()
            await page.keyboard.type("ab")
            await page.keyboard.press("Shift+Enter")
            await page.keyboard.type("c")
            await page.keyboard.press("Enter")
            await page.keyboard.type("😀你好")
            typed = await box.input_value()
            assert typed == "ab\nc\n😀你好"
            assert int(await left.inner_text()) == MAX_CHARS - text_length(typed) == MAX_CHARS - 8
            assert await page.evaluate("t => LabText.length(t)", typed) == text_length(typed)

            # A reload (or a server restart and a reload) keeps the draft.
            await page.reload()
            assert await box.input_value() == typed
            assert int(await left.inner_text()) == MAX_CHARS - 8

            # A paste over the limit is cut at the limit, in characters as the server counts.
            pasted = "好😀" * 20
            await page.evaluate("t => navigator.clipboard.writeText(t)", pasted)
            await box.focus()
            await page.keyboard.press("End")
            await page.keyboard.press("Control+V")
            full = await box.input_value()
            assert full == typed + pasted[: MAX_CHARS - 8]
            assert text_length(full) == MAX_CHARS and await left.inner_text() == "0"
            await page.keyboard.type("x")
            assert await box.input_value() == full
            await page.click(".otree-btn-next")

            # Message 2: a blank message is refused by the server; the box keeps what was typed.
            await wait_until(page, lambda url: "/Read1/" in url)
            await page.click(".otree-btn-next")
            await wait_until(page, lambda url: "/Message2/" in url)
            await page.wait_for_load_state()
            await box.click()
            await page.keyboard.type("  ")
            await page.keyboard.press("Enter")
            await page.click(".otree-btn-next")
            # The page's script shows oTree's answer in place of the page (no navigation event).
            await page.locator(".otree-form-errors").wait_for()
            assert "/Message2/" in page.url
            assert await page.locator(".otree-form-errors").count() == 1
            assert await box.input_value() == "  \n"
            await box.click()
            await page.keyboard.press("End")
            await page.keyboard.type("我的草稿 🙂")
            # Nobody clicks: at the limit the page submits itself with what is in the box.
            await wait_until(page, lambda url: "/Message2/" not in url, timeout=90)
            await browser.close()
            return full

    sent = asyncio.run(run())
    stored = server.query("SELECT stage, text, sent_in_time, unsent_draft FROM game_with_chat_message "
                          "WHERE sender_kind = 'human' ORDER BY stage")
    assert [(stage, text, bool(in_time), draft) for stage, text, in_time, draft in stored] == [
        (1, sent, True, None),
        (2, "", False, "  \n我的草稿 🙂"),
    ]
