"""The experimenter's view: the live dashboard, the replay of every pair, the manifest.

Sessions are played by oTree's bots into the database a production server then serves
(STUDY auth): an anonymous request is refused, the admin logs in in headless Chromium and sees
the dashboard's plots, a participant's replay, an agent's model call one click away.
"""

import asyncio
import json

import pytest
import requests

from tests.browser_participant import admin_login, launch_browser
from tests.lab_server import completed_session_code, run_bots

ROUNDS = 2
ADMIN_PASSWORD = "test-admin-password"


def _bots(project_copy, database_url, config, participants, **overrides):
    result = run_bots(project_copy, config, participants, {"rounds_per_game": ROUNDS, **overrides},
                      database_url=database_url, database="lab")
    return completed_session_code(result)


@pytest.mark.browser
@pytest.mark.server
def test_dashboard_and_replay_in_the_browser(lab_server, project_copy, database_url, tmp_path):
    hh = _bots(project_copy, database_url, "hh_informed_wc_first", 4)
    hf = _bots(project_copy, database_url, "hf_informed_wc_first", 2, llm_provider="simulated")
    server = lab_server(database_url, OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD=ADMIN_PASSWORD,
                        LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS))

    # Admin login required: anonymous requests are sent to oTree's login page, no data leaks;
    # the dashboard's data answers 401 (the page then says "logged out: log in again").
    for path in (f"/LabDashboard/{hf}", f"/LabReplay/{hf}"):
        response = requests.get(server.base_url + path, allow_redirects=False, timeout=30)
        assert response.status_code in (302, 303), (path, response.status_code)
        assert "login" in response.headers["location"].lower()
    response = requests.get(f"{server.base_url}/LabDashboardData/{hf}", allow_redirects=False, timeout=30)
    assert response.status_code == 401 and response.json() == {"error": "logged out", "login_url": "/login"}

    from playwright.async_api import async_playwright

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            errors, dialogs = [], []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("dialog", lambda dialog: dialogs.append(dialog.message))  # a participant's script ran
            await admin_login(page, server.base_url, ADMIN_PASSWORD)

            # The dashboard of each session: plots drawn in the browser, progress, agents' health.
            await page.goto(f"{server.base_url}/LabDashboard/{hf}")
            await page.wait_for_selector("#plot-WC-coop canvas")
            # WC: cooperation, agreement, humans late, agents' fallbacks; WoC: the same without agreement
            assert await page.locator(".uplot").count() == 7
            assert await page.locator("#dash-participants tr").count() == 1 + 2
            health = await page.locator("#dash-agents").inner_text()
            # The model check made at session creation (the simulated model answers without a call).
            assert "simulated" in health and "ok" in health and "not run" not in health
            data = json.loads(await page.evaluate(
                "fetch(document.getElementById('lab-dashboard').dataset.url).then(r => r.text())"))
            assert data["games"]["WC"]["decisions"] == [2, 2]
            assert data["agents"]["calls"] >= 2 * ROUNDS * 3  # 3 turns per WC round for each of 2 agents
            await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

            await page.goto(f"{server.base_url}/LabDashboard/{hh}")
            await page.wait_for_selector("#plot-WC-coop canvas")
            assert await page.locator("#dash-agents-block").is_hidden()
            assert (await page.locator("#dash-stages").inner_text()).count("finished") == 1

            # oTree's Monitor page carries Dashboard and Replay tabs (_templates/otree/Session.html).
            await page.goto(f"{server.base_url}/SessionMonitor/{hh}")
            await page.locator("a.LabReplay").click()
            await page.wait_for_selector("#replay-participants a")
            await page.goto(f"{server.base_url}/SessionMonitor/{hh}")
            await page.locator("a.LabDashboard").click()
            await page.wait_for_selector("#plot-WC-coop canvas")

            # The replay of an H-H participant, reached from the dashboard's participant table.
            await page.locator("#dash-participants a").first.click()
            await page.wait_for_selector(".lab-round")
            assert await page.locator(".lab-round").count() == 2 * ROUNDS
            first_round = await page.locator(".lab-round").first.inner_text()
            assert "(human)" in first_round and "message 1" in first_round and "chose" in first_round
            await page.locator("#replay-pages summary").click()
            assert await page.locator("#replay-pages tr").count() > 10  # oTree's page-time records

            # An H-F participant: the agent associate, and each model call one click away.
            await page.goto(f"{server.base_url}/LabReplay/{hf}")
            await page.locator("#replay-participants a").first.click()
            await page.wait_for_selector(".lab-call")
            text = await page.locator(".lab-round").first.inner_text()
            assert "(agent, fair)" in text
            call = page.locator(".lab-call").first
            assert await call.locator("pre").first.is_hidden()
            await call.locator("summary").click()
            prompt = await call.locator("pre").first.inner_text()
            assert prompt.strip(), "the prompt is shown after one click"

            # The same rounds from the agent's side.
            await page.locator(".lab-round a").first.click()
            await page.wait_for_selector("h4:has-text('Agent agent-')")
            assert await page.locator(".lab-round").count() >= 1
            assert "persona fair" in await page.locator("h4").first.inner_text()

            # The agents page (Reports tab) links to the dashboard, the replay and each agent's side.
            await page.goto(f"{server.base_url}/AdminReport/{hf}?app_name=game_with_chat&round_number=1")
            await page.locator("a:has-text('agent-1')").first.click()
            await page.wait_for_selector("h4:has-text('Agent agent-1')")
            await page.goto(f"{server.base_url}/AdminReport/{hf}?app_name=game_with_chat&round_number=1")
            await page.locator("a:has-text('Dashboard')").first.click()
            await page.wait_for_selector("#plot-WC-coop canvas")

            # Participants' text (the bots type markup) is shown as text everywhere.
            await page.goto(f"{server.base_url}/LabReplay/{hh}")
            links = await page.locator("#replay-participants a").evaluate_all("links => links.map(a => a.href)")
            assert len(links) == 4
            texts = []
            for link in links:
                await page.goto(link)
                await page.wait_for_selector(".lab-round")
                texts += await page.locator(".lab-text").all_inner_texts()
            assert any("<" in text for text in texts), "the bots' markup is shown as typed"
            assert not dialogs, dialogs
            assert not errors, errors
            await browser.close()

    asyncio.run(run())


