"""Random matching and the norm estimates as an experiment file states them: left out, on the file's
own intervals, or without a bonus (then no page announces one). The texts, the create page's offer,
a session's creation, the frozen answer scales, the data dictionary and the analysis, as units; and
bot sessions (SQLite, LAB_TEST_EXPERIMENTS=1) of the tests' own files: random_no_bonus.toml (random
pairs, no norm estimates, no bonus; English), its pages, payment, dashboard, exports and data package
checked, and random_quarters.toml (the norm estimates on four intervals, 5 CNY each; Chinese), each
estimate paid against the true interval of those four, recounted from the decisions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import protocol
from experiment_design import EXPERIMENTS_DIR, TEST_EXPERIMENTS_DIR, check, load, load_text
from experiment_design.texts import flat_key
from lab.base import i18n
from lab.base.offered_experiments import not_runnable
from lab.base.session_game import from_values, protocol_values
from lab.base.session_settings import SessionConfigError, validate

PAPER = load(EXPERIMENTS_DIR / "paper.toml")
RANDOM = load(TEST_EXPERIMENTS_DIR / "random_no_bonus.toml")
RANDOM_QUARTERS = load(TEST_EXPERIMENTS_DIR / "random_quarters.toml")
ROUNDS = 2
DATABASE = "sqlite:///db.sqlite3"  # the project copy's: what a page shows does not depend on the database
QUARTERS = "norm_intervals = [[0, 25], [25, 50], [50, 75], [75, 100]]"


def _variant(name: str, *replacements: tuple[str, str]):
    text = PAPER.text.replace('session_config_prefix = ""', f'session_config_prefix = "{name}_"')
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return load_text(text, name)


RANDOM_PAPER = _variant("random_paper", ('matching = "perfect_strangers"', 'matching = "random"  #'))
UNPAID = _variant("unpaid", ("norm_bonus = 10.0", "norm_bonus = 0"))
QUARTERED = _variant("quartered", ("norm_intervals = [[0, 20], [20, 40], [40, 60], [60, 80], [80, 100]]", QUARTERS))
WITHOUT_NORMS = _variant("without_norms", ("norm_bonus = 10.0", "norm_bonus = 0"),
                         ('pages = ["norm_estimates", ', "pages = ["),
                         ("norm_intervals = [[0, 20], [20, 40], [40, 60], [60, 80], [80, 100]]", ""))


@pytest.mark.parametrize("experiment", [RANDOM, RANDOM_QUARTERS, RANDOM_PAPER, UNPAID, QUARTERED, WITHOUT_NORMS],
                         ids=lambda experiment: experiment.name)
def test_random_matching_and_the_file_s_norm_estimates_run_and_pass_the_text_check(experiment, tmp_path):
    assert not_runnable(experiment, PAPER) == []
    path = tmp_path / f"{experiment.name}.toml"
    path.write_text(experiment.text, encoding="utf-8")
    assert check(path) == []


def _slot(experiment, slot: str, language: str, norm_bonus: float | None = None) -> str:
    """The text a session of ``experiment`` shows in ``slot`` (lab/shared_pages/pages.py's choice)."""
    bonus = experiment.design.payment.norm_bonus if norm_bonus is None else norm_bonus
    key = flat_key(experiment.session_text_keys(bonus)[slot])
    return i18n.text(language, key, rounds=10, fee="15", rate="0.06", bonus=f"{bonus:g}", currency="CNY",
                     **experiment.text_params(language))


def test_the_random_texts_say_pairs_are_drawn_each_round_and_may_repeat():
    rules = {language: _slot(RANDOM, "rules_body", language) for language in ("en", "zh_hans")}
    assert "drawn at" in rules["en"] and "may meet the same associate again" in rules["en"]
    assert "随机抽取" in rules["zh_hans"] and "可能再次遇到同一位搭档" in rules["zh_hans"]
    assert "never met" not in rules["en"] and "从未遇到过" not in rules["zh_hans"]
    assert "drawn at random" in _slot(RANDOM, "new_associate", "en")
    assert "随机抽取" in _slot(RANDOM, "new_associate", "zh_hans")
    # The quiz: yes, the same associate may come again within a game.
    assert RANDOM.can_meet_same_associate_again and not PAPER.can_meet_same_associate_again


BONUS_WORDS = {"en": ("bonus",), "zh_hans": ("奖金",)}


@pytest.mark.parametrize("language", ["en", "zh_hans"])
def test_no_bonus_is_announced_when_the_file_s_or_the_session_s_bonus_is_0(language):
    def announces(text: str) -> bool:
        return any(word in text for word in BONUS_WORDS[language])

    assert announces(_slot(PAPER, "welcome_terms", language)) and announces(_slot(PAPER, "norm_intro", language))
    for experiment, bonus in ((UNPAID, None), (PAPER, 0), (QUARTERED, 0)):  # the file's 0, or a session's 0
        assert not announces(_slot(experiment, "welcome_terms", language, bonus))
        intro = _slot(experiment, "norm_intro", language, bonus)
        assert not announces(intro) and "<b>A</b>" in intro
    assert not announces(_slot(RANDOM, "welcome_terms", language))
    assert "norm_intro" not in RANDOM.text_keys  # no norm estimate page
    # A session's bonus on a file without one: the paper's texts announce it.
    assert announces(_slot(UNPAID, "welcome_terms", language, norm_bonus=5))
    assert PAPER.session_text_keys(10.0) is PAPER.text_keys  # the paper's session: the paper's texts


def _config(experiment, **extra) -> dict:
    """The experiment's H-H, label-informed, WC-first session config (its values: the file's bonus), with ``extra``."""
    [config] = [config for config in experiment.session_configs()
                if (config["associate_type"], config["label_setting"], config["game_order"])
                == ("human", "informed", "WC-WoC")]
    return {**config, "rounds_per_game": ROUNDS, **extra}


def test_a_session_bonus_without_norm_estimates_is_refused_and_0_runs(monkeypatch):
    monkeypatch.setenv("LAB_TEST_EXPERIMENTS", "1")
    assert validate(_config(RANDOM), 4).norm_bonus == 0
    assert validate(_config(RANDOM), 2).associate_type == "human"  # random pairs: any even number
    with pytest.raises(SessionConfigError, match="asks no norm estimate, which it would pay: set it to 0"):
        validate(_config(RANDOM, norm_bonus=10), 4)
    assert validate(_config(PAPER, norm_bonus=0, rounds_per_game=10), 12).norm_bonus == 0  # a design too


def test_a_session_bonus_turned_off_needs_its_language_s_texts_without_one(tmp_path):
    from experiment_design.texts import session_bonus_problem

    english = (i18n.LOCALE_DIR / "en.toml").read_text(encoding="utf-8")
    (tmp_path / "en.toml").write_text(english.replace("welcome_terms_no_bonus", "welcome_terms_unpaid"),
                                      encoding="utf-8")
    assert session_bonus_problem(PAPER.design, 0, "en", i18n.LOCALE_DIR) is None
    problem = session_bonus_problem(PAPER.design, 0, "en", tmp_path)
    assert "locale/en.toml lacks the texts of a session without one (variants.welcome_terms_no_bonus)" in problem
    assert session_bonus_problem(PAPER.design, 10, "en", tmp_path) is None  # the file's own: the check's


def test_the_frozen_answer_scales_are_the_file_s_intervals_and_the_true_interval_is_read_on_them():
    assert protocol_values(PAPER)["answer_scales"]["norm_intervals"] == [list(b) for b in protocol.NORM_INTERVALS]
    assert protocol_values(QUARTERED)["answer_scales"]["norm_intervals"] == [[0, 25], [25, 50], [50, 75], [75, 100]]
    assert protocol_values(RANDOM)["answer_scales"]["norm_intervals"] == []
    assert from_values(protocol_values(QUARTERED)).norm_intervals == ((0, 25), (25, 50), (50, 75), (75, 100))
    assert from_values(protocol_values(RANDOM)).norm_intervals == ()
    quarters = QUARTERED.design.questionnaires.norm_intervals
    assert [protocol.norm_interval_index(rate, quarters) for rate in (0, 24.9, 25, 60, 100)] == [0, 0, 1, 2, 3]
    assert protocol.norm_interval_index(60) == 3  # the paper's intervals


def test_the_data_dictionary_describes_the_session_s_norm_estimates():
    from lab.record.data_dictionary import PARTICIPANTS

    estimate, true = PARTICIPANTS["norm_estimate_WC"], PARTICIPANTS["norm_true_WC"]
    quartered = estimate.of_session(protocol_values(QUARTERED))
    assert quartered.enum == (0, 1, 2, 3) and "3 = 75-100 %" in quartered.description
    assert true.of_session(protocol_values(QUARTERED)).enum == (0, 1, 2, 3)
    without = estimate.of_session(protocol_values(RANDOM))
    assert not without.enum and "not asked in this experiment" in without.description
    assert estimate.of_session(protocol_values(PAPER)) == estimate  # the paper's: as DATA.md says


def _play(project_copy, config: str, language: str, folder: Path, pages: Path) -> str:
    """A bot session of 4 of a tests' own file's config; its code. Kept in the project copy's database
    (the dashboard reads it)."""
    from tests.lab_server import run_test_experiment_bots

    return run_test_experiment_bots(project_copy, config, 4, {"rounds_per_game": ROUNDS, "language": language},
                                    pages, database_url=DATABASE, export_dir=folder, database="lab")


@pytest.mark.server
def test_a_random_session_without_norm_estimates_pays_and_announces_no_bonus(project_copy, tmp_path):
    from tests.lab_server import PYTHON, lab_env
    from tests.processes import run
    from tests.test_dashboard_recount import DASHBOARDS, _csv, check_earnings
    from tests.test_data_package import _validate

    folder, pages = tmp_path / "export", tmp_path / "pages"
    code = _play(project_copy, "test_random_hh_informed_wc_first", "en", folder, pages)

    # Every participant passed a quiz whose same-associate answer is yes (the bots answer the key).
    quiz = _csv(folder, "custom_export", code, app="instructions")
    assert all(json.loads(row["answers"])["quiz_same_associate"] for row in quiz if row["passed"] in ("1", "True"))
    # Random pairs: everyone has an associate each round, and the pages said they are drawn at random.
    decisions = _csv(folder, "custom_export_decisions", code)
    assert len(decisions) == 4 * 2 * ROUNDS and all(row["associate_code"] for row in decisions)
    shown = {path.name: path.read_text(encoding="utf-8").split('<div class="card debug-info">')[0]
             for path in pages.iterdir()}
    woc_decisions = [page for name, page in shown.items() if "_game_without_chat_Decision_" in name]
    assert len(woc_decisions) == 4 * ROUNDS and all("drawn at random" in page for page in woc_decisions)
    # No bonus announced: not on the welcome page, not on the payment page (nor an estimate line).
    money_pages = [page for name, page in shown.items() if name.endswith(("_Welcome_1.html", "_Payment_1.html"))]
    assert len(money_pages) == 2 * 4 and not any(re.search("bonus|estimate", page, re.I) for page in money_pages)

    # The payment: the show-up fee and the points, no estimate checked.
    participants = _csv(folder, "custom_export", code)
    assert len(participants) == 4
    for row in participants:
        assert all(row[f"{column}_{game}"] == "" for game in protocol.GAMES
                   for column in ("norm_estimate", "norm_true", "norm_correct"))
        points = sum(int(row[f"points_{game}"]) for game in protocol.GAMES)
        assert float(row["payout"]) == pytest.approx(protocol.SHOW_UP_FEE + protocol.CURRENCY_PER_POINT * points)
    dashboard = run([PYTHON, "-c", DASHBOARDS, code], cwd=project_copy, capture_output=True, text=True, timeout=300,
                    env=lab_env(DATABASE, LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS), LAB_TEST_EXPERIMENTS="1"))
    assert dashboard.returncode == 0, dashboard.stderr[-3000:]
    earnings = json.loads(dashboard.stdout.strip().splitlines()[-1])[code]["earnings"]
    assert earnings["norm_estimates"] == 0 and earnings["norm_bonuses_at_most"] == 0
    check_earnings(earnings, decisions, participants, bonus_at_most=0)

    # The record and the data package say so.
    manifest = json.loads((folder / f"manifest_{code}.json").read_text(encoding="utf-8"))
    assert manifest["experiment"]["name"] == "random_no_bonus" and manifest["payment"]["norm_bonus"] == 0
    assert manifest["answer_scales"]["norm_intervals"] == [] and manifest["differs_at_export"] == {}
    package = _validate(folder / "datapackage.json")
    [resource] = [r for r in package["resources"] if r["path"].startswith(f"payment_custom_export_{code}")]
    fields = {field["name"]: field for field in resource["schema"]["fields"]}
    assert "not asked in this experiment" in fields["norm_estimate_WC"]["description"]
    assert "constraints" not in fields["norm_estimate_WC"] or "enum" not in fields["norm_estimate_WC"]["constraints"]

    # The analysis reads the package, its norm columns empty (the report's figures: tests/test_analysis_*).
    from analysis import analyse, load_exports

    sections = analyse(load_exports(folder), norm_intervals=()).sections
    notes = " ".join(note for section in sections for note in section.notes)
    assert "asks no norm estimate" in notes and "could not be computed" not in notes


