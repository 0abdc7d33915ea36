"""The lobby of online H-H sessions in Chromium on the production server, SQLite and PostgreSQL:
the first two participants to pass the quiz form a cohort (rounds + 1, made even: 2 for one
round) and play each other; a third, who arrives after them and finds nobody to be grouped with,
is sent to the exit page at the lobby's limit with the lobby-timeout code and the show-up fee in
the payment table."""

import asyncio
import re

import pytest

from tests.browser_participant import Script, answer, arrive, intercept_prolific, launch_browser, play
from tests.test_online_entry import CODES, ONLINE, STUDY, study_link

LOBBY = dict(ONLINE, online_lobby_seconds=8)
PIDS = ["aaaaaaaaaaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaaaaaaaaaa2", "aaaaaaaaaaaaaaaaaaaaaaa3"]


async def _run(session: dict) -> dict:
    from playwright.async_api import async_playwright

    seen = {}
    async with async_playwright() as playwright:
        browser = await launch_browser(playwright)
        prolific = []

        pages = []
        for pid in PIDS:
            context = await browser.new_context()
            await intercept_prolific(context, prolific)
            pages.append(await context.new_page())

        async def pair_member(index):
            script = await play(pages[index], study_link(session, PIDS[index], f"{index:024d}"),
                                Script(choice="A"), timeout=180)
            seen[f"pages_{index}"] = script.pages
            seen[f"results_{index}"] = script.seen_results
            await pages[index].click(".otree-btn-next")
            await pages[index].wait_for_selector("#completion-code")
            seen[f"code_{index}"] = await pages[index].locator("#completion-code").inner_text()

        async def late():
            # Arrives in the lobby after the other two have passed the quiz (cohorts form by arrival).
            while not all(re.search(r"/(Lobby|GameIntro|RoundStart|Message1)/", p.url) for p in pages[:2]):
                await asyncio.sleep(0.2)
            page = pages[2]
            script = Script()
            await page.goto(study_link(session, PIDS[2], f"{2:024d}"))
            # arrive(): a navigation Chromium abandons for a later one fails Playwright's
            # wait_for_url with ERR_ABORTED (CI of stop 32, once); the participant sees the later page.
            for name in ("Welcome", "Rules"):
                await arrive(page, re.compile(f"/{name}/"), 60)
                await page.click(".otree-btn-next")
            await arrive(page, re.compile("/Quiz/"), 60)
            await answer(page, "Quiz", script)
            await arrive(page, re.compile("/Lobby/"), 60)
            seen["lobby_timer"] = await page.locator(".otree-timer").count()
            await page.wait_for_selector("#completion-code", timeout=40_000)
            seen["late_code"] = await page.locator("#completion-code").inner_text()
            seen["late_outcome"] = await page.locator("#online-exit").get_attribute("data-outcome")
            await page.wait_for_url(re.compile(r"^https://app\.prolific\.com/"), timeout=20_000)

        await asyncio.gather(pair_member(0), pair_member(1), late())
        seen["prolific"] = prolific
        await browser.close()
    return seen


@pytest.mark.browser
@pytest.mark.server
def test_lobby_forms_a_cohort_and_times_out_the_one_left(lab_server, database_url):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1")
    session = server.create_session("hh_informed_wc_first", 3, **LOBBY)
    seen = asyncio.run(_run(session))

    assert "Lobby" in seen["pages_0"] and "Lobby" in seen["pages_1"]
    assert seen["code_0"] == seen["code_1"] == CODES["completed"]
    # The two played each other: both chose A, each saw the other's A, in both games.
    assert [r["associate-choice"] for r in seen["results_0"]] == ["A", "A"]
    assert seen["lobby_timer"] == 1
    assert (seen["late_outcome"], seen["late_code"]) == ("lobby_timeout", CODES["lobby_timeout"])
    assert f"https://app.prolific.com/submissions/complete?cc={CODES['lobby_timeout']}" in seen["prolific"]

    rows = {row["prolific_pid"]: row for row in server.export("payment", "custom_export", session["code"])}
    assert rows[PIDS[2]]["online_outcome"] == "lobby_timeout" and float(rows[PIDS[2]]["payout"]) == 15.0
    assert rows[PIDS[2]]["study_id"] == STUDY
    for pid in PIDS[:2]:
        assert rows[pid]["online_outcome"] == "completed"
        assert float(rows[pid]["payout"]) == 15.0 + 0.06 * 2 * 70 + float(rows[pid]["norm_correct_WC"] == "True") * 10 \
            + float(rows[pid]["norm_correct_WoC"] == "True") * 10
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    codes = {row["participant_code"]: row["prolific_pid"] for row in server.export("payment", "custom_export",
                                                                                   session["code"])}
    pairs = {(codes[d["player_code"]], codes[d["associate_code"]]) for d in decisions}
    assert pairs == {(PIDS[0], PIDS[1]), (PIDS[1], PIDS[0])}, "the cohort played within itself, nobody else"
