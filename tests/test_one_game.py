"""A design of one game (its [[games]] lists one): offered by the lab, its texts its own in both languages,
its sessions' games and game order read from the experiment, its data package describing one game, and
the analysis naming what it cannot compute. The tests' own files (tests/data/experiments/, read only with
LAB_TEST_EXPERIMENTS=1): one_game_chat.toml (the game with chat, one exchange, perfect strangers) and
one_game_no_chat.toml (the game without chat, a fixed partner); oTree's bots play an H-H session of each
(the second in Chinese), on SQLite, end to end."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from experiment_design import EXPERIMENTS_DIR, TEST_EXPERIMENTS_DIR, load
from experiment_design.check import check_one
from lab.base import i18n
from lab.base.offered_experiments import not_runnable

PAPER = load(EXPERIMENTS_DIR / "paper.toml")
WITH_CHAT = load(TEST_EXPERIMENTS_DIR / "one_game_chat.toml")
WITHOUT_CHAT = load(TEST_EXPERIMENTS_DIR / "one_game_no_chat.toml")
ROUNDS = 2


def test_a_design_of_one_game_runs_in_the_lab_with_its_own_app_sequence():
    for experiment, app in ((WITH_CHAT, "game_with_chat"), (WITHOUT_CHAT, "game_without_chat")):
        assert not_runnable(experiment, PAPER) == []
        assert check_one(TEST_EXPERIMENTS_DIR / f"{experiment.name}.toml")[1] == []  # en and zh_hans texts too
        configs = experiment.session_configs()
        assert {config["app_sequence"][1] for config in configs} == {app}
        assert all(len(config["app_sequence"]) == 4 and config["name"].endswith("_only") for config in configs)
    assert {config["game_order"] for config in WITH_CHAT.session_configs()} == {"WC"}


def test_the_texts_of_one_game_say_one_game_in_each_language():
    def shown(experiment, slot, language):  # as one line
        return " ".join(i18n.text(language, experiment.text_key(slot), **experiment.text_params(language)).split())

    for experiment in (WITH_CHAT, WITHOUT_CHAT):
        assert "one game of" in shown(experiment, "rules_body", "en")
        assert "一个游戏" in shown(experiment, "rules_body", "zh_hans")
        for language in ("en", "zh_hans"):
            assert "two" not in shown(experiment, "rules_body_after", language)
            assert "两个" not in shown(experiment, "rules_body_after", language)
        assert shown(experiment, "game_of", "en").format(game_index=1) == "Game 1 of 1"
        assert shown(experiment, "points_total", "en") == "Points in the game"
    assert "one message" in shown(WITH_CHAT, "rules_body_after", "en")
    assert "without exchanging messages" in shown(WITHOUT_CHAT, "rules_body_after", "en")
    assert "the same in every round" in shown(WITHOUT_CHAT, "rules_body", "en")
    # the paper's two games keep the paper's texts
    assert PAPER.text_key("points_total") == "payment_points_total" and PAPER.text_key("game_of") == "common_game_of"


def test_a_session_of_one_game_plays_the_games_of_its_order(monkeypatch):
    from lab.base.session_settings import SessionConfigError, params_from_config, validate

    monkeypatch.setenv("LAB_TEST_EXPERIMENTS", "1")
    config = dict(associate_type="human", label_setting="informed", game_order="WoC", language="en",
                  experiment=WITHOUT_CHAT.name, experiment_sha256=WITHOUT_CHAT.text_sha256)
    p = params_from_config(config, WITHOUT_CHAT)
    assert (p.games, p.game_index("WoC")) == (("WoC",), 1)
    assert validate(config, 2).games == ("WoC",)  # a fixed partner in one game: two people suffice
    with pytest.raises(SessionConfigError, match="'game_order' is 'WC-WoC'; it must be one of WoC"):
        validate(dict(config, game_order="WC-WoC"), 2)
    paper = params_from_config(dict(config, experiment="paper", game_order="WoC-WC"), PAPER)
    assert (paper.games, paper.game_index("WC")) == (("WoC", "WC"), 2)


def test_a_fixed_partner_for_one_game_pairs_two_people():
    import random

    from lab.base import matching

    [(first, second)] = matching.fixed_partner_pairs(2, 1, random.Random(0), games=1)
    assert {first, second} == {0, 1}
    with pytest.raises(matching.MatchingError):
        matching.fixed_partner_pairs(2, 1, random.Random(0))  # two games need a new partner in the second


def test_the_data_dictionary_describes_a_one_game_session_s_game_order():
    from lab.base.session_game import treatment_values
    from lab.record import data_dictionary as dd

    column = dd.SESSION_KEYS["game_order"]
    assert (column.description, column.enum) == ("order of the two games", ("WC-WoC", "WoC-WC"))
    one_game = column.of_session({**dd.TODAY, **treatment_values(WITH_CHAT)})
    assert one_game.enum == ("WC",) and "one game" in one_game.description


def test_the_analysis_overview_says_what_a_one_game_package_cannot_compute():
    from analysis.overview import one_game_notes

    def decisions(game, order):
        return pd.DataFrame({"source": ["lab"], "game": [game], "game_order": [order]})

    assert one_game_notes(decisions("WC", "WC-WoC")) == []
    [with_chat] = one_game_notes(decisions("WC", "WC"))
    assert "game order WC" in with_chat and "no comparison of the two games is computable" in with_chat
    assert len(one_game_notes(decisions("WoC", "WoC"))) == 2  # and the sections on WC are empty


def _shown(path) -> str:
    """What the participant saw of a kept page: without oTree's debug panel, which lists every text."""
    return path.read_text(encoding="utf-8").split('<div class="card debug-info">')[0]


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _bots(project_copy, config: str, participants: int, folder, pages, language: str) -> str:
    """A session of ``config`` in ``language`` played by oTree's bots on SQLite; its code."""
    from tests.lab_server import run_test_experiment_bots

    return run_test_experiment_bots(project_copy, config, participants,
                                    {"rounds_per_game": ROUNDS, "language": language}, pages, export_dir=folder)


