"""The experimenter's path through the room, in Chromium, as docs/running-a-lab.md
describes it: each cubicle PC opens ``/room/lab?participant_label=cubicleNN`` before the
session exists, the experimenter creates the session in the room's admin page without editing
it, and every waiting tab starts by itself. A label already open in another browser is refused.
oTree's own pages follow the lab's language (OTREE_LANGUAGE_CODE, Chinese by default)."""

import asyncio
import re

import pytest
import requests

from tests.browser_participant import arrive, launch_browser

ROOM = "/room/lab"
PARTICIPANT_PAGE = re.compile(r"/p/[^/]+/instructions/Welcome/")


@pytest.mark.browser
@pytest.mark.server
def test_cubicles_start_by_themselves_and_a_label_in_use_is_refused(lab_server, database_url, tmp_path):
    from playwright.async_api import async_playwright

    # A server limited to 1 round per game: the configs' defaults follow it, so the session is
    # created without editing any field.
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1")
    room_url = f"{server.base_url}{ROOM}?participant_label="

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            cubicle_1, cubicle_2, mistyped, admin = [await (await browser.new_context()).new_page() for _ in range(4)]
            # Before the session: with the label in the address, straight to oTree's waiting
            # page, in Chinese, no click; without it, the label is typed once.
            await cubicle_1.goto(room_url + "cubicle01")
            await cubicle_2.goto(f"{server.base_url}{ROOM}")
            await cubicle_2.locator("#participant_label").click()
            await cubicle_2.keyboard.type("cubicle02")
            await cubicle_2.keyboard.press("Enter")
            for page in (cubicle_1, cubicle_2):
                await arrive(page, re.compile("welcome_page_ok=1"), 20)
                await page.get_by_text("等待会话开始").wait_for(timeout=20_000)
            # Another PC typing cubicle01 is refused while cubicle01's tab is open.
            await mistyped.goto(room_url + "cubicle01")
            await mistyped.locator("#label-in-use").wait_for(timeout=20_000)
            refusal = await mistyped.locator("#label-in-use").inner_text()
            assert "cubicle01" in refusal and "已在另一个浏览器中使用" in refusal
            # A label that is not in the room's file stays on the welcome page with a message in
            # the room's language (no session yet: the server's).
            await mistyped.goto(room_url + "cubicle99")
            await mistyped.locator("[data-field-error=participant_label]").wait_for(timeout=20_000)
            assert "welcome_page_ok" not in mistyped.url
            assert (await mistyped.locator("[data-field-error=participant_label]").inner_text()
                    == "未找到此参与者标签。请检查本隔间电脑的标签，或请实验人员帮助。")
            assert await mistyped.evaluate("document.documentElement.lang") == "zh-Hans"

            # The experimenter creates the session in the room, editing nothing but the config
            # and the number of people present.
            await admin.goto(f"{server.base_url}/room_without_session/lab")
            await admin.select_option("#session_config", "hh_informed_wc_first")
            await admin.locator("#num_participants").click()
            await admin.keyboard.type("2")
            await admin.click("#btn-create-session")
            await admin.wait_for_url(re.compile("/room_with_session/lab|/SessionStartLinks/"), timeout=60_000)
            assert not await admin.locator("#create-session-error").is_visible()

            # Both waiting tabs start by themselves, each on its own participant.
            for page in (cubicle_1, cubicle_2):
                await arrive(page, PARTICIPANT_PAGE, 30)
            assert cubicle_1.url.split("/p/")[1].split("/")[0] != cubicle_2.url.split("/p/")[1].split("/")[0]
            welcome = await cubicle_1.locator(".otree-content").inner_text()
            assert "元" in welcome and "CNY" not in welcome  # the session's language, its currency

            # Once the session runs, cubicle01 belongs to its browser: another is still refused,
            # while the same browser (a reload, a new tab) goes back to its participant.
            await mistyped.goto(room_url + "cubicle01")
            await mistyped.locator("#label-in-use").wait_for(timeout=20_000)
            again = await cubicle_1.context.new_page()
            await again.goto(room_url + "cubicle01")
            await arrive(again, PARTICIPANT_PAGE, 20)
            assert again.url.split("/p/")[1].split("/")[0] == cubicle_1.url.split("/p/")[1].split("/")[0]
            await cubicle_1.screenshot(path=str(tmp_path / "cubicle01.png"))
            await browser.close()

    asyncio.run(run())


@pytest.mark.server
def test_otree_pages_follow_the_lab_language(lab_server):
    """OTREE_LANGUAGE_CODE=en: oTree's waiting page in English (Chinese is the default, above)."""
    server = lab_server(OTREE_LANGUAGE_CODE="en")
    page = requests.get(f"{server.base_url}{ROOM}",
                        params=dict(participant_label="cubicle05", welcome_page_ok="1"), timeout=30)
    assert page.ok and "Waiting for your session to begin" in page.text
    session = server.create_session("hh_informed_wc_first", 12)
    assert session["config"]["language"] == "en"  # sessions default to the server's language


@pytest.mark.server
def test_a_label_taken_once_the_session_runs_is_refused(lab_server, database_url):
    """The session exists before anyone arrives: the first browser with a label keeps it; the
    same browser comes back to its participant, another browser is refused (browsers are
    cookie jars here). The room speaks its session's language (English), not the server's."""
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1")
    created = requests.post(f"{server.base_url}/api/sessions", json=dict(
        session_config_name="hh_informed_wc_first", num_participants=2, room_name="lab",
        modified_session_config_fields=dict(language="en")), timeout=60)
    assert created.ok, created.text[:300]
    first, second = requests.Session(), requests.Session()
    entry = dict(participant_label="cubicle07", welcome_page_ok="1")
    arrived = first.get(f"{server.base_url}{ROOM}", params=entry, timeout=30)
    assert PARTICIPANT_PAGE.search(arrived.url)
    refused = second.get(f"{server.base_url}{ROOM}", params=entry, timeout=30)
    assert refused.status_code == 409 and "cubicle07" in refused.text
    assert '<html lang="en">' in refused.text and "already in use in another browser" in refused.text
    unknown = second.post(f"{server.base_url}{ROOM}", json=dict(participant_label="cubicle99"), timeout=30)
    assert unknown.json()["errors"]["participant_label"].startswith("This participant label was not found.")
    welcome = second.get(f"{server.base_url}{ROOM}", timeout=30)
    assert '<html lang="en">' in welcome.text and "Participant label:" in welcome.text
    back = first.get(f"{server.base_url}{ROOM}", params=entry, timeout=30)
    assert back.url == arrived.url
    other_label = second.get(f"{server.base_url}{ROOM}", params=dict(entry, participant_label="cubicle08"), timeout=30)
    assert PARTICIPANT_PAGE.search(other_label.url) and other_label.url != arrived.url
