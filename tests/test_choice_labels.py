"""Choices shown by labels other than their ids (tests/data/experiments/stag_labels.toml: A and B shown
as "Stag"/"Hare" in English, "鹿"/"兔" in Chinese): the check refuses labels the agents' parser could
not tell apart; the participants' texts name the labels wherever the paper's name A and B; the agents'
prompts, history lines and reply format name the labels of the session's language, the parser and the
grammar take the label back to its id, the simulated model answers with it; the data package says
how each id was shown. A bot session plays it end to end (SQLite: what is shown does not depend on the
database). The paper's labels are its ids: its prompts and grammar are tests/test_prompts*.py's."""

from __future__ import annotations

import asyncio
import csv
import re
from pathlib import Path

import pytest

import experiment_design as ed
from agents import grammars, prompts
from agents.agent import PersonaAgent
from agents.config import ModelConfig
from agents.models import build_model
from agents.parsing import choice_problem, grammar_choice, parse_choice
from experiment_design import texts
from tests.gbnf_matcher import matches

LABELLED = ed.load(ed.TEST_EXPERIMENTS_DIR / "stag_labels.toml")
EN = {"Stag": "A", "Hare": "B"}  # label -> id, as the agents answer
ZH = {"鹿": "A", "兔": "B"}


def _problems(*replacements: tuple[str, str]) -> list[str]:
    text = LABELLED.text
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    try:
        ed.load_text(text, "labels")
    except ed.ExperimentError as error:
        return [f"{problem.field}: {problem.message}" for problem in error.problems]
    return []


# --- the check -----------------------------------------------------------------------------------
def test_the_labelled_file_passes_the_check_texts_included():
    assert ed.check(ed.TEST_EXPERIMENTS_DIR / "stag_labels.toml") == []


@pytest.mark.parametrize("second,message", [
    ('en = "STAG"', 'game.choices[2].label.en: is "STAG", the label of the first choice too (in any case): '
                    "participants and agents could not tell the choices apart; give each choice its own label"),
    ('en = "Stag hunt"', 'game.choices[2].label.en: is "Stag hunt" and the first choice\'s "Stag": one holds the '
                         "other (in any case), so an agent's answer could not be told apart; give labels neither of "
                         "which is within the other"),
    ('en = "tag"', 'game.choices[2].label.en: is "tag" and the first choice\'s "Stag": one holds the other (in any '
                   "case), so an agent's answer could not be told apart; give labels neither of which is within the "
                   "other"),
    ('en = "[Hare]"', 'game.choices[2].label.en: is "[Hare]", with a bracket: the agents answer I DECIDE TO CHOOSE '
                      "[label] and write their messages inside <>, so a label has no brackets; write it without"),
    ('en = "<Hare>"', 'game.choices[2].label.en: is "<Hare>", with a bracket: the agents answer I DECIDE TO CHOOSE '
                      "[label] and write their messages inside <>, so a label has no brackets; write it without"),
])
def test_labels_the_parser_cannot_tell_apart_are_refused(second, message):
    assert _problems(('label = { zh_hans = "兔", en = "Hare" }', f'label = {{ zh_hans = "兔", {second} }}')) == [
        message]


def test_chinese_labels_are_told_apart_as_the_parser_reads_them_and_an_empty_label_is_refused():
    assert _problems(('zh_hans = "兔"', 'zh_hans = "鹿"')) == [
        'game.choices[2].label.zh_hans: is "鹿", the label of the first choice too (in any case): participants and '
        "agents could not tell the choices apart; give each choice its own label"]
    assert _problems(('zh_hans = "兔"', 'zh_hans = "【兔】"'))[0].startswith(
        'game.choices[2].label.zh_hans: is "【兔】", with a bracket')
    assert _problems(('en = "Hare"', 'en = ""')) == [
        'game.choices[2].label.en: is "" (empty): write the text participants read']


# --- the participants' texts -----------------------------------------------------------------------
# Where a paper's text names a choice by its id (standing alone: not "A new associate").
_NAMES_A_OR_B = re.compile(r"(?<![\w{])[AB](?![\w}])(?! new)")


def test_every_text_naming_a_choice_by_its_id_has_a_labelled_variant_in_each_language():
    reference = texts.read_locale(ed.PROJECT_DIR / "locale" / "en.toml")
    naming = {key for key, text in reference.items() if not key.startswith("variants.") and _NAMES_A_OR_B.search(text)}
    given = {"common.choice_a", "common.choice_b"}  # the labels themselves, which the experiment file gives
    assert naming - given <= set(texts.SLOT_KEYS.values()), naming - given - set(texts.SLOT_KEYS.values())
    slots = {texts.SLOT_KEYS[slot] for slot, key in LABELLED.text_keys.items() if key.startswith("variants.")}
    assert naming - given <= slots  # the labelled design shows a variant wherever the paper's text names A or B
    for language in LABELLED.design.languages:
        locale = texts.read_locale(ed.PROJECT_DIR / "locale" / f"{language}.toml")
        for slot, key in LABELLED.text_keys.items():
            shown = locale[key].format_map(_Placeholders(LABELLED.text_params(language)))
            assert not _NAMES_A_OR_B.search(shown.replace("A new", "")), (language, key, shown)


