"""The dashboard as the experimenter sees it in Chromium: every plotted point carries its value and
n (drawn on uPlot's canvas), the proxy's caption says how it is computed, the session's cost is
shown, and an expired admin login says "logged out: log in again" with a link and the time of the
last update, over greyed-out data, then resumes once logged in again.
"""

import asyncio
import json
import math
import re

import pytest

from tests.browser_participant import admin_login, launch_browser
from tests.lab_server import completed_session_code, run_bots

ROUNDS = 2
ADMIN_PASSWORD = "test-admin-password"
# Every string drawn on a canvas, recorded before the page's scripts run.
RECORD_CANVAS_TEXT = """
window.labCanvasTexts = [];
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text) {
  window.labCanvasTexts.push(String(text));
  return fillText.apply(this, arguments);
};
"""


def _percent(rate: float) -> str:
    return f"{math.floor(rate * 100 + 0.5)}%"  # JavaScript's Math.round


def expected_point_texts(data: dict) -> set[str]:
    """What each plotted point must say: "67% n=3" for a rate, "1/9" for a count."""
    texts = set()
    for game in data["games"].values():
        for key in ("human_cooperation", "agent_cooperation", "agreement", "breach"):
            series = game[key]
            if series:
                texts |= {f"{_percent(rate)} n={n}" for rate, n in zip(series["rate"], series["trials"]) if n}
        counts = [game["humans_timed_out"], game["humans_unsent_messages"], *(game["agent_fallbacks"] or {}).values()]
        for series in filter(None, counts):
            texts |= {f"{k}/{n}" for k, n in zip(series["count"], series["of"]) if k is not None}
    return texts


@pytest.mark.browser
@pytest.mark.server
def test_dashboard_points_show_value_and_n_and_an_expired_login_says_so(lab_server, project_copy, postgres_url):
    # PostgreSQL only, the lab's database: the numbers' recount runs on both (test_dashboard_recount.py)
    database_url = postgres_url
    result = run_bots(project_copy, "hf_informed_wc_first", 3,
                      {"rounds_per_game": ROUNDS, "llm_provider": "simulated", "llm_simulated_latency": 2,
                       "decision_seconds": 1}, database_url=database_url, database="lab")  # the server shows it
    code = completed_session_code(result)
    server = lab_server(database_url, OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD=ADMIN_PASSWORD,
                        LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS))

    from playwright.async_api import async_playwright

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            context = await browser.new_context(viewport={"width": 1400, "height": 1000})
            await context.add_init_script(RECORD_CANVAS_TEXT)
            page = await context.new_page()
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await admin_login(page, server.base_url, ADMIN_PASSWORD)
            await page.goto(f"{server.base_url}/LabDashboard/{code}")
            await page.wait_for_selector("#plot-WC-fallbacks canvas")
            await page.wait_for_function("document.getElementById('dash-status').textContent.includes('updated')")
            data = json.loads(await page.locator("#dashboard-data").text_content())

            # Values and n on every point of every plot.
            drawn = set(await page.evaluate("window.labCanvasTexts"))
            expected = expected_point_texts(data)
            assert any(" n=3" in text for text in expected) and any("/" in text for text in expected)
            assert expected <= drawn, sorted(expected - drawn)
            # How the agreement proxy is computed, under its plot; the intervals named.
            caption = await page.locator("#plot-WC-agree .lab-caption").inner_text()
            assert "How the proxy is computed" in caption and "latest message sent in time" in caption
            assert "Wilson" in caption and "n: pair-rounds" in caption
            assert "timeout" in await page.locator("#plot-WC-fallbacks").inner_text()  # the reason's legend

            # Earnings so far and what the session will cost.
            earnings = data["earnings"]
            shown = await page.locator("#dash-earnings").inner_text()
            assert f"{earnings['payout_so_far']:.2f} CNY" in shown and f"{earnings['payout_at_most']:.2f} CNY" in shown
            assert f"{earnings['money']['mean']:.2f} / {earnings['money']['min']:.2f}" in shown
            latency = await page.locator("#dash-agents").inner_text()
            assert f"answered calls (n = {data['agents']['latency_n']})" in latency

            # The admin login expires: the next poll says so, with a link, over the last data.
            await context.clear_cookies()
            status = page.locator("#dash-status")
            await page.wait_for_function(
                "document.getElementById('dash-status').textContent.includes('logged out')", timeout=15000)
            text = await status.inner_text()
            assert text.startswith("logged out: log in again")
            assert "Unexpected token" not in text and "JSON" not in text
            assert re.search(r"from the last update, .*\d{1,2}:\d{2}:\d{2}", text), text
            assert await status.locator("a").get_attribute("href") == "/login"
            assert "lab-stale" in await page.locator("#lab-dashboard").get_attribute("class")

            # Logged in again (another tab): the page resumes by itself.
            other = await context.new_page()
            await admin_login(other, server.base_url, ADMIN_PASSWORD)
            await page.wait_for_function(
                "document.getElementById('dash-status').textContent.includes('updated')", timeout=15000)
            assert "lab-stale" not in (await page.locator("#lab-dashboard").get_attribute("class") or "")
            assert not errors, errors
            await browser.close()

    asyncio.run(run())
