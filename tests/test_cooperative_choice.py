"""A game whose cooperative choice is B, or that names none (game.cooperative_choice): the create
page offers it, the norm page asks for the share of B, the payment's true cooperation rate, the
dashboard's cooperation and agreement figures and the data package count B (none: no cooperation
rate shown, none counted), as units; and a bot session (SQLite, LAB_TEST_EXPERIMENTS=1) of the
tests' own b_cooperates.toml, its payment and dashboard recounted from the exports."""

from __future__ import annotations

import csv
import json
import re
from types import SimpleNamespace

import pytest

import protocol
from experiment_design import EXPERIMENTS_DIR, TEST_EXPERIMENTS_DIR, check, load, load_text
from lab.base.offered_experiments import not_runnable
from lab.base.session_game import SessionGame, protocol_values
from lab.experimenter.proposals import chat_reading
from tests.test_random_matching_and_norm_estimates import _slot

PAPER = load(EXPERIMENTS_DIR / "paper.toml")
B_COOPERATES = load(TEST_EXPERIMENTS_DIR / "b_cooperates.toml")
ROUNDS = 2
DATABASE = "sqlite:///db.sqlite3"  # the project copy's: what is counted does not depend on the database


def _without_cooperation():
    """b_cooperates.toml naming no cooperative choice (so no norm estimates, nor their bonus)."""
    text = B_COOPERATES.text.replace('cooperative_choice = "B"\n', "").replace("norm_bonus = 10.0", "norm_bonus = 0")
    text = re.sub(r"norm_intervals = .*\n", "", text.replace('"norm_estimates", ', ""))
    text = text.replace('session_config_prefix = "test_b_cooperates_"', 'session_config_prefix = "test_no_coop_"')
    return load_text(text, "no_cooperation")


NO_COOPERATION = _without_cooperation()


@pytest.mark.parametrize("experiment", [B_COOPERATES, NO_COOPERATION], ids=lambda experiment: experiment.name)
def test_a_cooperative_choice_b_or_none_runs_and_passes_the_check(experiment, tmp_path):
    assert experiment.cooperative_choice == ("B" if experiment is B_COOPERATES else None)
    assert not_runnable(experiment, PAPER) == []
    path = tmp_path / f"{experiment.name}.toml"
    path.write_text(experiment.text, encoding="utf-8")
    assert check(path) == []


@pytest.mark.parametrize("language", ["en", "zh_hans"])
def test_the_norm_page_asks_for_the_share_of_the_cooperative_choice(language):
    assert "<b>B</b>" in _slot(B_COOPERATES, "norm_intro", language)
    assert "<b>A</b>" in _slot(PAPER, "norm_intro", language)
    assert "norm_intro" not in NO_COOPERATION.text_keys  # no norm estimate page


def test_the_data_package_says_which_choice_counts_as_cooperation():
    from lab.record.data_dictionary import CHOICE
    from lab.record.data_dictionary_otree import APP_PLAYER_FIELDS

    cooperations = APP_PLAYER_FIELDS["payment"]["cooperations_WC"]
    described = {experiment.name: (CHOICE.of_session(protocol_values(experiment)).description,
                                   cooperations.of_session(protocol_values(experiment)).description)
                 for experiment in (PAPER, B_COOPERATES, NO_COOPERATION)}
    assert "(A counts as cooperation)" in described["paper"][0] and described["paper"][1] == "A choices in WC"
    assert "(B counts as cooperation)" in described["b_cooperates"][0]
    assert described["b_cooperates"][1] == "B choices in WC"
    assert "(no choice counts as cooperation)" in described["no_cooperation"][0]
    assert described["no_cooperation"][1].startswith("not counted: no choice counts as cooperation")


# One pair-round each of two pairs: P1 and P2 both chose B, P3 A and P4 B; each side's latest message
# proposed B.
PLAYER_ROWS = [(1, "B", False, 1, "P2", "B", "70", False), (1, "B", False, 2, "P1", "B", "70", False),
               (1, "A", False, 3, "P4", "B", "80", False), (1, "B", False, 4, "P3", "A", "10", False)]
