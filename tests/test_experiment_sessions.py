"""A shipped experiment other than the paper, played end to end in the lab: the stag hunt
(experiments/stag_hunt.toml: the paper's design with a stag hunt's payoffs), offered on the create
page, played by oTree's bots with the agents (simulated model) and human-human, its points from its
own payoff table, its record naming its experiment, its data package valid in frictionless, and
the analysis reading it."""

from __future__ import annotations

import csv
import json
import re

import pytest

from experiment_design import EXPERIMENTS_DIR, load
from tests.lab_server import run_bots
from tests.test_data_package import _validate

ROUNDS = 2
STAG_HUNT = load(EXPERIMENTS_DIR / "stag_hunt.toml")


def _bots(project_copy, database_url, config, participants, export_dir, **overrides) -> str:
    result = run_bots(project_copy, config, participants, {"rounds_per_game": ROUNDS, **overrides},
                      database_url=database_url, export_dir=export_dir)
    return result.stdout.split("Bots completed session ", 1)[1].split()[0]


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.server
def test_the_stag_hunt_is_played_paid_recorded_and_analysed_as_its_file_says(project_copy, database_url, tmp_path):
    folder = tmp_path / "export"
    agents = _bots(project_copy, database_url, "stag_hunt_hf_informed_wc_first", 2, folder, llm_provider="simulated")
    humans = _bots(project_copy, database_url, "stag_hunt_hh_uninformed_woc_first", 4, folder)

    for code in (agents, humans):
        decisions = _rows(folder / f"payment_custom_export_decisions_{code}.csv")
        assert len(decisions) == 4 * 2 * ROUNDS  # 2 humans and their agents, or 4 humans; 2 games
        for row in decisions:
            if row["player_kind"] == "human" and row["after_drop"] != "True":
                own, other = STAG_HUNT.payoff_matrix[(row["choice"], row["associate_choice"])]
                assert (float(row["payoff"]), float(row["associate_payoff"])) == (own, other), row
        manifest = json.loads((folder / f"manifest_{code}.json").read_text(encoding="utf-8"))
        assert manifest["experiment"]["name"] == "stag_hunt"
        assert manifest["experiment"]["text"] == STAG_HUNT.text
        assert manifest["experiment"]["design_sha256"] == STAG_HUNT.canonical_hash
        assert manifest["payoff_table"] == {"AA": [80, 80], "AB": [10, 50], "BA": [50, 10], "BB": [50, 50]}
        assert manifest["differs_at_export"] == {}

    # The agents were told the stag hunt's payoffs, not the paper's.
    calls = _rows(folder / f"payment_custom_export_llm_calls_{agents}.csv")
    decision_prompts = [c["messages"] for c in calls if c["turn"] == "decision"]
    rules = [re.findall(r"receive[^.,]*", p) for p in decision_prompts]
    assert rules and all(r and all("70" not in x for x in r) and any("50" in x for x in r) for r in rules), rules[:2]

    # Its questionnaires are the file's: no familiarity page, the others numbered as shown.
    page_times = [row for path in folder.glob("PageTimes*.csv") for row in _rows(path)]
    shown = {row["page_name"] for row in page_times if row["app_name"] == "questionnaire"}
    assert "Familiarity" not in shown and {"SocialValueOrientation", "Demographics"} <= shown, shown
    answers = [row for path in folder.glob("questionnaire_*.csv") for row in _rows(path)]
    assert answers and all(not row["player.llm_familiarity"] for row in answers)
    assert all(row["player.svo_angle"] for row in answers)

    package = _validate(folder / "datapackage.json")
    quiz = {f["name"]: f for r in package["resources"] if r["path"].startswith(f"instructions_{agents}")
            for f in r["schema"]["fields"]}
    assert quiz["player.quiz_AA"]["constraints"]["enum"] == [10, 50, 80]

    from analysis.__main__ import main as analysis_main

    assert analysis_main([str(folder), "--out", str(tmp_path / "report")]) == 0
