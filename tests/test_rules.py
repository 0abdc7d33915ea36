"""Unit tests of the protocol's rules: matching, payoffs, SVO scoring, payment, session checks."""

import itertools
import math
import random

import pytest

import protocol
from lab.base import i18n, matching
from lab.base.session_settings import SessionConfigError, validate


@pytest.mark.parametrize("participants", [2, 4, 12, 14, 36, 72, 144])
def test_perfect_strangers_never_meet_twice(participants):
    rounds = min(10, participants - 1)
    schedule = matching.perfect_stranger_pairs(participants, rounds, random.Random(participants))
    assert len(schedule) == rounds
    met = set()
    for pairs in schedule:
        seated = [person for pair in pairs for person in pair]
        assert sorted(seated) == list(range(participants)), "everyone plays exactly once per round"
        for a, b in pairs:
            assert frozenset((a, b)) not in met
            met.add(frozenset((a, b)))


@pytest.mark.parametrize("participants,message", [
    (13, "even number"), (1, "even number"), (0, "even number"), (10, "at least 12"),
])
def test_impossible_human_sessions_are_refused_with_a_reason(participants, message):
    with pytest.raises(matching.MatchingError, match=message):
        matching.perfect_stranger_pairs(participants, 10, random.Random(0))


@pytest.mark.parametrize("humans,rounds", [(1, 10), (3, 10), (12, 10), (72, 10), (20, 3)])
def test_agent_schedule_rematches_without_repeats(humans, rounds):
    schedule = matching.agent_schedule(humans, rounds, random.Random(7))
    agents = matching.agent_count(humans, rounds)
    assert agents == max(humans, rounds)
    for seats in schedule:
        assert len(set(seats)) == humans, "an agent meets one human per round"
        assert all(0 <= s < agents for s in seats)
    for human in range(humans):
        assert len({seats[human] for seats in schedule}) == rounds, "a human never meets an agent twice"


def test_payoffs_are_a_prisoners_dilemma():
    t, r, p, s = (protocol.payoff(*pair) for pair in (("B", "A"), ("A", "A"), ("B", "B"), ("A", "B")))
    assert (t, r, p, s) == (80, 70, 40, 10)
    assert t > r > p > s and 2 * r > t + s
    for own, other in itertools.product(protocol.CHOICES, repeat=2):
        assert protocol.PAYOFFS[(own, other)] == tuple(reversed(protocol.PAYOFFS[(other, own)]))


def test_svo_items_match_the_published_slider():
    # Murphy, Ackermann & Handgraaf (2011), primary item 1 and 2 as printed.
    assert [protocol.svo_allocation(0, i) for i in range(9)] == [
        (85, 85), (85, 76), (85, 68), (85, 59), (85, 50), (85, 41), (85, 33), (85, 24), (85, 15)]
    assert [protocol.svo_allocation(1, i) for i in range(9)] == [
        (85, 15), (87, 19), (89, 24), (91, 28), (93, 33), (94, 37), (96, 41), (98, 46), (100, 50)]


@pytest.mark.parametrize("self_mean,other_mean,category", [
    (100, 50, "individualistic"),  # angle 0
    (85, 85, "prosocial"),  # 45 degrees
    (50, 100, "altruistic"),  # 90 degrees
    (85, 15, "competitive"),  # -45 degrees
])
def test_svo_angle_and_category(self_mean, other_mean, category):
    angle = protocol.svo_angle([self_mean] * 6, [other_mean] * 6)
    assert angle == pytest.approx(math.degrees(math.atan2(other_mean - 50, self_mean - 50)))
    assert protocol.svo_category(angle) == category


def test_svo_category_boundaries():
    assert protocol.svo_category(57.16) == "altruistic"
    assert protocol.svo_category(57.15) == "prosocial"
    assert protocol.svo_category(22.45) == "individualistic"
    assert protocol.svo_category(-12.04) == "competitive"


def test_payment_formula_matches_the_papers_range():
    # 15 CNY + 0.06 CNY/point + 10 CNY per correct estimate.
    assert protocol.payout(0, 0) == 15.0
    assert protocol.payout(1000, 1) == 15 + 60 + 10
    # The paper's extremes: 30.6 CNY is 260 points; 111.0 is 1400 points with both estimates.
    assert protocol.payout(260, 0) == 30.6
    assert protocol.payout(1600, 0) == 111.0


@pytest.mark.parametrize("rate,interval", [(0, 0), (19.9, 0), (20, 1), (50, 2), (79.99, 3), (80, 4), (100, 4)])
def test_norm_interval(rate, interval):
    assert protocol.norm_interval_index(rate) == interval


