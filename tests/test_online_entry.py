"""Online sessions from Prolific, end to end in Chromium on the production server, on SQLite and
PostgreSQL: the study link's parameters into the participant's record, a duplicate PID refused,
malformed links answered with a page saying why, the quiz's screen-out and the completion's code
shown and redirected to Prolific (the prolific.com request intercepted: no internet), every page
with a limit, and the bonus file against the payment table."""

import asyncio
import csv
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
import requests

from tests import processes
from tests.admin_client import AUTH_ENV, AdminClient
from tests.browser_participant import Script, arrive, intercept_prolific, launch_browser, play
from tests.lab_server import QUIZ_ANSWERS
from tests.lab_server import PYTHON, lab_env

CODES = dict(completed="C0MPL3TE", screened_out="SCR33N", lobby_timeout="L0BBY", partner_dropped="PDR0P",
             timed_out="T1MEOUT")
ONLINE = dict(rounds_per_game=1, language="en", message_1_seconds=15, read_1_seconds=8, message_2_seconds=15,
              read_2_seconds=8, decision_seconds=10, result_seconds=8, online=True,
              prolific_completion_codes=",".join(f"{k}={v}" for k, v in CODES.items()), online_url_params="source",
              online_quiz_attempts=2, online_instructions_seconds=90, online_intro_seconds=30,
              online_questionnaire_seconds=60, online_payment_seconds=30, prolific_bonus_rate=0.1,
              llm_provider="simulated", llm_check_model=False)
PID_A, PID_B, PID_C = "5f1a2b3c4d5e6f7a8b9c0d1e", "60aabbccddeeff0011223344", "61aabbccddeeff0011223355"
STUDY, SUBMISSION_A, SUBMISSION_B = "65f0e1d2c3b4a59687786950", "6600112233445566778899aa", "6600112233445566778899bb"
SUBMISSION_C = "6600112233445566778899cc"


def shown(page: requests.Response) -> str:
    """What the participant sees of a page: its form (not oTree's debug panel, which lists every text)."""
    return page.text.split("</form>", 1)[0]


def study_link(session: dict, pid: str, submission: str, **extra) -> str:
    params = dict(PROLIFIC_PID=pid, STUDY_ID=STUDY, SESSION_ID=submission, **extra)
    return session["session_wide_url"] + "?" + "&".join(f"{k}={v}" for k, v in params.items())


async def _to_exit(page, prolific_requests: list) -> dict:
    """On the exit page: what it shows, then the redirect to Prolific (intercepted)."""
    await page.wait_for_selector("#completion-code", timeout=30_000)
    shown = dict(code=(await page.locator("#completion-code").inner_text()).strip(),
                 outcome=await page.locator("#online-exit").get_attribute("data-outcome"),
                 link=await page.locator("#completion-link").get_attribute("href"))
    await page.wait_for_url(re.compile(r"^https://app\.prolific\.com/"), timeout=20_000)
    shown["redirected_to"] = prolific_requests[-1]
    return shown


async def _session_run(server, session: dict) -> dict:
    from playwright.async_api import async_playwright

    seen = {}
    async with async_playwright() as playwright:
        browser = await launch_browser(playwright)
        prolific_requests = []

        # Participant B fails the quiz twice (online_quiz_attempts=2): screened out.
        context_b = await browser.new_context()
        await intercept_prolific(context_b, prolific_requests)
        page_b = await context_b.new_page()
        await page_b.goto(study_link(session, PID_B, SUBMISSION_B))
        seen["b_welcome_timer"] = await page_b.locator(".otree-timer").count()
        await page_b.click(".otree-btn-next")  # Welcome
        await arrive(page_b, re.compile(r"/Rules/"), 60)
        await page_b.click(".otree-btn-next")
        await arrive(page_b, re.compile(r"/Quiz/"), 60)
        for name, value in QUIZ_ANSWERS.items():  # first attempt: one wrong answer
            await page_b.check(f"input[name={name}][value='{ {'quiz_AA': '10'}.get(name, value) }']")
        await page_b.click(".otree-btn-next")
        await page_b.locator(".lab-quiz-feedback").wait_for()
        await page_b.check("input[name=quiz_AA][value='80']")  # the second: wrong again
        await page_b.click(".otree-btn-next")
        seen["b"] = await _to_exit(page_b, prolific_requests)

        # Participant A plays through against the agents and completes.
        context_a = await browser.new_context()
        await intercept_prolific(context_a, prolific_requests)
        page_a = await context_a.new_page()
        script = await play(page_a, study_link(session, PID_A, SUBMISSION_A, source="ad7"), Script(), timeout=240)
        seen["a_pages"] = script.pages
        await page_a.click(".otree-btn-next")  # the payment page, online: on to the exit page
        seen["a"] = await _to_exit(page_a, prolific_requests)

        # The same PID from another browser: refused with a page, not a 500.
        context_c = await browser.new_context()
        page_c = await context_c.new_page()
        response = await page_c.goto(study_link(session, PID_A, SUBMISSION_A))
        seen["duplicate_status"] = response.status
        seen["duplicate_reason"] = await page_c.locator("#online-refused").get_attribute("data-reason")
        # The same browser coming back goes on to its own page (Prolific's link opened again).
        context_b2 = await browser.new_context(storage_state=await context_b.storage_state())
        page_b2 = await context_b2.new_page()
        await intercept_prolific(context_b2, prolific_requests)
        await page_b2.goto(study_link(session, PID_B, SUBMISSION_B))
        seen["b_again"] = await _to_exit(page_b2, prolific_requests)
        await browser.close()
    return seen


