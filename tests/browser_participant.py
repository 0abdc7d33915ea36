"""A participant in headless Chromium: reads the page it is on and answers it like a person.

Pages are recognised by oTree's URL (/p/{code}/{app}/{Page}/{index}); wait pages are left
to advance by themselves. Uses Debian's chromium through Playwright (it cannot download its
own browser here).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

from tests.lab_server import QUIZ_ANSWERS

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PAGE_RE = re.compile(r"/p/[^/]+/(?P<app>[^/]+)/(?P<page>[^/]+)/\d+")
WAIT_PAGES = {"RoundStart", "WaitMessage1", "WaitMessage2", "WaitDecision", "AllFinished", "Lobby"}


@dataclass
class Script:
    messages: dict = field(default_factory=lambda: {1: "Let's both choose A", 2: "Deal: A"})
    choice: str = "A"
    # What the participant saw, for the test's assertions.
    seen_associate_messages: list = field(default_factory=list)
    seen_results: list = field(default_factory=list)
    dialogs: list = field(default_factory=list)
    pages: list = field(default_factory=list)
    payout_text: str = ""
    waited_seconds: dict = field(default_factory=dict)
    # Each form page's <html lang> and oTree's footer, as the participant's browser had them.
    page_languages: set = field(default_factory=set)
    footers: set = field(default_factory=set)
    # Demographics: first send an age the server rejects (the browser's own check off), and note
    # what comes back (``rejected_demographics``) before answering properly.
    reject_age_first: bool = False
    rejected_demographics: dict = field(default_factory=dict)
    # The quiz's answers (the paper's right ones unless given) and the pages whose text is kept.
    quiz_answers: dict = field(default_factory=lambda: dict(QUIZ_ANSWERS))
    keep_text_of: tuple = ()
    page_texts: dict = field(default_factory=dict)


async def launch_browser(playwright):
    return await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


PROLIFIC_URLS = "https://app.prolific.com/**"


async def intercept_prolific(context, requests: list) -> list:
    """Answer the context's requests to Prolific here (the tests have no internet) and note each
    URL in ``requests`` (shared between contexts when the same list is passed); returns it."""
    async def fulfil(route):
        requests.append(route.request.url)
        await route.fulfill(status=200, content_type="text/html", body="<p>Prolific (intercepted)</p>")

    await context.route(PROLIFIC_URLS, fulfil)
    return requests


async def play(page, start_url: str, script: Script, *, timeout: float = 180) -> Script:
    page.on("dialog", lambda dialog: (script.dialogs.append(dialog.message), dialog.dismiss()))
    await page.goto(start_url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = PAGE_RE.search(page.url)
        if not match:
            await page.wait_for_timeout(200)
            continue
        name = match["page"]
        script.pages.append(name)
        if name == "Payment":
            script.payout_text = (await page.locator("#payout").inner_text()).strip()
            return script
        url_before = page.url
        if name in WAIT_PAGES:
            started = time.monotonic()
            await leave(page, url_before, timeout)
            script.waited_seconds.setdefault(name, []).append(time.monotonic() - started)
            continue
        await note_page_frame(page, script)
        if name in script.keep_text_of:
            script.page_texts.setdefault(name, []).append(await page.locator("body").inner_text())
        await answer(page, name, script)
        await leave(page, url_before, timeout)
    raise AssertionError(f"participant did not reach the payment page; pages seen: {script.pages[-10:]}")


async def arrive(page, url_matches, timeout: float) -> None:
    """Wait until the page's address satisfies ``url_matches`` (a predicate or a regex).

    A navigation that the browser abandons for a later one is reported by Playwright as
    ERR_ABORTED although the participant only sees the later page arrive. The lab's pages avoid
    that (tests/test_browser_wait_navigation.py checks it); a participant in the tests still
    follows the later navigation rather than fail on the earlier one.
    """
    from playwright.async_api import Error

    matches = url_matches if callable(url_matches) else (lambda url: bool(url_matches.search(url)))
    deadline = time.monotonic() + timeout
    while True:
        try:
            await page.wait_for_url(matches, timeout=max(1.0, deadline - time.monotonic()) * 1000)
            return
        except Error as error:
            if "ERR_ABORTED" not in str(error) or time.monotonic() > deadline:
                raise
            if matches(page.url):
                await page.wait_for_load_state("load")
                return


async def leave(page, url_before: str, timeout: float) -> None:
    """Wait until the page has moved on from ``url_before``."""
    await arrive(page, lambda url: url != url_before, timeout)


async def note_page_frame(page, script: Script) -> None:
    """The page's language and oTree's footer, into ``script`` (nothing if the page is already
    going: a timed page submitting itself)."""
    from playwright.async_api import Error

    try:
        lang, footer = await page.evaluate(
            "[document.documentElement.lang, (document.querySelector('.powered-by-otree') || {}).innerText || '']")
    except Error:
        return
    script.page_languages.add(lang)
    if footer:
        script.footers.add(footer.strip())


REJECTED_AGE, TYPED_MAJOR = "5", "Economics <i>&amp; law</i>"


async def send_rejected_demographics(page, script: Script) -> None:
    """An age below the field's minimum, sent past the browser's own check (as a browser that
    does not check would): what the participant sees when the server refuses it."""
    await page.fill("input[name=age]", REJECTED_AGE)
    await page.check("input[name=gender][value=male]")
    await page.fill("input[name=major]", TYPED_MAJOR)
    await page.evaluate("document.getElementById('form').noValidate = true")
    await page.click(".otree-btn-next")
    # The page comes back with its errors (lab-page.js shows the answer as a new document).
    await page.locator(".otree-form-errors").wait_for(timeout=30_000)
    script.rejected_demographics = dict(
        page=PAGE_RE.search(page.url)["page"],
        banner=" ".join(await page.locator(".otree-form-errors").all_inner_texts()).strip(),
        age_error=" ".join(await page.locator("#lab-field-age .form-control-errors").all_inner_texts()).strip(),
        age=await page.input_value("input[name=age]"),
        gender=await page.evaluate("(document.querySelector('input[name=gender]:checked') || {}).value || ''"),
        major=await page.input_value("input[name=major]"),
    )


async def answer(page, name: str, script: Script) -> None:
    if name in ("Message1", "Message2"):
        await page.fill("textarea[name^=message_]", script.messages[int(name[-1])])
        await page.click(".otree-btn-next")
    elif name in ("Read1", "Read2"):
        script.seen_associate_messages.append(await page.locator("#associate-message").inner_text())
        await page.click(".otree-btn-next")
    elif name == "Decision":
        await page.click(f"#choice-{script.choice}")
    elif name == "Result":
        script.seen_results.append({key: await page.locator(f"#{key}").inner_text()
                                    for key in ("own-choice", "associate-choice", "own-points")})
        await page.click(".otree-btn-next")
    elif name == "Quiz":
        for field_name, value in script.quiz_answers.items():
            await page.check(f"input[name={field_name}][value='{value}']")
        await page.click(".otree-btn-next")
    elif name == "NormEstimates":
        await page.check("input[name=norm_estimate_WC][value='3']")
        await page.check("input[name=norm_estimate_WoC][value='2']")
        await page.click(".otree-btn-next")
    elif name in ("Perception", "CommunicationQuality", "BelievedHuman"):
        for radio_group in await page.locator("fieldset").all():
            await radio_group.locator("input[value='1']").check()
        await page.click(".otree-btn-next")
    elif name == "Familiarity":
        await page.check("input[name=llm_familiarity][value='3']")
        await page.click(".otree-btn-next")
    elif name == "Demographics":
        if script.reject_age_first:
            await send_rejected_demographics(page, script)
        await page.fill("input[name=age]", "21")
        await page.check("input[name=gender][value=female]")
        await page.fill("input[name=major]", "Economics")
        await page.click(".otree-btn-next")
    else:  # Welcome, Rules, GameIntro, SocialValueOrientation (sliders keep their start)
        await page.click(".otree-btn-next")


async def admin_login(page, base_url: str, password: str) -> None:
    """Log in to oTree's admin pages as ``admin`` in a browser page."""
    await page.goto(f"{base_url}/login")
    await page.locator("input[name=username]").type("admin")
    await page.locator("input[name=password]").type(password)
    await page.locator("#btn-login").click()
    await page.wait_for_load_state()


def play_alone(start_url: str, script: Script, *, timeout: float = 180) -> Script:
    """One participant in a browser of its own, played through by ``play`` from a synchronous test."""
    from playwright.async_api import async_playwright

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            page = await browser.new_page()
            await play(page, start_url, script, timeout=timeout)
            await browser.close()

    asyncio.run(run())
    return script