def _config(**extra):
    return {**dict(associate_type="human", label_setting="informed", game_order="WC-WoC"), **extra}


@pytest.mark.parametrize("extra,participants,message", [
    (dict(language="fr"), 12, "language"),
    (dict(rounds_per_game=11), 12, "rounds_per_game"),
    (dict(decision_seconds=0), 12, "decision_seconds"),
    (dict(), 11, "even number"),
    (dict(associate_type="robot"), 12, "associate_type"),
])
def test_bad_session_configs_are_refused_at_creation(extra, participants, message):
    with pytest.raises(SessionConfigError, match=message):
        validate(_config(**extra), participants)


def test_agent_sessions_take_any_number_of_participants():
    assert validate(_config(associate_type="fair"), 1).with_agents


def test_every_text_exists_in_both_languages():
    english, chinese = i18n.load_texts("en"), i18n.load_texts("zh_hans")
    assert english.keys() == chinese.keys()
    assert all(value.strip() for value in chinese.values())


def test_every_language_fills_the_placeholders_and_keeps_the_markup_of_the_english_text():
    """A translation (locale/<language>.toml) asks for what its English text asks for, in the same
    HTML elements: a page fills in the same values whatever the session's language."""
    import re

    from experiment_design.texts import placeholders

    english = i18n.load_texts("en")
    for language in i18n.LANGUAGES:
        texts = i18n.load_texts(language)
        for key in english.keys() & texts.keys():
            assert placeholders(texts[key]) == placeholders(english[key]), (language, key)
            assert sorted(re.findall(r"</?[a-z]+", texts[key])) == sorted(re.findall(r"</?[a-z]+", english[key])), (
                language, key)


def test_the_payoff_table_names_the_choices_by_their_labels_as_text():
    from lab.base.payoff_table import payoff_table_vars
    from lab.base.session_game import from_values, protocol_values

    t = i18n.texts("en")
    table = payoff_table_vars(t, from_values(protocol_values()), {"A": "<b>Blue</b>", "B": "Red"})
    assert table["payoff_cols"] == [t["intro_payoff_col"].format(other="&lt;b&gt;Blue&lt;/b&gt;"),
                                    t["intro_payoff_col"].format(other="Red")]
    assert [row["label"] for row in table["payoff_rows"]] == ["You choose &lt;b&gt;Blue&lt;/b&gt;", "You choose Red"]
    assert payoff_table_vars(t, from_values(protocol_values()))["payoff_cols"][0].endswith("A")


def test_an_experiment_s_own_persona_and_label_setting_are_checked_against_its_file():
    tests_copy = dict(experiment="tit_for_tat_en", language="en", game_order="WC-WoC", llm_provider="simulated")
    with pytest.raises(SessionConfigError, match="one of human, tit_for_tat, unconditional_cooperator"):
        validate(dict(tests_copy, associate_type="fair", label_setting="informed"), 2)
    with pytest.raises(SessionConfigError, match="language.*it must be en"):
        validate(dict(tests_copy, associate_type="tit_for_tat", label_setting="informed", language="zh_hans"), 2)
    p = validate(dict(tests_copy, associate_type="tit_for_tat", label_setting="uninformed"), 2)
    assert (p.treatment, p.informed, p.associate_words, p.currency) == ("H-T", False, "AI or human", "GBP")


def test_a_stand_in_is_one_of_the_experiment_s_personas_or_imitates():
    import experiment_design as ed
    from lab.base.online_settings import dropout_problem, imitating_persona

    paper, tft = (ed.load(ed.EXPERIMENTS_DIR / name) for name in ("paper.toml", "tit_for_tat_en.toml"))
    keys = dict(stand_in="agent", dropout_after_timeouts=3, dropout_closed_tab_seconds=90)
    assert dropout_problem(dict(keys, stand_in_persona="fair"), paper) is None
    assert "tit_for_tat, unconditional_cooperator, imitate" in dropout_problem(dict(keys, stand_in_persona="fair"), tft)
    assert dropout_problem(dict(keys, stand_in_persona="tit_for_tat"), tft) is None
    assert dropout_problem(dict(keys, stand_in="none", stand_in_persona="fair"), tft) is None
    assert (imitating_persona(paper), imitating_persona(tft)) == ("fair", "tit_for_tat")
    assert [c["stand_in_persona"] for c in tft.session_configs()][:1] == ["tit_for_tat"]
    assert all("stand_in_persona" not in c for c in paper.session_configs())  # the lab's default, fair