@pytest.mark.browser
@pytest.mark.server
def test_online_session_from_prolific_link_to_completion_code(lab_server, database_url, tmp_path):
    server = lab_server(database_url)
    # Three places, one never taken: online, an H-F participant waits for nobody.
    session = server.create_session("hf_informed_wc_first", 3, **ONLINE)
    seen = asyncio.run(_session_run(server, session))

    assert seen["b_welcome_timer"] == 1, "online, the welcome page has a limit"
    assert seen["b"]["outcome"] == "screened_out" and seen["b"]["code"] == CODES["screened_out"]
    assert seen["b"]["redirected_to"] == "https://app.prolific.com/submissions/complete?cc=SCR33N"
    assert seen["a"]["outcome"] == "completed" and seen["a"]["code"] == CODES["completed"]
    assert seen["a"]["redirected_to"] == "https://app.prolific.com/submissions/complete?cc=C0MPL3TE"
    assert "Payment" in seen["a_pages"]
    # A played both games (one round each) with nobody in the third place ever arriving: online,
    # an H-F participant has agents of their own and waits for nobody.
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    code_a = next(row["participant_code"] for row in server.export("payment", "custom_export", session["code"])
                  if row["prolific_pid"] == PID_A)
    met = [row["associate_code"] for row in decisions if row["player_code"] == code_a]
    assert len(met) == 2 and all(code.startswith("agent-") for code in met)
    assert seen["duplicate_status"] == 409 and seen["duplicate_reason"] == "online_pid_taken"
    assert seen["b_again"]["code"] == CODES["screened_out"]

    rows = {row["prolific_pid"]: row for row in server.export("payment", "custom_export", session["code"])}
    assert set(rows) == {PID_A, PID_B, None} or set(rows) == {PID_A, PID_B, ""}
    a, b = rows[PID_A], rows[PID_B]
    assert (a["study_id"], a["prolific_session_id"], a["online_outcome"], a["completion_code"]) == (
        STUDY, SUBMISSION_A, "completed", "C0MPL3TE")
    assert a["participant_label"] == PID_A
    assert (b["online_outcome"], b["completion_code"], b["quiz_attempts"]) == ("screened_out", "SCR33N", "2")

    # The bonus file: PID,amount from the payment table; the same file again while nothing changed.
    admin = requests.Session()
    bonus_url = f"{server.base_url}/LabOnlineBonus/{session['code']}"
    page = admin.get(bonus_url, timeout=30)
    assert page.status_code == 200 and "not idempotent" in page.text and "1 participants" in page.text
    first = record_payout(admin, bonus_url)
    assert first.status_code == 200, first.text[:300]
    expected = round((float(a["payout"]) - 15.0) * 0.1, 2)
    assert list(csv.reader(io.StringIO(first.text))) == [[PID_A, f"{expected:.2f}"]]
    assert "not idempotent" in first.headers["X-Lab-Bonus-Note"]
    again = record_payout(admin, bonus_url)
    assert again.text == first.text and "Already paid" in again.headers["X-Lab-Bonus-Note"]
    # The command line reads the same record: the same file, with the warning.
    out = processes.run([PYTHON, "-m", "labserver", "bonus", session["code"], "--out", str(tmp_path)],
                        cwd=server.workdir, env=lab_env(server.database_url), capture_output=True, text=True,
                        timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()).read_text() == first.text and "not idempotent" in out.stderr


