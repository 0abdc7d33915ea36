"""The experimenter's hands, end to end (lab/experimenter/interventions.py): a participant in headless Chromium
plays an H-F session on the production server while the experimenter, logged in, acts on them
from the dashboard in a second browser, each action confirmed in a dialog naming the participant.

- a message pops up on the participant's page as text (markup and scripts included), stays on
  every page they open until they close it, and the close is recorded;
- advance moves the participant's open page on, submitted as a timeout (message not sent,
  random choice flagged);
- pause holds a page past its deadline (browser and server), and resume gives the time that was
  left: a message sent after the resume, past the page's original deadline, is in time;
- without the admin login every action is refused (401) and does nothing;
- the interventions export has one row per action carried out, with who, when and what, and the
  session's data package has the table, every column described.
"""

import asyncio
import json
import re
import time

import pytest
import requests

from lab.experimenter import interventions
from lab.record.data_package import UNDESCRIBED
from tests.admin_client import ADMIN_PASSWORD, AUTH_ENV, AdminClient
from tests.browser_participant import PAGE_RE, WAIT_PAGES, Script, answer, arrive, launch_browser, leave
from tests.test_data_package import _resource, _unzip, _validate

HOSTILE = "<script>window.__labPwned = 1</script><b>Please</b> raise your hand & wait"
MESSAGE_2_SECONDS = 10
CONFIG = dict(rounds_per_game=1, language="en", llm_provider="simulated", llm_simulated_latency=0,
              message_1_seconds=60, read_1_seconds=60, message_2_seconds=MESSAGE_2_SECONDS, read_2_seconds=60,
              decision_seconds=60, result_seconds=60)
# Past Message2's deadline, oTree's worker margin (6 s) and two of its polls (3 s).
PAUSE_SECONDS = MESSAGE_2_SECONDS + 6 + 6


async def go_to(page, target: str, script: Script, timeout: float = 120) -> None:
    """Answer pages as a participant would until the participant is on ``target``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = PAGE_RE.search(page.url)
        if not match:
            await page.wait_for_timeout(200)
            continue
        name = match["page"]
        if name == target:
            await page.wait_for_load_state("load")
            return
        before = page.url
        if name not in WAIT_PAGES:
            await answer(page, name, script)
        await leave(page, before, timeout)
    raise AssertionError(f"never reached {target}; at {page.url}")


class Dashboard:
    """The experimenter's dashboard in Chromium: each action clicked, its dialogs answered."""

    def __init__(self, page, base_url: str, session_code: str):
        self.page, self.base_url, self.code = page, base_url, session_code
        self.dialogs: list[tuple[str, str]] = []
        self.prompt_answer = ""
        page.on("dialog", self._on_dialog)

    async def _on_dialog(self, dialog):
        self.dialogs.append((dialog.type, dialog.message))
        await (dialog.accept(self.prompt_answer) if dialog.type == "prompt" else dialog.accept())

    async def open(self):
        await self.page.goto(f"{self.base_url}/login")
        await self.page.locator("input[name=username]").type("admin")
        await self.page.locator("input[name=password]").type(ADMIN_PASSWORD)
        await self.page.locator("#btn-login").click()
        await self.page.wait_for_load_state()
        await self.page.goto(f"{self.base_url}/LabDashboard/{self.code}")
        await self.page.wait_for_selector("#dash-participants button[data-action=advance]")

    async def act(self, selector: str, prompt_answer: str = "") -> list[tuple[str, str]]:
        """Click, answer the dialogs, wait for the result line; returns the dialogs shown."""
        self.dialogs, self.prompt_answer = [], prompt_answer
        await self.page.evaluate("document.getElementById('dash-action-result').textContent = ''")
        await self.page.click(selector)
        await self.page.wait_for_function("document.getElementById('dash-action-result').textContent !== ''")
        result = await self.page.locator("#dash-action-result").inner_text()
        assert ": done" in result, result
        return self.dialogs

    async def shows(self, participant: str, page: str):
        """Wait until the participants' table shows the participant on ``page``."""
        row = self.page.locator("#dash-participants tr").filter(
            has=self.page.locator(f'button[data-participant="{participant}"]'))
        await row.filter(has_text=page).wait_for(timeout=15000)

    async def on_participant(self, action: str, participant: str, prompt_answer: str = ""):
        return await self.act(f'#dash-participants button[data-action={action}][data-participant="{participant}"]',
                              prompt_answer)


