"""The matching rules besides perfect strangers (lab/base/matching.py): a fixed partner for each game
(a new one in the second) and random pairs each round, for human pairs and for agent seats; and the
session sizes a creation accepts for each rule."""

from __future__ import annotations

import random

import pytest

from experiment_design import EXPERIMENTS_DIR, load
from lab.base import matching
from lab.base.session_settings import SessionConfigError, validate

FIXED = load(EXPERIMENTS_DIR / "fixed_partner_one_message.toml")


def _partners(pairs) -> dict:
    return {a: b for pair in pairs for a, b in (pair, pair[::-1])}


@pytest.mark.parametrize("participants", [4, 6, 12, 36])
def test_a_fixed_partner_is_the_same_all_game_and_another_in_the_second_game(participants):
    games = [matching.fixed_partner_pairs(participants, game, random.Random(f"s-{participants}")) for game in (1, 2)]
    first, second = (_partners(pairs) for pairs in games)
    assert sorted(first) == sorted(second) == list(range(participants)), "everyone is paired in each game"
    assert all(first[person] != second[person] for person in range(participants))


@pytest.mark.parametrize("participants", [2, 3])
def test_a_fixed_partner_with_a_new_one_in_game_two_needs_four(participants):
    with pytest.raises(matching.MatchingError, match="at least 4"):
        matching.fixed_partner_pairs(participants, 1, random.Random(0))


def test_random_pairs_pair_everyone_each_round_and_may_repeat():
    rng = random.Random(3)
    rounds = [matching.random_pairs(4, rng) for _ in range(30)]
    for pairs in rounds:
        assert sorted(person for pair in pairs for person in pair) == [0, 1, 2, 3]
    assert len({_partners(pairs)[0] for pairs in rounds}) == 3, "each other person is drawn some round"
    assert any(_partners(a)[0] == _partners(b)[0] for a, b in zip(rounds, rounds[1:])), "a partner may come again"


@pytest.mark.parametrize("humans", [1, 2, 5])
def test_fixed_partner_agents_keep_one_agent_a_game_and_another_in_the_second(humans):
    schedules = [matching.matched_agent_schedule(matching.FIXED_PARTNER, humans, 4, game, random.Random("x"))
                 for game in (1, 2)]
    for game, schedule in enumerate(schedules, start=1):
        assert len(schedule) == 4 and all(rnd == schedule[0] for rnd in schedule), "the same agent every round"
        assert len(set(schedule[0])) == humans, "no agent meets two humans"
        assert set(schedule[0]) == set(matching.agent_seat_numbers(matching.FIXED_PARTNER, humans, 4, game))
    assert not set(schedules[0][0]) & set(schedules[1][0]), "game 2's agents are not game 1's"


def test_random_agents_are_a_new_permutation_each_round():
    schedule = matching.matched_agent_schedule(matching.RANDOM, 4, 10, 1, random.Random(5))
    assert all(sorted(seats) == [0, 1, 2, 3] for seats in schedule)
    assert len({tuple(seats) for seats in schedule}) > 1


def _config(**extra):
    return {**dict(associate_type="human", label_setting="informed", game_order="WC-WoC", experiment=FIXED.name,
                   experiment_sha256=FIXED.text_sha256), **extra}


def test_a_fixed_partner_session_of_four_is_created_and_of_two_refused():
    assert validate(_config(), 4).associate_type == "human"  # perfect strangers would need 12
    with pytest.raises(SessionConfigError, match="at least 4"):
        validate(_config(), 2)
    with pytest.raises(SessionConfigError, match="even number"):
        validate(_config(), 5)


def test_an_online_session_of_a_fixed_partner_is_refused_with_the_reason():
    with pytest.raises(SessionConfigError, match="online sessions run perfect strangers only"):
        validate(_config(online=True, associate_type="fair", llm_provider="simulated"), 4)