TOKEN = re.compile(r'name="csrftoken" value="(\d+)"')


def record_payout(http: requests.Session, bonus_url: str, **fields) -> requests.Response:
    """The admin's confirmed POST of the bonus page's form (its CSRF token; once a payout leaves nothing
    to pay the page has no form: the token of a form loaded before, as the dashboard's)."""
    token = TOKEN.search(http.get(bonus_url, timeout=30).text) or TOKEN.search(
        http.get(bonus_url.replace("/LabOnlineBonus/", "/LabDashboard/"), timeout=30).text)
    return http.post(bonus_url, timeout=30, data=dict(dict(csrftoken=token[1], confirm="1"), **fields))


@pytest.mark.server
def test_bonus_file_is_shown_by_get_and_recorded_by_the_admins_confirmed_post(lab_server, database_url):
    server = lab_server(database_url, **AUTH_ENV)
    session = server.create_session("hf_informed_wc_first", 1, **ONLINE)
    bonus_url = f"{server.base_url}/LabOnlineBonus/{session['code']}"
    # One participant arrives by the study link; the payment table owes them 20 (show-up fee 15).
    assert requests.get(study_link(session, PID_A, SUBMISSION_A), timeout=30, allow_redirects=False).status_code == 302
    server.execute([f"UPDATE payment_player SET payout = 20.0 WHERE participant_id = "
                    f"(SELECT id FROM otree_participant WHERE label = '{PID_A}')"])

    def payouts() -> int:
        return server.query("SELECT COUNT(*) FROM payment_bonuspayout")[0][0]

    anonymous = requests.get(f"{bonus_url}?download=1", timeout=30)
    assert anonymous.url.endswith("/login") and "PID" not in anonymous.text
    assert requests.post(bonus_url, data=dict(confirm="1"), timeout=30).url.endswith("/login")
    admin = AdminClient(server.base_url).http
    # A GET records nothing, however it is asked and however often (a prefetch, a crawler, a reload) ...
    for query in ("?download=1", "?download=1&difference=1", "", ""):
        assert admin.get(bonus_url + query, timeout=30).status_code == 200
    assert payouts() == 0
    # ... it shows the file a payout would hand out, and the form that records it.
    page = admin.get(bonus_url, timeout=30)
    assert "not idempotent" in page.text and f"{PID_A},0.50" in page.text
    assert 'id="bonus-record"' in page.text and TOKEN.search(page.text)
    # POST records it: only with the admin's CSRF token and the confirmation.
    assert admin.post(bonus_url, data=dict(confirm="1"), timeout=30).status_code == 403
    assert record_payout(admin, bonus_url, confirm="").status_code == 400
    assert payouts() == 0
    first = record_payout(admin, bonus_url)
    assert first.status_code == 200 and first.text == f"{PID_A},0.50\n", first.text[:300]
    assert "Payout 1 recorded" in first.headers["X-Lab-Bonus-Note"] and payouts() == 1
    again = record_payout(admin, bonus_url)
    assert again.text == first.text and "Already paid" in again.headers["X-Lab-Bonus-Note"] and payouts() == 1
    # The recorded file can be downloaded again by GET, as recorded.
    page = admin.get(bonus_url, timeout=30)
    assert "Already paid" in page.text and 'href="?payout=1"' in page.text
    recorded = admin.get(f"{bonus_url}?payout=1", timeout=30)
    assert recorded.text == first.text and "already paid" in recorded.headers["X-Lab-Bonus-Note"] and payouts() == 1
    assert admin.get(f"{bonus_url}?payout=2", timeout=30).status_code == 404