@pytest.mark.server
def test_norm_estimates_on_the_file_s_intervals_are_paid_against_the_true_one_of_them(project_copy, tmp_path):
    from tests.test_dashboard_recount import _csv

    folder, pages = tmp_path / "export", tmp_path / "pages"
    code = _play(project_copy, "test_quarters_hh_informed_wc_first", "zh_hans", folder, pages)
    quarters = RANDOM_QUARTERS.design.questionnaires.norm_intervals
    decisions = _csv(folder, "custom_export_decisions", code)
    participants = _csv(folder, "custom_export", code)
    assert len(participants) == 4
    for row in participants:
        correct = 0
        for game in protocol.GAMES:
            others = [d for d in decisions if d["game"] == game and d["player_code"] != row["participant_code"]]
            rate = 100 * sum(d["choice"] == "A" for d in others) / len(others)
            true = protocol.norm_interval_index(rate, quarters)
            assert int(row[f"norm_true_{game}"]) == true, (row, game, rate)
            assert int(row[f"norm_estimate_{game}"]) in range(4)
            assert (row[f"norm_correct_{game}"] == "True") == (int(row[f"norm_estimate_{game}"]) == true)
            correct += row[f"norm_correct_{game}"] == "True"
        points = sum(int(row[f"points_{game}"]) for game in protocol.GAMES)
        assert float(row["payout"]) == pytest.approx(protocol.SHOW_UP_FEE + protocol.CURRENCY_PER_POINT * points
                                                     + 5.0 * correct)
    manifest = json.loads((folder / f"manifest_{code}.json").read_text(encoding="utf-8"))
    assert manifest["answer_scales"]["norm_intervals"] == [[0, 25], [25, 50], [50, 75], [75, 100]]
    # Each payment page shows the estimates' lines and the bonus (the bots check the amounts).
    payment_pages = [path.read_text(encoding="utf-8").split('<div class="card debug-info">')[0]
                     for path in pages.glob(f"{code}_*_Payment_1.html")]
    assert len(payment_pages) == 4 and all("对游戏 2 的估计" in page and "奖金" in page for page in payment_pages)
