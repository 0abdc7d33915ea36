"""What participants see, in Chromium, in a Chinese H-H session (the paper's lab): the quiz
says which answer was wrong and keeps the right ones; the message page's button says 发送 and
its counter reads 还可输入 N 字; the decision page shows the payoff table and the round's
messages both ways, as text; money is in 元 with full-width colons. The server's language is
English: oTree's own texts and every page's language are the session's all the same."""

import asyncio
import re

import pytest

from tests.browser_participant import arrive, launch_browser
from tests.lab_server import QUIZ_ANSWERS

MESSAGES = [{1: "<b>粗体</b> 我们都选A吧", 2: "好的：A"}, {1: "Hi 🤝 let's both pick A", 2: "A together"}]


async def next_page(page, *names: str, timeout: float = 90_000) -> str:
    """Wait until the participant is on one of ``names`` (wait pages advance by themselves)."""
    await arrive(page, lambda url: page_name_of(url) in names, timeout / 1000)
    return page_name_of(page.url)


def page_name_of(url: str) -> str:
    match = re.search(r"/p/[^/]+/[^/]+/([^/]+)/\d+", url)
    return match.group(1) if match else ""


async def click_next(page) -> None:
    await page.locator(".otree-btn-next").first.click()


async def take_part(page, start_url: str, index: int, seen: dict, shots) -> None:
    await page.goto(start_url)
    await next_page(page, "Welcome")
    seen["welcome"] = await page.locator(".otree-content").inner_text()
    seen["frame"] = await page.evaluate(
        "[document.documentElement.lang, document.querySelector('.powered-by-otree').innerText.trim(),"
        " document.getElementById('lab-tryout-ribbon').innerText.trim()]")
    await click_next(page)
    await next_page(page, "Rules")
    await click_next(page)

    await next_page(page, "Quiz")
    answers = dict(QUIZ_ANSWERS)
    if index == 0:
        answers["quiz_AB"] = "80"  # wrong: one's own points when choosing A against B are 10
    for name, value in answers.items():
        await page.check(f"input[name={name}][value='{value}']")
    await click_next(page)
    if index == 0:
        await page.locator(".lab-quiz-feedback").wait_for()
        seen["quiz_feedback"] = {
            "marked": [await q.get_attribute("id") for q in await page.locator("fieldset.lab-quiz-wrong").all()],
            "kept": {name: await page.locator(f"input[name={name}]:checked").get_attribute("value")
                     for name in QUIZ_ANSWERS if name != "quiz_AB"},
            "wrong_cleared": await page.locator("input[name=quiz_AB]:checked").count() == 0,
            "banner": await page.locator(".otree-form-errors").inner_text(),
        }
        await page.screenshot(path=str(shots / "quiz-feedback.png"), full_page=True)
        await page.check("input[name=quiz_AB][value='10']")
        await click_next(page)

    await next_page(page, "GameIntro")
    await click_next(page)
    for stage in (1, 2):
        await next_page(page, f"Message{stage}")
        if stage == 1:
            seen["send_button"] = (await page.locator(".otree-btn-next").inner_text()).strip()
            seen["counter_empty"] = (await page.locator(".lab-counter").inner_text()).strip()
        await page.locator("textarea").click()
        await page.keyboard.type(MESSAGES[index][stage])
        if stage == 1:
            seen["counter_typed"] = (await page.locator(".lab-counter").inner_text()).strip()
        await page.locator(".otree-btn-next").click()
        await next_page(page, f"Read{stage}")
        await click_next(page)

    await next_page(page, "Decision")
    seen["decision_text"] = await page.locator(".otree-content").inner_text()
    seen["payoff_cells"] = await page.locator("table.lab-payoffs td").all_inner_texts()
    seen["own"] = await page.locator(".lab-own-message").all_inner_texts()
    seen["associate"] = await page.locator(".lab-associate-message").all_inner_texts()
    seen["markup_in_messages"] = await page.locator(".lab-message b").count()
    await page.screenshot(path=str(shots / f"decision{index}.png"), full_page=True)
    await page.click("#choice-A")
    await next_page(page, "Result")


@pytest.mark.browser
@pytest.mark.server
def test_what_participants_see_in_chinese(lab_server, database_url, tmp_path):
    from playwright.async_api import async_playwright

    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="1", OTREE_LANGUAGE_CODE="en")
    session = server.create_session("hh_informed_wc_first", 2, language="zh_hans")  # defaults: 1 round
    codes = [p["code"] for p in session["participants"]]
    seen = [{}, {}]

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            pages = [await (await browser.new_context()).new_page() for _ in codes]
            try:
                await asyncio.gather(*(take_part(page, server.start_url(code), i, seen[i], tmp_path)
                                       for i, (page, code) in enumerate(zip(pages, codes))))
            finally:
                for i, page in enumerate(pages):
                    await page.screenshot(path=str(tmp_path / f"participant{i}.png"), full_page=True)
                await browser.close()

    asyncio.run(run())
    first, second = seen
    # The page's language and oTree's footer are the session's, not the server's; the try-out
    # server (oTree's debug mode) says what it is.
    assert first["frame"] == ["zh-Hans", "由oTree提供支持", "试用服务器（调试模式）：不可用于有参与者的实验"]
    # Money in 元, as in the admin; never the code.
    assert "15 元" in first["welcome"] and "CNY" not in first["welcome"]
    # The failed quiz marks the wrong answer, clears it, keeps the right ones.
    feedback = first["quiz_feedback"]
    assert feedback["marked"] == ["question-quiz_AB"] and feedback["wrong_cleared"]
    assert feedback["kept"] == {name: value for name, value in QUIZ_ANSWERS.items() if name != "quiz_AB"}
    assert "标出的答案不正确" in feedback["banner"]
    # The message page: 发送, and a counter that reads naturally and counts what was typed.
    assert first["send_button"] == "发送"
    assert first["counter_empty"] == "还可输入 300 字"
    assert first["counter_typed"] == f"还可输入 {300 - len(MESSAGES[0][1])} 字"
    # The decision page: the payoff table and both stages' messages, both ways, as plain text.
    for seen_by, own, other in ((first, MESSAGES[0], MESSAGES[1]), (second, MESSAGES[1], MESSAGES[0])):
        assert seen_by["payoff_cells"] == ["70, 70", "10, 80", "80, 10", "40, 40"]
        assert seen_by["own"] == [own[1], own[2]]
        assert seen_by["associate"] == [other[1], other[2]]
        assert seen_by["markup_in_messages"] == 0
        assert "本轮的信息" in seen_by["decision_text"]
        # Full-width colons after Chinese (participants' own messages aside).
        page_text = seen_by["decision_text"]
        for message in (*own.values(), *other.values()):
            page_text = page_text.replace(message, "")
        assert not re.search("[\u4e00-\u9fff]\\s*:", page_text + first["welcome"])
