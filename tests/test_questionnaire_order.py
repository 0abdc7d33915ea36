"""Questionnaire pages in the order an experiment file lists them, not only the paper's: oTree's page
list of a session holds the app's pages in the session's order (lab/otree_patches/page_order.py),
so each page keeps its name, address and index range, and a paper session's list is oTree's own.
oTree's bots play a file listing them in another order
(tests/data/experiments/questionnaires_reordered.toml)."""

from __future__ import annotations

import csv
from collections import namedtuple

import pytest

from experiment_design import EXPERIMENTS_DIR, TEST_EXPERIMENTS_DIR, load
from lab.base.offered_experiments import not_runnable
from lab.otree_patches.page_order import reordered
from tests.lab_server import completed_session_code, run_bots

REORDERED = load(TEST_EXPERIMENTS_DIR / "questionnaires_reordered.toml")
# What the session's page list holds of each page (as otree.lookup.PageLookup), and pages of an app.
Lookup = namedtuple("Lookup", ["app_name", "page_class", "round_number"])
Welcome, A, B, C, X, Payment = (type(name, (), {}) for name in ("Welcome", "A", "B", "C", "X", "Payment"))


def _pages(*entries: tuple) -> dict:
    return {index: Lookup(*entry) for index, entry in enumerate(entries, start=1)}


def test_an_app_s_pages_take_the_session_s_order_in_each_round_and_other_apps_keep_theirs():
    pages = _pages(("quiz", Welcome, 1), ("survey", A, 1), ("survey", B, 1), ("survey", C, 1),
                   ("survey", A, 2), ("survey", B, 2), ("survey", C, 2), ("payment", Payment, 1))
    found = reordered(pages, "survey", [C, A, B])
    assert [(lookup.app_name, lookup.page_class, lookup.round_number) for _, lookup in sorted(found.items())] == [
        ("quiz", Welcome, 1), ("survey", C, 1), ("survey", A, 1), ("survey", B, 1),
        ("survey", C, 2), ("survey", A, 2), ("survey", B, 2), ("payment", Payment, 1)]
    assert pages[2].page_class is A, "oTree's own list is left as it is"
    assert reordered(pages, "survey", (A, B, C)) is pages  # the app's own order: oTree's list itself
    assert reordered(pages, "no_such_app", [X]) is pages


def test_an_order_that_is_not_the_app_s_pages_each_once_is_refused():
    pages = _pages(("survey", A, 1), ("survey", B, 1))
    for order in ([A], [A, A], [A, B, C], [A, X]):
        with pytest.raises(ValueError, match="is not an order of"):
            reordered(pages, "survey", order)


def test_a_file_listing_the_questionnaires_in_its_own_order_is_offered():
    paper = load(EXPERIMENTS_DIR / "paper.toml")
    listed = REORDERED.design.questionnaires.pages
    assert list(listed) != [page for page in paper.design.questionnaires.pages if page in listed]
    assert not_runnable(REORDERED, paper) == []


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.server
def test_a_file_s_own_questionnaire_order_is_shown_numbered_and_recorded(project_copy, tmp_path):
    """A two participants' H-F session on SQLite: the bots answer each page in the file's order, each
    titled with its number as shown (questionnaire/tests.py); PageTimes has the pages in that order,
    under their own names, in the app's index range; the answers are stored and the norm estimates paid."""
    folder = tmp_path / "export"
    result = run_bots(project_copy, "test_reordered_hf_uninformed_woc_first", 2,
                      {"rounds_per_game": 1, "llm_provider": "simulated"}, export_dir=folder,
                      extra_env={"LAB_TEST_EXPERIMENTS": "1"})
    code = completed_session_code(result)

    listed = REORDERED.design.questionnaires.pages  # demographics, social_value_orientation, ...
    times = sorted(_rows(folder / f"PageTimes_{code}.csv"), key=lambda row: int(row["page_index"]))
    questionnaire = [row for row in times
                     if row["app_name"] == "questionnaire" and row["participant_id_in_session"] == "1"]
    assert [row["page_name"] for row in questionnaire] == [page.title().replace("_", "") for page in listed]
    indexes = [int(row["page_index"]) for row in questionnaire]
    assert indexes == list(range(indexes[0], indexes[0] + len(listed)))
    # The app keeps its 7 pages: familiarity, not listed, is the 7th, skipped, before the payment's.
    first_payment = min(int(row["page_index"]) for row in times if row["app_name"] == "payment")
    assert len([row for row in times if row["app_name"] == "questionnaire"]) == 2 * len(listed)
    assert len(listed) == 6 and first_payment == indexes[-1] + 2

    answers = sorted(_rows(folder / f"questionnaire_{code}.csv"), key=lambda row: row["participant.id_in_session"])
    assert [(row["player.age"], row["player.gender"], row["player.major"]) for row in answers] == [
        ("21", "female", "经济学"), ("22", "male", "经济学")]  # as questionnaire/tests.py answers
    for row in answers:
        assert row["player.svo_category"] and row["player.believed_human"] == "-1"
        assert row["player.norm_estimate_WC"] and row["player.c7_completeness"] and row["player.perception_fairness"]
        assert not row["player.llm_familiarity"]
    assert all(row["player.norm_correct_WC"] in ("0", "1") for row in _rows(folder / f"payment_{code}.csv"))
