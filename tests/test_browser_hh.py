"""Two participants in headless Chromium play a short H-H session with chat to the payment
page; a message typed as <script>alert(1)</script> is shown to the associate as text. The
session is in English on a server whose language is Chinese (the default): every page, oTree's
own texts included, is in English. An age the server rejects comes back with its message at the
field, and what was typed kept."""

import asyncio

import pytest

from tests.browser_participant import REJECTED_AGE, TYPED_MAJOR, Script, launch_browser, play

SHORT_LIMITS = dict(rounds_per_game=1, language="en", message_1_seconds=20, read_1_seconds=15,
                    message_2_seconds=20, read_2_seconds=15, decision_seconds=15, result_seconds=15)
SCRIPT_TAG = "<script>alert(1)</script>"


@pytest.mark.browser
@pytest.mark.server
def test_two_participants_play_hh_session_in_chromium(lab_server, tmp_path):
    from playwright.async_api import async_playwright

    server = lab_server()
    session = server.create_session("hh_informed_wc_first", 2, **SHORT_LIMITS)
    codes = [p["code"] for p in session["participants"]]
    scripts = [Script(messages={1: SCRIPT_TAG, 2: "A together? 🤝"}, choice="A", reject_age_first=True),
               Script(messages={1: "Hi! Let's both pick A", 2: "好的，我们都选A"}, choice="B")]
    tryout_ribbons = []

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            pages = [await (await browser.new_context()).new_page() for _ in codes]
            await asyncio.gather(*(play(page, server.start_url(code), script)
                                   for page, code, script in zip(pages, codes, scripts)))
            tryout_ribbons.append(await pages[0].locator("#lab-tryout-ribbon").inner_text())
            await pages[1].screenshot(path=str(tmp_path / "payment.png"))
            await browser.close()

    asyncio.run(run())
    first, second = scripts
    # The script tag arrived as text, and no script ran.
    assert second.seen_associate_messages[0] == SCRIPT_TAG
    assert first.seen_associate_messages == ["Hi! Let's both pick A", "好的，我们都选A"]
    assert not first.dialogs and not second.dialogs
    # The result page shows the pair's choices and the payoff table's points.
    assert first.seen_results[0] == {"own-choice": "A", "associate-choice": "B", "own-points": "10"}
    assert second.seen_results[0] == {"own-choice": "B", "associate-choice": "A", "own-points": "80"}
    # Payment: 15 + 0.06 x points (+ bonus for correct estimates) in CNY.
    assert first.payout_text.endswith("CNY") and second.payout_text.endswith("CNY")
    messages = server.export("payment", "custom_export_messages", session["code"])
    assert SCRIPT_TAG in [m["text"] for m in messages]
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    assert len(decisions) == 4  # 2 participants x 2 games x 1 round
    # The session's language on every page, oTree's own texts too, though the server's is Chinese.
    for script in scripts:
        assert script.page_languages == {"en"}
        assert script.footers == {"Powered by oTree"}
    # The server in oTree's debug mode (a try-out) says so on the participants' pages.
    assert tryout_ribbons == ["Try-out server (debug mode): not for a session with participants"]
    # The rejected age: the message at the field, in English, and every answer as it was typed.
    assert first.rejected_demographics == dict(
        page="Demographics", banner="Please fix the errors.", age_error="Number must be between 14 and 99.",
        age=REJECTED_AGE, gender="male", major=TYPED_MAJOR)
    participants = {row["participant_code"]: row for row in server.export("payment", "custom_export", session["code"])}
    assert participants[codes[0]]["age"] == "21" and participants[codes[0]]["major"] == "Economics"
