"""Agents stay blind in label-uninformed sessions: in Chromium, an H-H and
an H-F label-uninformed session are played by the same scripted pair of participants, and what
each participant could see is compared, message texts masked: the addresses (participant code
masked), the page titles, the DOM structure of every page (tags, ids, classes) and the sequence
of pages, wait pages included. They must be the same.

The timing is arranged so that the waits happen in both sessions: participant 1 is fast and
waits for every associate stage (the slow human partner in H-H, the slow model in H-F);
participant 2 is slower than every associate and never waits for one (slow on the pages where an
associate acts, and a little slower than participant 1 on the others, so that participant 1
also reaches every round start and the final wait first). The wait pages' texts
are compared too, their countdown digits masked.
"""

import asyncio
import re

import pytest

from tests.browser_participant import WAIT_PAGES, Script, answer, launch_browser, leave

LIMITS = dict(rounds_per_game=1, language="en", message_1_seconds=25, read_1_seconds=20, message_2_seconds=25,
              read_2_seconds=20, decision_seconds=20, result_seconds=20)
AGENT_SECONDS = 2.5  # the model's latency in the H-F session
SLOW_SECONDS = 4.0  # participant 2 thinks this long on the stages where an associate acts, in both sessions
STAGE_PAGES = ("Message1", "Message2", "Decision")
FAST_SECONDS = 0.2  # participant 1 on every page
LESS_FAST_SECONDS = 1.0  # participant 2 on the other pages
PAGE_RE = re.compile(r"/p/[^/]+/(?P<app>[^/]+)/(?P<page>[^/]+)/(?P<index>\d+)")

# Everything a participant can see of a page, without texts (they hold the messages): the tree
# of tags with their ids and classes; the wait pages' visible text with digits masked.
SNAPSHOT_JS = """() => {
  function walk(el) {
    const id = el.id ? '#' + el.id : '';
    const classes = [...el.classList].sort().map(c => '.' + c).join('');
    const hidden = el.hidden || getComputedStyle(el).display === 'none' ? '(hidden)' : '';
    const kids = ['SCRIPT', 'STYLE'].includes(el.tagName) ? [] : [...el.children].map(walk);
    return el.tagName.toLowerCase() + id + classes + hidden + (kids.length ? '[' + kids.join(',') + ']' : '');
  }
  return {title: document.title, structure: walk(document.documentElement),
          text: document.body.innerText.replace(/[0-9]/g, '#')};
}"""


async def _play(page, start_url: str, think: dict, messages: dict, seen: list, timeout: float = 240):
    """Play to the payment page, typing with the keyboard; record a snapshot of every page.
    ``think``: seconds on a stage page ('stage') and on any other page ('other')."""
    await page.goto(start_url)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await page.wait_for_load_state("domcontentloaded")
        match = PAGE_RE.search(page.url)
        if not match:
            await page.wait_for_timeout(200)
            continue
        name = match["page"]
        snapshot = await page.evaluate(SNAPSHOT_JS)
        seen.append(dict(page=name, address=f"/p/CODE/{match['app']}/{name}/{match['index']}", **snapshot))
        if name == "Payment":
            return
        url_before = page.url
        if name in WAIT_PAGES:
            await leave(page, url_before, timeout)
            continue
        await page.wait_for_timeout(think["stage" if name in STAGE_PAGES else "other"] * 1000)
        if name in ("Message1", "Message2"):
            await page.locator("textarea[name^=message_]").click()
            await page.keyboard.type(messages[int(name[-1])])
            await page.locator(".otree-btn-next").click()
        else:
            await answer(page, name, Script())
        await leave(page, url_before, timeout)
    raise AssertionError(f"did not reach the payment page; pages seen: {[s['page'] for s in seen][-8:]}")


def _play_session(server, config: str, **fields) -> list[list[dict]]:
    from playwright.async_api import async_playwright

    session = server.create_session(config, 2, **LIMITS, **fields)
    codes = [p["code"] for p in session["participants"]]
    seen = [[], []]

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            pages = [await (await browser.new_context()).new_page() for _ in codes]
            await asyncio.gather(
                _play(pages[0], server.start_url(codes[0]), dict(stage=FAST_SECONDS, other=FAST_SECONDS),
                      {1: "Hi, A?", 2: "A then"}, seen[0]),
                _play(pages[1], server.start_url(codes[1]), dict(stage=SLOW_SECONDS, other=LESS_FAST_SECONDS),
                      {1: "Hello", 2: "ok"}, seen[1]),
            )
            await browser.close()

    asyncio.run(run())
    return seen


def _visible(snapshot: dict) -> dict:
    view = {key: snapshot[key] for key in ("address", "title", "structure")}
    # oTree's debug mode (no OTREE_PRODUCTION) puts the session and participant codes in the title.
    view["title"] = re.sub(r"\[\w+/P\d+\]", "[CODE]", view["title"])
    if snapshot["page"] in WAIT_PAGES:
        # Without the debug-mode panel (session code, group id), which a lab in production hides.
        view["text"] = snapshot["text"].split("Debug info")[0]
    return view


@pytest.mark.browser
@pytest.mark.server
def test_an_agent_associate_looks_like_a_human_one(lab_server):
    # SQLite only: what a page shows does not depend on the database, and the pages' database paths
    # run on PostgreSQL in the other browser tests (typing, dashboard actions, the H-H pair); both
    # took ~95 s, the suite's sixth-longest pair.
    server = lab_server("")
    with_humans = _play_session(server, "hh_uninformed_wc_first")
    with_agents = _play_session(server, "hf_uninformed_wc_first", llm_provider="simulated",
                                llm_simulated_latency=AGENT_SECONDS)
    fast_hh, slow_hh = with_humans
    fast_hf, slow_hf = with_agents
    # The arrangement worked: the fast participant waited for every associate stage.
    waits = [s["page"] for s in fast_hh if s["page"].startswith("Wait")]
    assert waits == ["WaitMessage1", "WaitMessage2", "WaitDecision", "WaitDecision"], waits
    # The wait for the associate shows the associate's time left in the stage (SI Figs.).
    assert all("Your associate's time left: #:##" in s["text"] for s in fast_hh if s["page"].startswith("Wait"))
    for human_session, agent_session in ((fast_hh, fast_hf), (slow_hh, slow_hf)):
        assert [s["address"] for s in agent_session] == [s["address"] for s in human_session]
        for human_page, agent_page in zip(human_session, agent_session):
            assert _visible(agent_page) == _visible(human_page), human_page["page"]