PROPOSALS = {(1, "P1|P2"): {"P1": "B", "P2": "B"}, (1, "P3|P4"): {"P3": "B", "P4": "B"}}


def _dashboard_game(monkeypatch, cooperative: str | None) -> dict:
    """The dashboard's figures of a with-chat game of those rows, whose cooperative choice is ``cooperative``."""
    from lab.experimenter import dashboard

    game = SessionGame(("A", "B"), B_COOPERATES.payoff_matrix, cooperative, ())
    columns = SimpleNamespace(choice=None, choice_timed_out=None, participant_id=None, associate_code=None,
                              associate_choice=None, after_drop=None)
    tables = SimpleNamespace(Player=columns, with_chat=True)

    def latest_proposals(tables, session, unsent):
        unsent[1] = [0, 4]
        return PROPOSALS

    monkeypatch.setattr(dashboard, "params", lambda session: SimpleNamespace(games=["WC"], rounds_per_game=1,
                                                                              with_agents=False))
    monkeypatch.setattr(dashboard, "session_game", lambda session: game)
    monkeypatch.setattr(dashboard.app_registry, "game_tables", lambda name: tables)
    monkeypatch.setattr(dashboard, "_payoff_text", lambda Player: None)
    monkeypatch.setattr(dashboard, "_columns", lambda Player, session, Model, *names: PLAYER_ROWS)
    monkeypatch.setattr(dashboard, "_latest_proposals", latest_proposals)
    return dashboard.experiment(SimpleNamespace(), codes={1: "P1", 2: "P2", 3: "P3", 4: "P4"})["games"]["WC"]


def test_the_dashboard_counts_the_session_s_cooperative_choice_and_shows_no_rate_without_one(monkeypatch):
    b = _dashboard_game(monkeypatch, "B")
    assert (b["cooperative_choice"], b["other_choices"]) == ("B", ["A"])
    assert b["human_cooperation"]["successes"] == [3] and b["human_cooperation"]["trials"] == [4]
    assert b["agreement"]["successes"] == [2] and b["breach"]["successes"] == [1]  # P3's A breaks the agreement
    a = _dashboard_game(monkeypatch, "A")
    assert a["human_cooperation"]["successes"] == [1] and a["agreement"]["successes"] == [0]
    none = _dashboard_game(monkeypatch, None)
    assert none["cooperative_choice"] is None and none["decisions"] == [4]
    assert none["human_cooperation"] is none["agent_cooperation"] is none["agreement"] is none["breach"] is None
    assert none["humans_unsent_messages"] == {"count": [0], "of": [4]}  # what does not need cooperation stays


def _play(project_copy, config: str, folder, pages) -> str:
    from tests.lab_server import run_test_experiment_bots

    return run_test_experiment_bots(project_copy, config, 4, {"rounds_per_game": ROUNDS, "language": "en"}, pages,
                                    database_url=DATABASE, export_dir=folder, database="lab")