@pytest.mark.server
def test_study_link_refuses_malformed_parameters_and_second_seats(lab_server, database_url):
    server = lab_server(database_url)
    session = server.create_session("hf_informed_wc_first", 2, **ONLINE)
    cases = {
        "online_link_missing": study_link(session, PID_A, SUBMISSION_A).replace(f"&STUDY_ID={STUDY}", ""),
        "online_link_malformed": study_link(session, "{{%PROLIFIC_PID%}}", SUBMISSION_A),
        # Given twice, a parameter names nobody for sure (oTree would take the last).
        "online_link_repeated": study_link(session, PID_A, SUBMISSION_A) + f"&PROLIFIC_PID={PID_B}",
    }
    for reason, url in cases.items():
        response = requests.get(url, timeout=30, allow_redirects=False)
        assert response.status_code == 400, (reason, response.status_code)
        assert f'data-reason="{reason}"' in response.text
    twice = requests.get(study_link(session, PID_A, SUBMISSION_A, source="ad7") + "&source=ad8", timeout=30,
                         allow_redirects=False)
    assert twice.status_code == 400 and 'data-reason="online_link_repeated"' in twice.text and "source" in twice.text
    too_long = requests.get(study_link(session, PID_A, SUBMISSION_A, source="x" * 201), timeout=30,
                            allow_redirects=False)
    assert too_long.status_code == 400 and "source" in too_long.text
    # Nothing was seated by the refusals: the good link still gets the first place.
    browser = requests.Session()
    good = browser.get(study_link(session, PID_A, SUBMISSION_A, source="ad 7/ü"), timeout=30, allow_redirects=False)
    assert good.status_code == 302 and "/InitializeParticipant/" in good.headers["location"]
    # The welcome page speaks to someone taking part online, not in the lab's room.
    welcome = browser.get(f"{server.base_url}{good.headers['location']}", timeout=30)
    assert "/Welcome/" in welcome.url and "do not talk to others about the study" in shown(welcome)
    assert "in the room" not in shown(welcome)
    # The session's own parameter (online_url_params = source) is in the participants export and the data package.
    rows = {row["prolific_pid"]: row for row in server.export("payment", "custom_export", session["code"])}
    assert json.loads(rows[PID_A]["url_params"]) == {"source": "ad 7/ü"} and rows[""]["url_params"] == ""
    package = zipfile.ZipFile(io.BytesIO(requests.get(f"{server.base_url}/LabDataPackage/{session['code']}",
                                                      timeout=120).content))
    [participants] = [name for name in package.namelist() if name.endswith(f"payment_custom_export_{session['code']}.csv")]
    packaged = {row["prolific_pid"]: row for row in csv.DictReader(io.StringIO(package.read(participants).decode()))}
    assert packaged[PID_A]["url_params"] == rows[PID_A]["url_params"]
    [descriptor] = [name for name in package.namelist() if name.endswith("datapackage.json")]
    fields = {field["name"]: field for resource in json.loads(package.read(descriptor))["resources"]
              if resource["path"].endswith(f"payment_custom_export_{session['code']}.csv")
              for field in resource["schema"]["fields"]}
    assert "online_url_params" in fields["url_params"]["description"]
    # The same browser again: its own place; under another PID: refused (one place per browser).
    again = browser.get(study_link(session, PID_A, SUBMISSION_A), timeout=30, allow_redirects=False)
    assert again.status_code == 302 and again.headers["location"] == good.headers["location"]
    other_pid = browser.get(study_link(session, PID_B, SUBMISSION_B), timeout=30, allow_redirects=False)
    assert other_pid.status_code == 409 and 'data-reason="online_browser_taken"' in other_pid.text
    # The same person in another online session of this server: refused (one seat per person).
    second = server.create_session("hf_informed_wc_first", 2, **ONLINE)
    elsewhere = requests.get(study_link(second, PID_A, SUBMISSION_A), timeout=30, allow_redirects=False)
    assert elsewhere.status_code == 409 and 'data-reason="online_pid_elsewhere"' in elsewhere.text
    assert "another session" in elsewhere.text and "in this study" not in elsewhere.text
    fresh = requests.get(study_link(second, PID_B, SUBMISSION_B), timeout=30, allow_redirects=False)
    assert fresh.status_code == 302
    # Online wording in Chinese too; the lab keeps its own.
    chinese = server.create_session("hf_informed_wc_first", 1, **dict(ONLINE, language="zh_hans"))
    page = requests.get(study_link(chinese, PID_C, SUBMISSION_C), timeout=30)
    assert "/Welcome/" in page.url and "请不要与他人谈论本研究" in shown(page) and "实验过程中请不要与他人交谈" not in shown(page)
    lab = server.create_session("hf_informed_wc_first", 1, rounds_per_game=1, language="en")
    page = requests.get(server.start_url(lab["participants"][0]["code"]), timeout=30)
    assert "/Welcome/" in page.url and "do not talk to other people in the room" in shown(page)
