"""Who meets whom, by the experiment's matching rule (experiments/*.toml ``matching``).

Perfect strangers (the paper's): nobody meets the same associate twice within a game.
Human-human: the circle method (round-robin tournament) gives n-1 rounds of disjoint pairs in
which every pair occurs at most once; we draw ``rounds`` of them, with participants relabelled
at random. Human-agent: agent ``(i + r) mod A`` for human ``i`` in round ``r`` (after random
relabelling) meets every human at most once and never meets two humans in one round, for
``A = max(humans, rounds)`` agents.

Fixed partner: the same associate in every round of a game, and in the second game one not met
in the first (two different rounds of the circle method's schedule; for agents, game 2's seats
are others than game 1's). Random: a random pairing each round, repeats allowed.
"""

from __future__ import annotations

import random


class MatchingError(ValueError):
    """No perfect-stranger matching exists for these numbers (session_settings.validate refuses
    such a session with this message)."""


def check_perfect_stranger_possible(num_participants: int, rounds: int) -> None:
    if num_participants < 2 or num_participants % 2:
        raise MatchingError(
            f"A human-human session needs an even number of participants (2 per pair); "
            f"{num_participants} cannot be paired. Use {num_participants + 1 if num_participants % 2 else 2}."
        )
    if num_participants - 1 < rounds:
        needed = rounds + 1 + (rounds + 1) % 2
        raise MatchingError(
            f"With {num_participants} participants each can meet only {num_participants - 1} different "
            f"associates, but a game has {rounds} rounds: use at least {needed} participants "
            f"(or fewer rounds per game)."
        )


def perfect_stranger_pairs(num_participants: int, rounds: int, rng: random.Random) -> list[list[tuple[int, int]]]:
    """For each round, the pairs (0-based participant indices) of that round."""
    check_perfect_stranger_possible(num_participants, rounds)
    n = num_participants
    labels = list(range(n))
    rng.shuffle(labels)
    schedule = []
    for k in range(n - 1):
        # circle method: position n-1 stays, the others rotate by k
        pairs = [(n - 1, k)]
        for j in range(1, n // 2):
            pairs.append(((k + j) % (n - 1), (k - j) % (n - 1)))
        schedule.append([(labels[a], labels[b]) for a, b in pairs])
    return rng.sample(schedule, rounds)


def agent_count(num_humans: int, rounds: int) -> int:
    """One agent per human, and at least one per round so nobody meets an agent twice."""
    return max(num_humans, rounds)


def agent_schedule(num_humans: int, rounds: int, rng: random.Random) -> list[list[int]]:
    """For each round, the agent index (0-based) of each human (0-based)."""
    agents = agent_count(num_humans, rounds)
    human_slots = rng.sample(range(agents), num_humans)
    agent_labels = list(range(agents))
    rng.shuffle(agent_labels)
    round_offsets = rng.sample(range(agents), rounds)
    return [[agent_labels[(slot + offset) % agents] for slot in human_slots] for offset in round_offsets]


def private_agent_schedule(num_humans: int, rounds: int, rng: random.Random) -> list[list[int]]:
    """Online agent sessions, where participants play at their own pace: every human has
    ``rounds`` agents of their own (human ``i``: agents ``i * rounds`` to ``i * rounds + rounds - 1``)
    and meets each of them in one round, in a random order. For each round, the agent index of
    each human. No agent is shared, so no human ever waits for another's round."""
    orders = [rng.sample(range(rounds), rounds) for _ in range(num_humans)]
    return [[human * rounds + orders[human][r] for human in range(num_humans)] for r in range(rounds)]


PERFECT_STRANGERS, FIXED_PARTNER, RANDOM = "perfect_strangers", "fixed_partner", "random"


def fixed_partner_pairs(num_participants: int, game_index: int, rng: random.Random,
                        games: int = 2) -> list[tuple[int, int]]:
    """The pairs of a whole game (``game_index`` 1 or 2 of the session's ``games``): two games' pairs
    share no pair. ``rng`` must be the session's one for both games (the same draw gives both games'
    pairs). A session of one game pairs any even number."""
    if games == 1:
        return random_pairs(num_participants, rng)
    if num_participants < 4 or num_participants % 2:
        raise MatchingError(f"A fixed-partner session with a new partner in the second game needs an even "
                            f"number of participants, at least 4, not {num_participants}.")
    return perfect_stranger_pairs(num_participants, 2, rng)[game_index - 1]


def random_pairs(num_participants: int, rng: random.Random) -> list[tuple[int, int]]:
    """One round's pairs, drawn at random (the same associate may come again)."""
    if num_participants < 2 or num_participants % 2:
        raise MatchingError(f"A human-human session needs an even number of participants (2 per pair); "
                            f"{num_participants} cannot be paired.")
    order = rng.sample(range(num_participants), num_participants)
    return [(order[i], order[i + 1]) for i in range(0, num_participants, 2)]


def agent_seat_numbers(matching: str, num_humans: int, rounds: int, game_index: int) -> range:
    """The agent seats a game app creates (``game_index`` 1 or 2): fixed partner, one per human, game
    2's others than game 1's (humans..2*humans-1); random, one per human; perfect strangers,
    ``agent_count``."""
    if matching == FIXED_PARTNER:
        return range((game_index - 1) * num_humans, game_index * num_humans)
    return range(num_humans if matching == RANDOM else agent_count(num_humans, rounds))


def matched_agent_schedule(matching: str, num_humans: int, rounds: int, game_index: int,
                           rng: random.Random) -> list[list[int]]:
    """For each round, the agent seat (0-based) of each human, by the matching rule. Fixed partner:
    ``rng`` is the session's for both games; each human keeps one agent for the game, seats
    0..humans-1 in game 1 and humans..2*humans-1 in game 2. Random: ``rng`` is the game's; each round
    a new permutation of the humans' seats (an agent meets one human per round)."""
    if matching == FIXED_PARTNER:
        orders = [rng.sample(range(num_humans), num_humans) for _ in range(2)]
        seats = [seat + (game_index - 1) * num_humans for seat in orders[game_index - 1]]
        return [list(seats) for _ in range(rounds)]
    if matching == RANDOM:
        return [rng.sample(range(num_humans), num_humans) for _ in range(rounds)]
    return agent_schedule(num_humans, rounds, rng)