class _Placeholders(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def test_the_decision_and_norm_texts_name_the_labels_in_each_language():
    from lab.base import i18n

    def text(language, slot):
        return i18n.text(language, LABELLED.text_key(slot), **LABELLED.text_params(language), bonus="10",
                         currency="CNY", rounds=10)

    assert text("en", "decision_prompt") == "Choose Stag or Hare."
    assert text("zh_hans", "decision_prompt") == "请选择 鹿 或 兔。"
    assert "what share were <b>Stag</b>?" in text("en", "norm_intro")
    assert text("zh_hans", "norm_game_WoC") == "在没有信息交流的游戏中，其他参与者选择 鹿 的比例为……"


# --- the agents -------------------------------------------------------------------------------------
def test_the_prompts_name_the_labels_of_the_session_s_language():
    system_en = prompts.system_prompt("fair", "en", experiment=LABELLED)
    assert "each has two options: playing Stag or playing Hare." in system_en
    assert "If you choose Stag and your associate chooses Hare, you will receive 10 and your associate will receive 50." \
        in system_en
    system_zh = prompts.system_prompt("fair", "zh", experiment=LABELLED)
    assert "each has two options: playing 鹿 or playing 兔." in system_zh
    assert "STEP 1: Reason how choosing 兔 affects" in prompts.message_1_prompt(1, "fair", "zh", experiment=LABELLED)
    history = [prompts.PastRound(1, "A", "B", 10, 50)]
    decision = prompts.decision_prompt(2, "fair", history=history, total_payoff=10, with_communication=False,
                                       experiment=LABELLED, language="en")
    assert "In round 1: you choose Stag, your associate chooses Hare, you get 10, your associate gets 50." in decision
    assert decision.endswith("Replace [] with either Stag or Hare.")
    assert prompts.reask_prompt(True, experiment=LABELLED, language="zh").endswith("Replace [] with either 鹿 or 兔.")
    # the paper's: the labels are the ids
    assert prompts.choice_labels(None, "zh") == prompts.choice_labels(None) == {"A": "A", "B": "B"}


@pytest.mark.parametrize("reply,choices,choice", [
    ("STEP 5: fair.\nI DECIDE TO CHOOSE [Stag]", EN, "A"),
    ("I DECIDE TO CHOOSE **hare**.", EN, "B"),
    ("I DECIDE TO CHOOSE: option Hare", EN, "B"),
    ("I DECIDE TO CHOOSE [Stag] or [Hare]… I DECIDE TO CHOOSE [Hare]", EN, "B"),  # the instruction echoed first
    ("I DECIDE TO CHOOSE [Stag] and [Hare]", EN, None),
    ("I DECIDE TO CHOOSE [Stag]. I DECIDE TO CHOOSE [Hare]", EN, None),  # conflicting
    ("I DECIDE TO CHOOSE [A]", EN, None),  # the id is not what the agent was told to answer
    ("I DECIDE TO CHOOSE [鹿]", ZH, "A"),
    ("我决定选择兔", ZH, "B"),
    ("I DECIDE TO CHOOSE ［兔］", ZH, "B"),  # full width
    ("I DECIDE TO CHOOSE [鹿] 或 [兔]", ZH, None),
    ("I DECIDE TO CHOOSE [A]", None, "A"),  # the paper's
])
def test_the_parser_takes_a_label_back_to_its_id(reply, choices, choice):
    assert parse_choice(reply, choices) == choice


def test_the_grammar_asks_for_a_label_and_the_grammar_s_reply_gives_its_id():
    paper = grammars.OutputShape("decision", 5)
    assert grammars.gbnf(paper, 512) == grammars.gbnf(grammars.OutputShape("decision", 5, choices=("A", "B")), 512)
    assert grammars.gbnf(paper, 512).splitlines()[0].endswith('"I DECIDE TO CHOOSE [" [AB] "]"')
    for labels, (first, second) in ((("Stag", "Hare"), EN), (("鹿", "兔"), ZH)):
        shape = grammars.OutputShape("decision", 2, choices=labels)
        grammar, regex = grammars.gbnf(shape, 512), grammars.regex(shape, 512)
        for label, wanted in ((first, True), (second, True), ("A", False), (first.lower() + "x", False)):
            reply = f"STEP 1: think\nSTEP 2: decide\nI DECIDE TO CHOOSE [{label}]"
            assert matches(grammar, reply) is wanted, (labels, label)
            assert (re.fullmatch(regex, reply) is not None) is wanted, (labels, label)
        choices = EN if labels[0] == "Stag" else ZH
        assert grammar_choice(f"STEP 1: I choose {labels[0]}\nI DECIDE TO CHOOSE [{labels[1]}]", choices) == "B"
    assert choice_problem("I choose Stag.", EN) == ("it did not end with the sentence I DECIDE TO CHOOSE [Stag] or "
                                                    "I DECIDE TO CHOOSE [Hare]")
    assert choice_problem("I DECIDE TO CHOOSE nothing", EN) == ("the sentence I DECIDE TO CHOOSE had no choice Stag or "
                                                                "Hare after it")


def test_the_simulated_agent_plays_the_labels_and_the_lab_gets_the_ids():
    async def two_rounds(agent):
        await agent.message_1(1, deadline=None)
        await agent.message_2(1, associate_message_1="咱们都选鹿吧", deadline=None)
        first = await agent.decide(1, associate_message_2="好", deadline=None)
        agent.record_outcome(1, first.choice, "B")
        await agent.message_1(2, deadline=None)
        await agent.message_2(2, associate_message_1="嗯", deadline=None)
        return first, await agent.decide(2, associate_message_2="嗯", deadline=None)

    agent = PersonaAgent("agent-1", "fair", build_model(ModelConfig(provider="simulated")), language="zh", seed=5,
                         experiment=LABELLED)
    first, second = asyncio.run(two_rounds(agent))
    for decision in (first, second):
        assert decision.choice in ("A", "B") and decision.status == "ok"
        reply = decision.calls[-1].raw_reply
        assert reply.endswith(f"I DECIDE TO CHOOSE [{'鹿' if decision.choice == 'A' else '兔'}]"), reply
    messages = first.calls[-1].messages
    assert "playing 鹿 or playing 兔" in messages[0]["content"]
    assert f"you choose {'鹿' if first.choice == 'A' else '兔'}, your associate chooses 兔" in \
        second.calls[-1].messages[-1]["content"]
    assert "鹿" in agent.turns[0]["text"]  # its first message proposes the stag, by its Chinese label


def test_the_data_package_says_how_each_id_was_shown():
    from lab.base.session_game import label_values, protocol_values, treatment_values
    from lab.record.data_dictionary import CHOICE, DECISIONS

    values = {**protocol_values(LABELLED), **treatment_values(LABELLED), **label_values(LABELLED)}
    column = CHOICE.of_session(values)
    assert column.enum == ("A", "B")
    assert column.description == ('A or B (A counts as cooperation); shown on screen A as "鹿" (zh_hans), "Stag" (en); '
                                  'B as "兔" (zh_hans), "Hare" (en)')
    assert DECISIONS["associate_choice"].of_session(values).description.startswith(column.description + "; empty")
    assert CHOICE.description == "A or B (A counts as cooperation); labels are neutral on screen"  # the paper's


# --- a session -------------------------------------------------------------------------------------
ROUNDS = 2


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.server
def test_a_labelled_session_shows_the_labels_stores_the_ids_and_prompts_the_agents_with_the_labels(project_copy,
                                                                                                   tmp_path):
    from tests.lab_server import run_test_experiment_bots

    folder, pages = tmp_path / "export", tmp_path / "pages"
    # oTree's bots check the quiz's questions, the decision buttons and the result name the labels
    # (instructions/tests.py, lab/agent_runtime/bots.py); the pages they keep are read here.
    code = run_test_experiment_bots(project_copy, "test_labels_hf_informed_wc_first", 2,
                                    {"rounds_per_game": ROUNDS, "llm_provider": "simulated", "language": "zh_hans"},
                                    pages, export_dir=folder)

    shown = {path.name: path.read_text(encoding="utf-8").split('<div class="card debug-info">')[0]
             for path in Path(pages).glob(f"{code}_*.html")}
    intros = [page for name, page in shown.items() if "_GameIntro_" in name]
    decisions = [page for name, page in shown.items() if "_Decision_" in name]
    assert len(intros) == 2 * 2 and len(decisions) == 2 * 2 * ROUNDS
    assert all("然后选择 鹿 或 兔。" in page for name, page in shown.items() if "game_with_chat_GameIntro" in name)
    assert all("请选择 鹿 或 兔。" in page and "您选择 鹿" in page and "搭档选择 兔" in page for page in decisions)
    assert not any(re.search(r"选择 ?[AB]\b|[AB] 或 [AB]", page) for page in shown.values())

    decided = _rows(folder / f"payment_custom_export_decisions_{code}.csv")
    assert decided and {row["choice"] for row in decided} <= {"A", "B"}
    assert {row["associate_choice"] for row in decided} <= {"A", "B"}
    calls = _rows(folder / f"payment_custom_export_llm_calls_{code}.csv")
    decision_calls = [call for call in calls if call["turn"] == "decision"]
    assert decision_calls and all("playing 鹿 or playing 兔" in call["messages"] for call in calls)
    assert all(call["status"] == "ok" and call["parsed"] in ("A", "B")
               and call["raw_reply"].endswith("[鹿]" if call["parsed"] == "A" else "[兔]") for call in decision_calls)
