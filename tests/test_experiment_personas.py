"""An experiment's own personas, label words and currency, played end to end in the lab: the tests'
copy of example 3 (tests/data/experiments/tft_strangers.toml: experiments/tit_for_tat_en.toml with
the paper's perfect-stranger matching), its sessions made by the server only in a test run
(LAB_TEST_EXPERIMENTS=1). oTree's bots play an informed H-T session with the simulated model, and
label-uninformed H-U and H-H sessions; the exports say the persona and its treatment code, the
agents were prompted with the persona's own role-play, the pages named the associates in the file's
words (and uninformed pages the same for both kinds), the data package is valid and the analysis
reads it."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from experiment_design import PROJECT_DIR, TEST_EXPERIMENTS_DIR, load
from tests.lab_server import run_test_experiment_bots
from tests.test_data_package import _validate

ROUNDS = 2
TFT = load(TEST_EXPERIMENTS_DIR / "tft_strangers.toml")
ROLEPLAY = (PROJECT_DIR / TFT.roleplay_file("tit_for_tat", "en")).read_text(encoding="utf-8").strip()


def _bots(project_copy, database_url, config, participants, folder, pages, **overrides) -> str:
    return run_test_experiment_bots(project_copy, config, participants, {"rounds_per_game": ROUNDS, **overrides},
                                    pages, database_url=database_url, export_dir=folder)


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _associates_sentence(pages: Path, code: str) -> set[str]:
    """What each participant's first game page said the associates are."""
    found = set()
    for path in pages.glob(f"{code}_*_GameIntro_1.html"):
        found.update(re.findall(r"your associates (?:are|may be) <b>[^<]*</b>", path.read_text(encoding="utf-8")))
    return found


@pytest.mark.server
def test_an_experiment_s_own_personas_and_labels_are_played_recorded_and_analysed(project_copy, database_url,
                                                                                  tmp_path):
    folder, pages = tmp_path / "export", tmp_path / "pages"
    reciprocating = _bots(project_copy, database_url, "test_tft_ht_informed_wc_first", 2, folder, pages,
                          llm_provider="simulated")
    cooperator = _bots(project_copy, database_url, "test_tft_hu_uninformed_woc_first", 2, folder, pages,
                       llm_provider="simulated")
    humans = _bots(project_copy, database_url, "test_tft_hh_uninformed_wc_first", 4, folder, pages)

    # The persona and its treatment code, as the file names them.
    decisions = _rows(folder / f"payment_custom_export_decisions_{reciprocating}.csv")
    assert {row["treatment"] for row in decisions} == {"H-T"}
    assert {row["associate_type"] for row in decisions} == {"tit_for_tat"}
    agents = [row for row in decisions if row["player_kind"] == "agent"]
    assert len(agents) == 2 * 2 * ROUNDS and {row["persona"] for row in agents} == {"tit_for_tat"}
    assert {row["treatment"] for row in _rows(folder / f"payment_custom_export_decisions_{cooperator}.csv")} == {"H-U"}
    manifest = json.loads((folder / f"manifest_{reciprocating}.json").read_text(encoding="utf-8"))
    assert manifest["treatment"] == "H-T" and manifest["experiment"]["name"] == "tft_strangers"
    assert manifest["payment"]["currency"] == "GBP" and manifest["differs_at_export"] == {}

    # The agents were prompted as the file's persona: its own role-play, its prompt name.
    calls = _rows(folder / f"payment_custom_export_llm_calls_{reciprocating}.csv")
    assert calls and all(ROLEPLAY in call["messages"] and "RECIPROCATING" in call["messages"] for call in calls)
    assert not any("FAIR-MINDED" in call["messages"] for call in calls)

    # The pages named the associates in the file's words; uninformed, alike for agents and humans.
    assert _associates_sentence(pages, reciprocating) == {"your associates are <b>AI</b>"}
    assert _associates_sentence(pages, cooperator) == {"your associates may be <b>AI or human</b>"}
    assert _associates_sentence(pages, humans) == {"your associates may be <b>AI or human</b>"}
    # what participants see: oTree's debug panel (a try-out server's, never production's) lists every text
    shown = {path.name: path.read_text(encoding="utf-8").split('<div class="card debug-info">')[0]
             for path in pages.iterdir()}
    # each participant's welcome, both games' intro and decisions, norm estimates and payment page
    assert len(shown) == (2 + 2 + 4) * (1 + 2 * (1 + ROUNDS) + 1 + 1)
    assert not any("intelligent machines" in page for page in shown.values())  # the paper's words are not this file's

    # The file's currency, where participants read money.
    money_pages = [page for name, page in shown.items() if name.endswith(("_Welcome_1.html", "_Payment_1.html"))]
    assert len(money_pages) == 2 * (2 + 2 + 4)
    assert all("GBP" in page and "CNY" not in page and "元" not in page for page in money_pages)

    package = _validate(folder / "datapackage.json")
    fields = {f["name"]: f for r in package["resources"] if r["path"].startswith("payment_custom_export_decisions_")
              for f in r["schema"]["fields"]}
    assert "H-T" in fields["treatment"]["constraints"]["enum"]
    assert fields["persona"]["constraints"]["enum"] == ["tit_for_tat", "unconditional_cooperator"]

    from analysis.__main__ import main as analysis_main

    assert analysis_main([str(folder), "--out", str(tmp_path / "report")]) == 0


@pytest.mark.server
def test_the_experimenter_sees_the_persona_its_treatment_code_and_currency(lab_server, database_url):
    import requests

    server = lab_server(database_url, LAB_TEST_EXPERIMENTS="1", LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS))
    code = server.create_session("test_tft_ht_informed_wc_first", 2, llm_provider="simulated",
                                 rounds_per_game=ROUNDS)["code"]
    dashboard = requests.get(f"{server.base_url}/LabDashboardData/{code}", timeout=30).json()
    assert (dashboard["treatment"], dashboard["associate_type"]) == ("H-T", "tit_for_tat")
    assert dashboard["earnings"]["currency"] == "GBP"
    agents_page = requests.get(f"{server.base_url}/AdminReport/{code}",
                               params=dict(app_name="game_with_chat", round_number=1), timeout=30).text
    assert "treatment H-T · persona tit_for_tat (RECIPROCATING)" in agents_page