@pytest.mark.server
def test_manifest_travels_with_exports_and_guards_pooling(project_copy, database_url, tmp_path, capsys):
    from analysis import manifest
    from analysis.__main__ import main

    same, other = tmp_path / "same", tmp_path / "other"
    run_bots(project_copy, "hh_informed_wc_first", 4, {"rounds_per_game": ROUNDS}, database_url, export_dir=same)
    run_bots(project_copy, "hf_informed_woc_first", 2, {"rounds_per_game": ROUNDS, "llm_provider": "simulated"},
             database_url, export_dir=same)
    run_bots(project_copy, "hf_informed_wc_first", 2,
             {"rounds_per_game": ROUNDS, "llm_provider": "simulated", "decision_seconds": 25}, database_url,
             export_dir=other)

    manifests = manifest.load_manifests([same])
    assert len(manifests) == 2
    for found in manifests.values():
        assert found["packages"]["otree"] == "6.0.15"
        assert found["payoff_table"] == {"AA": [70, 70], "AB": [10, 80], "BA": [80, 10], "BB": [40, 40]}
        assert found["rounds_per_game"] == ROUNDS and found["started_at"] <= found["ended_at"]
        assert found["prompts"] and all(len(h) == 64 for h in found["prompts"].values())
        assert found["project_version"]
    agent_session = next(m for m in manifests.values() if m["treatment"] == "H-F")
    assert agent_session["model_settings"]["provider"] == "simulated"
    assert json.loads((same / f"manifest_{agent_session['session_code']}.json").read_text())["treatment"] == "H-F"
    assert manifest.protocol_differences(manifests) == []  # H-H and H-F of one protocol pool

    # A session with another decision limit is refused, unless told to pool anyway.
    assert main([str(same), str(other), "--out", str(tmp_path / "refused")]) == 2
    assert "decision" in capsys.readouterr().err
    assert not (tmp_path / "refused" / "report.html").exists()
    assert main([str(same), str(other), "--out", str(tmp_path / "report"), "--allow-mixed-protocols"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("manifest ") == 3
    report = (tmp_path / "report" / "report.html").read_text()
    assert "id='manifest'" in report and "stage_limits" in report