@pytest.mark.server
def test_a_session_where_b_is_cooperation_pays_and_shows_the_rate_of_b(project_copy, tmp_path):
    from tests.lab_server import PYTHON, lab_env
    from tests.processes import run
    from tests.test_dashboard_recount import DASHBOARDS, _csv, check_earnings, check_game, recount_game

    folder, pages = tmp_path / "export", tmp_path / "pages"
    code = _play(project_copy, "test_b_cooperates_hh_informed_wc_first", folder, pages)
    decisions = _csv(folder, "custom_export_decisions", code)
    participants = _csv(folder, "custom_export", code)
    assert len(decisions) == 4 * 2 * ROUNDS and len(participants) == 4
    chose = {choice: sum(row["choice"] == choice for row in decisions) for choice in "AB"}
    assert chose["A"] != chose["B"]  # the bots' choices tell A's count from B's

    # The payment: each participant's B choices (oTree's export of the payment app), and each estimate
    # checked against the others' rate of B.
    with (folder / f"payment_{code}.csv").open(encoding="utf-8-sig", newline="") as file:
        tallies = {row["participant.code"]: row for row in csv.DictReader(file)}
    intervals = B_COOPERATES.design.questionnaires.norm_intervals
    for row in participants:
        correct = 0
        for game in protocol.GAMES:
            own = [d for d in decisions if d["game"] == game and d["player_code"] == row["participant_code"]]
            assert int(tallies[row["participant_code"]][f"player.cooperations_{game}"]) == sum(
                d["choice"] == "B" for d in own)
            others = [d for d in decisions if d["game"] == game and d["player_code"] != row["participant_code"]]
            true = protocol.norm_interval_index(100 * sum(d["choice"] == "B" for d in others) / len(others),
                                                intervals)
            assert int(row[f"norm_true_{game}"]) == true, (row, game)
            assert (row[f"norm_correct_{game}"] == "True") == (int(row[f"norm_estimate_{game}"]) == true)
            correct += row[f"norm_correct_{game}"] == "True"
        points = sum(int(row[f"points_{game}"]) for game in protocol.GAMES)
        assert float(row["payout"]) == pytest.approx(protocol.SHOW_UP_FEE + protocol.CURRENCY_PER_POINT * points
                                                     + protocol.NORM_BONUS * correct)
    # The norm page asked for the share of B.
    norm_pages = [path.read_text(encoding="utf-8") for path in pages.glob(f"{code}_*_NormEstimates_1.html")]
    assert len(norm_pages) == 4 and all("what share were <b>B</b>" in page for page in norm_pages)

    # The dashboard: the rate of B, and agreements on B (the chat read by the session's game), recounted.
    dashboard = run([PYTHON, "-c", DASHBOARDS, code], cwd=project_copy, capture_output=True, text=True, timeout=300,
                    env=lab_env(DATABASE, LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS), LAB_TEST_EXPERIMENTS="1"))
    assert dashboard.returncode == 0, dashboard.stderr[-3000:]
    shown = json.loads(dashboard.stdout.strip().splitlines()[-1])[code]
    messages = _csv(folder, "custom_export_messages", code)
    reading = chat_reading({"A": ["A"], "B": ["B"]}, B_COOPERATES.payoff_matrix, "B")
    for game in protocol.GAMES:
        assert shown["games"][game]["cooperative_choice"] == "B"
        counted = recount_game(decisions, messages, game, cooperative="B", reading=reading, rounds_per_game=ROUNDS)
        check_game(shown["games"][game], counted, with_agents=False, with_chat=game == "WC")
    check_earnings(shown["earnings"], decisions, participants)

    # The data package, the record and the analysis of the package: cooperation is choosing B.
    package = json.loads((folder / "datapackage.json").read_text(encoding="utf-8"))
    [resource] = [r for r in package["resources"] if r["path"] == f"payment_{code}.csv"]
    fields = {field["name"]: field["description"] for field in resource["schema"]["fields"]}
    assert fields["player.cooperations_WC"] == "B choices in WC"
    from analysis import analyse, load_exports
    from analysis.manifest import load_manifests, sessions_experiment

    experiment = sessions_experiment(load_manifests([folder]))
    assert experiment.cooperative_choice == "B"
    analysed = analyse(load_exports(folder), cooperative_choice=experiment.cooperative_choice).decisions
    assert len(analysed) and (analysed["cooperated"] == analysed["choice"].eq("B")).all()


def test_the_analysis_reports_no_cooperation_of_a_design_without_a_cooperative_choice(tmp_path):
    from analysis import run

    with pytest.raises(ValueError, match="names no cooperative choice: there is no cooperation rate to report"):
        run(tmp_path, tmp_path / "report", experiment=NO_COOPERATION)
    assert not (tmp_path / "report").exists()
