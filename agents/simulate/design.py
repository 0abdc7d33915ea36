"""The SI Note 4 design as plain data: matchups, their repeats, and who meets whom.

Per model and persona p there is a group G_p of ``group_size`` agents, and for self-play a
second group G'_p. A matchup (p, q) pairs G_p with G_q (G'_p when p == q). Who meets whom follows
the experiment's matching: perfect strangers (the paper's), in round r agent i of the first group
meets agent (i + r - 1) mod n of the second (a Latin-square rotation), so within a matchup nobody
meets the same associate twice; a fixed partner, agent i meets agent i every round; random, a
seeded draw every round (the same associate may come again). One repeat of a matchup is a *unit*:
its rounds run in order because the agents remember earlier rounds; units are independent.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass

from .cache import arm_scope
from .config import SimulationConfig


@dataclass(frozen=True)
class Matchup:
    persona_a: str
    persona_b: str

    @property
    def id(self) -> str:
        return f"{self.persona_a}-vs-{self.persona_b}"

    @property
    def is_self_play(self) -> bool:
        return self.persona_a == self.persona_b


@dataclass(frozen=True)
class Unit:
    """One repeat of one matchup for one model: ``rounds`` rounds of ``group_size`` games."""

    model_label: str
    matchup: Matchup
    repeat: int  # 1-based

    @property
    def id(self) -> str:
        """Also the start of its calls' cache scopes: the arm's label first (cache.arm_scope)."""
        return arm_scope(self.model_label, self.matchup.id, f"x{self.repeat}")

    def agent_id(self, side: str, index: int) -> str:
        """``fair-a3``: agent 3 of G_fair; ``fair-b3`` of the self-play group G'_fair."""
        persona = self.matchup.persona_a if side == "a" else self.matchup.persona_b
        group = "b" if side == "b" and self.matchup.is_self_play else "a"
        return f"{persona}-{group}{index}"


@dataclass(frozen=True)
class Game:
    """One pair-round: agent ``index_a`` of side a meets agent ``index_b`` of side b."""

    unit: Unit
    round_number: int  # 1-based
    pair: int  # = index_a
    index_b: int

    @property
    def key(self) -> str:
        return f"{self.unit.id}|r{self.round_number}|p{self.pair}"


def matchups(personas: list[str], *, self_play: bool) -> list[Matchup]:
    """Round robin between persona groups, plus each persona against its second group."""
    cross = [Matchup(p, q) for p, q in itertools.combinations(personas, 2)]
    own = [Matchup(p, p) for p in personas] if self_play else []
    return cross + own


def units(config: SimulationConfig) -> list[Unit]:
    return [
        Unit(model.label, m, repeat)
        for model in config.models
        for m in matchups(config.personas, self_play=config.self_play)
        for repeat in range(1, config.repeats + 1)
    ]


def games_of_round(unit: Unit, round_number: int, group_size: int, matching: str = "perfect_strangers",
                   seed: int = 0) -> list[Game]:
    if matching == "fixed_partner":
        partners = list(range(group_size))
    elif matching == "random":
        digest = hashlib.sha256(f"{seed}|{unit.id}|r{round_number}".encode()).digest()
        partners = list(range(group_size))
        random.Random(int.from_bytes(digest[:8], "big")).shuffle(partners)
    else:
        partners = [(i + round_number - 1) % group_size for i in range(group_size)]
    return [Game(unit, round_number, i, partners[i]) for i in range(group_size)]


def calls_per_game(game_type: str, chat_exchanges: int = 2) -> int:
    """First asks only (re-asks of malformed replies come on top): both agents' turns."""
    turns_per_agent = 1 + chat_exchanges if game_type == "WC" else 1
    return 2 * turns_per_agent


def games_per_model(config: SimulationConfig) -> int:
    n_matchups = len(matchups(config.personas, self_play=config.self_play))
    return n_matchups * config.repeats * config.rounds * config.group_size