@pytest.mark.server
def test_a_session_of_only_the_game_with_chat_is_played_paid_exported_and_analysed(project_copy, tmp_path):
    from analysis.__main__ import main as analysis_main
    from tests.test_data_package import _validate

    folder, pages = tmp_path / "export", tmp_path / "pages"
    code = _bots(project_copy, "test_one_chat_hh_informed_wc_only", 4, folder, pages, "en")

    manifest = json.loads((folder / f"manifest_{code}.json").read_text(encoding="utf-8"))
    assert manifest["experiment"]["name"] == "one_game_chat"
    assert manifest["session_config"]["app_sequence"] == ["instructions", "game_with_chat", "questionnaire", "payment"]
    assert not list(folder.glob(f"game_without_chat_{code}.csv"))  # the app is not in the session
    decisions = _rows(folder / f"payment_custom_export_decisions_{code}.csv")
    assert len(decisions) == 4 * ROUNDS
    assert {(row["game"], row["game_index"], row["game_order"]) for row in decisions} == {("WC", "1", "WC")}
    messages = _rows(folder / f"payment_custom_export_messages_{code}.csv")
    assert {row["stage"] for row in messages} == {"1"}  # one exchange

    # paid for the game played: the fee, its points at the rate, a bonus per correct estimate (one game)
    participants = _rows(folder / f"payment_custom_export_{code}.csv")
    assert len(participants) == 4
    for row in participants:
        assert row["points_WoC"] == row["norm_true_WoC"] == row["norm_correct_WoC"] == ""
        assert row["norm_estimate_WoC"] == ""
        bonus = 10.0 * (row["norm_correct_WC"] == "True")
        assert float(row["payout"]) == pytest.approx(15.0 + 0.06 * int(row["points_WC"]) + bonus)
    payment = _shown(pages / f"{code}_{decisions[0]['player_code']}_payment_Payment_1.html")
    assert "Points in the game" in payment and "both games" not in payment
    assert "Estimate for game 2" not in payment and "Estimate for game 1" in payment
    decision_page = _shown(next(pages.glob(f"{code}_*_game_with_chat_Decision_1.html")))
    assert "Game 1 of 1" in decision_page

    package = _validate(folder / "datapackage.json")
    fields = {f["name"]: f for r in package["resources"] if r["path"].startswith("payment_custom_export_decisions_")
              for f in r["schema"]["fields"]}
    assert fields["game_order"]["constraints"]["enum"] == ["WC"]

    report = tmp_path / "report"
    assert analysis_main([str(folder), "--out", str(report)]) == 0
    assert "Sessions of a design with one game (game order WC)" in (report / "report.html").read_text(encoding="utf-8")


@pytest.mark.server
def test_a_session_of_only_the_game_without_chat_with_a_fixed_partner_is_paid_and_analysed(project_copy, tmp_path):
    """Two people, one fixed pair, no chat, in Chinese; the analysis of data without the game with chat says so."""
    from analysis.__main__ import main as analysis_main

    folder, pages = tmp_path / "export", tmp_path / "pages"
    code = _bots(project_copy, "test_one_no_chat_hh_informed_woc_only", 2, folder, pages, "zh_hans")
    decisions = _rows(folder / f"payment_custom_export_decisions_{code}.csv")
    assert {(row["game"], row["game_index"]) for row in decisions} == {("WoC", "1")}
    assert len({(row["player_code"], row["associate_code"]) for row in decisions}) == 2  # one partner, all rounds
    for row in _rows(folder / f"payment_custom_export_{code}.csv"):
        assert row["points_WC"] == row["norm_estimate_WC"] == ""
        bonus = 10.0 * (row["norm_correct_WoC"] == "True")
        assert float(row["payout"]) == pytest.approx(15.0 + 0.06 * int(row["points_WoC"]) + bonus)
    payment = _shown(next(pages.glob(f"{code}_*_payment_Payment_1.html")))
    assert "游戏的总得分" in payment and "两个游戏" not in payment
    decision_page = _shown(next(pages.glob(f"{code}_*_game_without_chat_Decision_1.html")))
    assert "第 1 个游戏，共 1 个" in decision_page
    report = tmp_path / "report"
    assert analysis_main([str(folder), "--out", str(report)]) == 0
    assert "No session played the game with chat (WC)" in (report / "report.html").read_text(encoding="utf-8")