async def page_name(page) -> str:
    match = PAGE_RE.search(page.url)
    return match["page"] if match else page.url


@pytest.mark.browser
@pytest.mark.server
def test_dashboard_actions_reach_the_participants_page_and_are_recorded(lab_server, database_url, tmp_path):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1", **AUTH_ENV)
    session = server.create_session("hf_informed_wc_first", 1, **CONFIG)
    code, participant = session["code"], session["participants"][0]["code"]
    base = server.base_url
    admin = AdminClient(base)

    from playwright.async_api import async_playwright

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            player = await (await browser.new_context()).new_page()
            errors = []
            player.on("pageerror", lambda error: errors.append(str(error)))
            dashboard = Dashboard(await (await browser.new_context()).new_page(), base, code)
            script = Script(messages={1: "draft one", 2: "after resume"})

            await player.goto(server.start_url(participant))
            await player.wait_for_url(PAGE_RE)
            assert await page_name(player) == "Welcome"

            # Without the admin login: refused, and nothing happens.
            anonymous = requests.Session()
            for action in ("advance", "mark_dropped", "message", "pause", "resume"):
                response = anonymous.post(f"{base}/LabIntervene/{code}", timeout=30,
                                          data=dict(action=action, participant=participant, text="hi"))
                assert response.status_code == 401, (action, response.status_code)
            assert anonymous.get(f"{base}/LabDashboard/{code}", timeout=30).url.endswith("/login")
            await player.wait_for_timeout(1500)
            assert await page_name(player) == "Welcome"
            assert await player.locator("#lab-notices .lab-notice, #lab-paused").count() == 0
            assert admin.interventions(code) == []

            # Advance someone who has not started: refused (oTree would start them, taking their place).
            unstarted = server.create_session("hf_informed_wc_first", 1, **CONFIG)
            idle = unstarted["participants"][0]["code"]
            response = admin.act(unstarted["code"], "advance", participant=idle)
            assert response.status_code == 409 and "has not started" in response.json()["error"], response.text
            assert server.query(f"SELECT _index_in_pages FROM otree_participant WHERE code = '{idle}'") == [(0,)]
            assert admin.interventions(unstarted["code"]) == []

            # Mark dropped: online sessions only (tests/test_online_dropouts.py); a lab session refuses it.
            await dashboard.open()
            response = admin.act(code, "mark_dropped", participant=participant)
            assert response.status_code == 409 and "not an online session" in response.json()["error"]
            assert await dashboard.page.is_disabled(f'button[data-action=mark_dropped][data-participant="{participant}"]')

            # A message: it pops up as text, stays on new pages until closed, and the close is recorded.
            dialogs = await dashboard.on_participant("message", participant, HOSTILE)
            assert [kind for kind, _ in dialogs] == ["prompt", "confirm"]
            assert participant in dialogs[0][1] and participant in dialogs[1][1] and HOSTILE in dialogs[1][1]
            notice = player.locator("#lab-notices .lab-notice-text")
            await notice.wait_for(timeout=10000)
            assert await notice.inner_text() == HOSTILE
            assert await player.locator("#lab-notices b, #lab-notices script").count() == 0
            assert await player.evaluate("window.__labPwned") is None
            await player.reload()  # a new page load, the message not closed: it is there again
            await notice.wait_for(timeout=10000)
            assert await notice.inner_text() == HOSTILE
            await player.click("#lab-notices .lab-notice-ok")
            await notice.wait_for(state="detached", timeout=5000)
            for _ in range(50):  # the close reaches the server on the page's socket
                rows = admin.interventions(code)
                if rows and rows[0]["dismissed_at"]:
                    break
                await player.wait_for_timeout(200)
            await player.reload()
            await player.wait_for_load_state("load")
            await player.wait_for_timeout(1000)
            assert await player.locator("#lab-notices .lab-notice").count() == 0

            # Advance: the open page moves on, submitted as a timeout (message 1 not sent).
            await go_to(player, "Message1", script)
            await player.fill("textarea[name^=message_]", "typed, never sent")
            # the box's draft has gone out on the page's socket (under load the socket opened after
            # the advance once, and the server had no draft to keep)
            await player.wait_for_function("window.labNotices.sentDraft() === 'typed, never sent'", timeout=15000)
            await dashboard.shows(participant, "Message1")
            dialogs = await dashboard.on_participant("advance", participant)
            assert len(dialogs) == 1 and dialogs[0][0] == "confirm"
            assert participant in dialogs[0][1] and "Advance" in dialogs[0][1] and "Message1" in dialogs[0][1]
            await arrive(player, lambda url: "/Message1/" not in url, 15)

            # Pause on a timed page: held past its deadline; resume gives the time that was left.
            await go_to(player, "Message2", script)
            shown_at = time.monotonic()
            await player.fill("textarea[name^=message_]", script.messages[2])
            await player.wait_for_timeout(2000)
            dialogs = await dashboard.act("#dash-pause")
            assert code in dialogs[0][1] and "Pause" in dialogs[0][1]
            await player.locator("#lab-paused").wait_for(timeout=10000)
            frozen = await player.locator(".otree-timer__time-left").inner_text()
            await dashboard.page.locator("#dash-paused").filter(has_text="PAUSED").wait_for(timeout=10000)
            await player.wait_for_timeout(1000 * (PAUSE_SECONDS - (time.monotonic() - shown_at)))
            assert await page_name(player) == "Message2", "the page moved on during the pause"
            assert await player.locator(".otree-timer__time-left").inner_text() == frozen
            assert await player.locator("#lab-paused").is_visible()
            dialogs = await dashboard.act("#dash-pause")  # now "Resume session"
            assert code in dialogs[0][1] and "Resume" in dialogs[0][1]
            await player.locator("#lab-paused").wait_for(state="detached", timeout=10000)
            minutes, seconds = map(int, (await player.locator(".otree-timer__time-left").inner_text()).split(":"))
            left = 60 * minutes + seconds
            assert MESSAGE_2_SECONDS - 5 <= left <= MESSAGE_2_SECONDS - 1, (frozen, left)
            await player.wait_for_timeout(2000)
            assert await page_name(player) == "Message2"
            message_2 = player.url
            await player.click(".otree-btn-next")  # past the original deadline, within the time left
            await leave(player, message_2, 30)

            # Advance on the decision: a random choice, flagged timed out.
            await go_to(player, "Decision", script)
            await dashboard.shows(participant, "Decision")
            await dashboard.on_participant("advance", participant)
            await arrive(player, lambda url: "/Decision/" not in url, 15)
            assert not errors, errors
            await browser.close()

    asyncio.run(run())

    rows = admin.interventions(code)
    assert [r["action"] for r in rows] == ["message", "advance", "pause", "resume", "advance"]
    assert {r["who"] for r in rows} == {"admin"} and {r["session_code"] for r in rows} == {code}
    assert [r["participant_code"] for r in rows] == [participant, participant, "", "", participant]
    message, first_advance, paused, resumed, second_advance = rows
    assert json.loads(message["detail"])["text"] == HOSTILE
    assert float(message["dismissed_at"]) > float(message["at"])
    assert json.loads(first_advance["detail"])["page_before"]["page"] == "Message1"
    assert json.loads(second_advance["detail"])["page_before"]["page"] == "Decision"
    pause_length = float(resumed["at"]) - float(paused["at"])
    assert PAUSE_SECONDS - 5 < pause_length < PAUSE_SECONDS + 15
    assert json.loads(resumed["detail"])["seconds"] == pytest.approx(pause_length, abs=0.01)
    assert all(float(a["at"]) <= float(b["at"]) for a, b in zip(rows, rows[1:]))

    messages = [m for m in admin.export("custom_export_messages", code) if m["sender_kind"] == "human"]
    by_stage = {int(m["stage"]): m for m in messages}
    # Advanced: not sent, what was typed kept as its draft (as a timeout keeps it).
    assert (by_stage[1]["sent_in_time"], by_stage[1]["unsent_draft"]) == ("False", "typed, never sent")
    assert by_stage[2]["sent_in_time"] == "True" and by_stage[2]["text"] == "after resume"
    decision = [d for d in admin.export("custom_export_decisions", code) if d["player_kind"] == "human"]
    assert decision[0]["timed_out"] == "True" and decision[0]["choice"] in ("A", "B")

    # The session's data package has the table, every column described, valid.
    response = admin.http.get(f"{base}/LabDataPackage/{code}", timeout=120)
    assert response.status_code == 200
    package = _validate(_unzip(response.content, tmp_path / "package") / "datapackage.json")
    table = _resource(package, f"payment_custom_export_interventions_{code}")
    assert table["rows"] == 5
    assert {f["name"] for f in table["schema"]["fields"]} == set(interventions.COLUMNS)
    assert all(f["description"] != UNDESCRIBED for f in table["schema"]["fields"])
