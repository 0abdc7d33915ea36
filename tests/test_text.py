"""lab/base/text.py, the one place that cleans what participants type, and _static/lab/text.js, which
must count exactly as it does."""

import asyncio
from pathlib import Path

import pytest

from lab.base.text import clean_text, text_length, truncate

PROJECT = Path(__file__).resolve().parent.parent

# Inputs a participant (or a hostile client) can produce; the browser must count them as the
# server does.
SAMPLES = [
    "", "plain", "a\r\nb", "a\rb", "a\nb", "\r\n\r\n", "tab\there", "nul\x00byte", "esc\x1b[31mred",
    "del\x7f", "next line\x85c1", "line\u2028separator", "bad\ufffdbyte", "😀", "👨‍👩‍👧‍👦 family",
    "🇨🇳🇺🇸", "e\u0301 combining", "\u1100\u1161 jamo", "你好，世界！", "混合 text 😀\r\n第二行",
    "  leading and trailing  ", "<script>alert(1)</script>", "\u200bzero width", "ｆｕｌｌ　ｗｉｄｔｈ",
]


def test_line_breaks_count_once():
    assert clean_text("a\r\nb\rc\nd") == "a\nb\nc\nd"
    assert text_length("x" * 298 + "\r\n") == 299


def test_control_characters_and_undecodable_bytes_are_removed():
    assert clean_text("a\x00b\x01c\x1bd\x7fe\x9ff\ufffdg") == "abcdefg"
    assert clean_text("keep\ttab\nand line") == "keep\ttab\nand line"
    assert clean_text("lone \ud800 surrogate") == "lone  surrogate"
    assert clean_text(None) == ""


def test_characters_are_code_points_after_nfc():
    assert text_length("😀你好") == 3
    assert clean_text("e\u0301") == "é" and text_length("e\u0301") == 1
    assert truncate("😀" * 5 + "\r\n", 6) == "😀" * 5 + "\n"


@pytest.mark.browser
def test_browser_counts_every_sample_as_the_server_does():
    from playwright.async_api import async_playwright

    from tests.browser_participant import launch_browser

    async def run():
        async with async_playwright() as playwright:
            browser = await launch_browser(playwright)
            page = await browser.new_page()
            await page.set_content("<html><body></body></html>")
            await page.add_script_tag(path=str(PROJECT / "_static/lab/text.js"))
            results = await page.evaluate("samples => samples.map(s => [LabText.clean(s), LabText.length(s)])", SAMPLES)
            await browser.close()
            return results

    results = asyncio.run(run())
    assert results == [[clean_text(s), text_length(s)] for s in SAMPLES]


def test_base_template_is_otrees_plus_the_reconnecting_and_notices_scripts():
    """_templates/otree/Base_UserFacing.html shadows oTree's own: it must stay oTree's file with
    our lines (the page's language, the reconnecting script, the experimenter's notices, the try-out
    ribbon), so that an oTree upgrade that
    changes it shows up here."""
    import otree

    original = (Path(otree.__file__).parent / "templates/otree/Base_UserFacing.html").read_text()
    ours = (PROJECT / "_templates/otree/Base_UserFacing.html").read_text()
    # oTree's <html> carries the page's language (lab/server/otree_language.py); every other line is oTree's.
    html_with_lang = '<html lang="{{ lab_html_lang() }}">'
    original_lines = [html_with_lang if line == "<html>" else line for line in original.splitlines()]
    added = [line for line in ours.splitlines() if line not in original_lines]
    assert len(added) == 8 and "lab/server/otree_language.py" in added[0]
    assert "lab/lab-page.js" in added[2]
    assert "lab-notices-state" in added[4] and "lab/lab-notices.js" in added[5]
    assert "TryoutRibbon.html" in added[7]
    assert [line for line in ours.splitlines() if line not in added] == original_lines


def test_session_tabs_are_otrees_plus_dashboard_replay_and_data_package():
    """_templates/otree/Session.html shadows oTree's session tabs (Monitor, Data, Report, ...) to add
    the agents' model line under the title and the Dashboard, Replay and Data package tabs
    (lab/experimenter/admin_views.py); otherwise it stays oTree's file."""
    import otree

    original = (Path(otree.__file__).parent / "templates/otree/Session.html").read_text()
    ours = (PROJECT / "_templates/otree/Session.html").read_text()
    added = [line for line in ours.splitlines() if line not in original.splitlines()]
    assert len(added) == 4 and "lab_model_check" in added[0]
    assert "/LabDashboard/" in added[1] and "/LabReplay/" in added[2] and "/LabDataPackage/" in added[3]
    assert [line for line in ours.splitlines() if line not in added] == original.splitlines()
