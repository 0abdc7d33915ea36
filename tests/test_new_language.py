"""A language is files: the tests' German lab (tests/data/experiments/german_lab.toml, locale/de.toml,
locale/de/) played end to end. oTree's bots play an informed H-F session on SQLite with the
simulated model, on a German server (OTREE_LANGUAGE_CODE=de); participants read German pages (the lab's texts, the file's words for the
associates, its currency), the agents are told to chat in German and do, and the session's data
says German. The check's naming of missing keys: tests/test_experiment_check.py."""

from __future__ import annotations

import csv
import json

import pytest

from agents.simulated import MESSAGE_TEMPLATES
from experiment_design import EXPERIMENTS_DIR, TEST_EXPERIMENTS_DIR, load
from lab.base import i18n
from tests.lab_server import run_test_experiment_bots
from tests.test_data_package import _validate

ROUNDS = 2
GERMAN_LAB = load(TEST_EXPERIMENTS_DIR / "german_lab.toml")


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_the_german_lab_runs_in_german_on_a_server_of_another_language():
    from experiment_design import session_configs
    from lab.base.offered_experiments import not_runnable

    assert not_runnable(GERMAN_LAB, load(EXPERIMENTS_DIR / "paper.toml")) == []
    assert {config["language"] for config in session_configs(GERMAN_LAB, server_language="zh_hans")} == {"de"}
    assert {config["language"] for config in session_configs(GERMAN_LAB, server_language="en")} == {"en"}


@pytest.mark.server
def test_a_german_session_shows_german_pages_and_its_agents_chat_in_german(project_copy, tmp_path):
    folder, pages = tmp_path / "export", tmp_path / "pages"
    code = run_test_experiment_bots(project_copy, "test_de_hf_informed_wc_first", 2,
                                    {"rounds_per_game": ROUNDS, "llm_provider": "simulated"}, pages,
                                    export_dir=folder, extra_env={"OTREE_LANGUAGE_CODE": "de"})

    # What participants read: every kept page in German, as <html lang> says.
    shown = {path.name: path.read_text(encoding="utf-8").split('<div class="card debug-info">')[0]
             for path in pages.iterdir()}
    assert shown and all('<html lang="de">' in page for page in shown.values())
    texts = i18n.texts("de")
    for suffix, expected in [
        ("_Welcome_1.html", ("<b>5 Euro</b>", "<b>0.01 Euro pro Punkt</b>", "„Weiter“")),
        ("_GameIntro_1.html", ("In diesem Spiel sind Ihre Gegenüber <b>intelligente Maschinen</b>.",)),
        ("_Decision_1.html", (texts["game_decision_prompt"], texts["common_timer"])),
        ("_Payment_1.html", (texts["payment_title"], texts["payment_show_up_fee"])),
    ]:
        found = [page for name, page in shown.items() if name.endswith(suffix)]
        assert found, suffix
        for page in found:
            for text in expected:
                assert text in page, (suffix, text)
            assert "Your associate" not in page and "您的" not in page and "CNY" not in page

    # The agents: the German system prompt and examples, asked to chat in German; they did.
    calls = _rows(folder / f"payment_custom_export_llm_calls_{code}.csv")
    assert calls and all("you converse in German" in call["messages"] and "Lena: Hast du am Wochenende Zeit?"
                         in call["messages"] and json.loads(call["parameters"])["language"] == "de" for call in calls)
    assert any("send your first message in German" in call["messages"] for call in calls)
    german = {option.format(both_a=70, both_b=40) for (_, language), options in MESSAGE_TEMPLATES.items()
              if language == "de" for option in options}
    agent_lines = [row["text"] for row in _rows(folder / f"payment_custom_export_messages_{code}.csv")
                   if row["sender_kind"] == "agent"]
    assert len(agent_lines) == 2 * 2 * ROUNDS and set(agent_lines) <= german

    # The data: the session's language, and the data dictionary's languages are the experiment's.
    manifest = json.loads((folder / f"manifest_{code}.json").read_text(encoding="utf-8"))
    assert manifest["session_config"]["language"] == "de" and manifest["experiment"]["name"] == "german_lab"
    package = _validate(folder / "datapackage.json")
    language = next(field for resource in package["resources"] for field in resource["schema"]["fields"]
                    if field["name"] == "session.config.language")
    assert language["constraints"]["enum"] == ["de", "en"]
