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
from tests.lab_server import completed_session_code, run_bots
from tests.test_data_package import _validate

ROUNDS = 2
STAG_HUNT = load(EXPERIMENTS_DIR / "stag_hunt.toml")


def _bots(project_copy, database_url, config, participants, export_dir, **overrides) -> str:
    result = run_bots(project_copy, config, participants, {"rounds_per_game": ROUNDS, **overrides},
                      database_url=database_url, export_dir=export_dir)
    return completed_session_code(result)


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


FIXED = load(EXPERIMENTS_DIR / "fixed_partner_one_message.toml")


def _partners_by_game(decisions: list[dict]) -> dict:
    """Each human's associates, by game: {player_code: {game: {associate codes}}}."""
    found: dict = {}
    for row in decisions:
        if row["player_kind"] == "human":
            found.setdefault(row["player_code"], {}).setdefault(row["game"], set()).add(row["associate_code"])
    return found


@pytest.mark.server
def test_a_fixed_partner_with_one_message_exchange_is_played_recorded_and_analysed(project_copy, database_url,
                                                                                  tmp_path):
    """Example 2 (experiments/fixed_partner_one_message.toml), H-H and H-F: each human meets one
    associate in every round of a game and another in the other game; one message each way per round,
    no second exchange; the package valid and analysed."""
    folder = tmp_path / "export"
    agents = _bots(project_copy, database_url, "fixed_partner_one_message_hf_informed_wc_first", 2, folder,
                   llm_provider="simulated")
    humans = _bots(project_copy, database_url, "fixed_partner_one_message_hh_uninformed_woc_first", 4, folder)

    for code, humans_in_session, senders_per_round in ((agents, 2, 4), (humans, 4, 4)):  # humans and agents
        decisions = _rows(folder / f"payment_custom_export_decisions_{code}.csv")
        human_rows = [row for row in decisions if row["player_kind"] == "human"]
        assert len(human_rows) == humans_in_session * 2 * ROUNDS
        partners = _partners_by_game(decisions)
        assert len(partners) == humans_in_session
        for games in partners.values():
            assert sorted(games) == ["WC", "WoC"] and all(len(met) == 1 for met in games.values()), partners
            assert games["WC"] != games["WoC"], "the second game's partner is not the first's"
        messages = _rows(folder / f"payment_custom_export_messages_{code}.csv")
        assert {row["stage"] for row in messages} == {"1"}, "one exchange: no message 2"
        senders = [(row["sender_code"], row["round"]) for row in messages]
        assert len(senders) == len(set(senders)) == senders_per_round * ROUNDS  # each side, each round
        # The quiz's "can you meet the same associate twice within one game?": yes, with a fixed partner.
        [quiz] = [path for path in folder.glob(f"instructions_{code}*.csv")]
        assert {row["player.quiz_same_associate"] for row in _rows(quiz)} == {"1"}
        manifest = json.loads((folder / f"manifest_{code}.json").read_text(encoding="utf-8"))
        assert manifest["experiment"]["name"] == "fixed_partner_one_message"
        assert manifest["experiment"]["design_sha256"] == FIXED.canonical_hash

    # Each agent met one human, in every round of its game; the agents took no second message turn.
    agent_rows = [row for row in _rows(folder / f"payment_custom_export_decisions_{agents}.csv")
                  if row["player_kind"] == "agent"]
    met: dict = {}
    for row in agent_rows:
        met.setdefault((row["player_code"], row["game"]), set()).add(row["associate_code"])
    assert len(met) == 4 and all(len(humans_met) == 1 for humans_met in met.values()), met
    turns = {row["turn"] for row in _rows(folder / f"payment_custom_export_llm_calls_{agents}.csv")}
    assert turns == {"message_1", "decision"}

    _validate(folder / "datapackage.json")
    from analysis.__main__ import main as analysis_main

    assert analysis_main([str(folder), "--out", str(tmp_path / "report")]) == 0


TIT_FOR_TAT = load(EXPERIMENTS_DIR / "tit_for_tat_en.toml")


@pytest.mark.server
def test_example_3_own_personas_with_a_fixed_partner_is_played_recorded_and_analysed(project_copy, database_url,
                                                                                     tmp_path):
    """Example 3 (experiments/tit_for_tat_en.toml): its own persona (tit_for_tat, H-T), its labels,
    currency and fixed partner together: each human meets one agent a game, prompted as the file's
    persona; the record says so; the package valid and analysed."""
    folder = tmp_path / "export"
    code = _bots(project_copy, database_url, "tft_ht_informed_wc_first", 2, folder, llm_provider="simulated")
    decisions = _rows(folder / f"payment_custom_export_decisions_{code}.csv")
    agent_rows = [row for row in decisions if row["player_kind"] == "agent"]
    assert len(agent_rows) == 2 * 2 * ROUNDS
    assert {(row["persona"], row["treatment"]) for row in agent_rows} == {("tit_for_tat", "H-T")}
    for games in _partners_by_game(decisions).values():
        assert all(len(met) == 1 for met in games.values()) and games["WC"] != games["WoC"], games
    calls = _rows(folder / f"payment_custom_export_llm_calls_{code}.csv")
    assert calls and all("RECIPROCATING" in call["messages"] for call in calls)
    manifest = json.loads((folder / f"manifest_{code}.json").read_text(encoding="utf-8"))
    assert manifest["experiment"]["name"] == "tit_for_tat_en" and manifest["payment"]["currency"] == "GBP"
    _validate(folder / "datapackage.json")
    from analysis.__main__ import main as analysis_main

    assert analysis_main([str(folder), "--out", str(tmp_path / "report")]) == 0
    # the sections compare the experiment's own treatment and persona, not the paper's
    assert "not in the sections below" not in (tmp_path / "report" / "report.html").read_text()
    rates = _rows(tmp_path / "report" / "tables" / "cooperation_informed_cooperation_rates.csv")
    assert {(row["who"], row["group"]) for row in rates} == {("participants", "H-T"), ("agents", "tit_for_tat")}
    assert (tmp_path / "report" / "figures" / "cooperation_informed.png").exists()  # not the paper's fig1_
