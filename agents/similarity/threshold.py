"""The b-similarity prediction: above which similarity does cooperating pay more?

Reading used throughout (docs/similarity.md, "The threshold"): with probability ``b`` the
co-player's action equals mine, otherwise it is the other action. For the prisoner's dilemma

    E[C] = b·R + (1−b)·S        E[D] = b·P + (1−b)·T

so C pays more iff b > (T−S) / ((T−S) + (R−P)). Because T > R and P > S in every strict
prisoner's dilemma, T−S > R−P and this threshold is always above one half.

The alternative reading ("with probability b it copies me, otherwise it plays independently,
cooperating with probability q") is offered as ``pd_threshold_independent``.
"""

from __future__ import annotations

from dataclasses import dataclass

import protocol


@dataclass(frozen=True)
class PrisonersDilemma:
    """Own payoffs: R (both A), S (I cooperate, they defect), T (temptation), P (both B)."""

    R: float
    S: float
    T: float
    P: float

    def __post_init__(self) -> None:
        if not (self.T > self.R > self.P > self.S):
            raise ValueError(f"not a prisoner's dilemma (need T > R > P > S): {self}")

    @classmethod
    def from_protocol(cls) -> "PrisonersDilemma":
        """The paper's table, read from protocol.PAYOFFS (A = cooperate, B = defect)."""
        c, d = protocol.COOPERATE, protocol.DEFECT
        return cls(R=protocol.payoff(c, c), S=protocol.payoff(c, d),
                   T=protocol.payoff(d, c), P=protocol.payoff(d, d))

    def expected_payoffs(self, b: float) -> tuple[float, float]:
        """(E[cooperate], E[defect]) when the co-player mirrors me with probability b."""
        return b * self.R + (1 - b) * self.S, b * self.P + (1 - b) * self.T


def pd_threshold(game: PrisonersDilemma) -> float:
    """The b above which cooperating pays more in expectation (mirror-or-opposite reading)."""
    return (game.T - game.S) / ((game.T - game.S) + (game.R - game.P))


def pd_threshold_independent(game: PrisonersDilemma, baseline_cooperation: float) -> float:
    """The alternative reading: with probability b the co-player copies me, otherwise it
    cooperates independently with probability ``baseline_cooperation`` (q).

    E[C] − E[D] = b·(R−P) − (1−b)·g with g = q·(T−R) + (1−q)·(P−S), the gain from defecting
    against the independent co-player; C pays more iff b > g / (g + R − P).
    """
    q = baseline_cooperation
    if not 0.0 <= q <= 1.0:
        raise ValueError("baseline_cooperation must be a probability")
    gain_from_defecting = q * (game.T - game.R) + (1 - q) * (game.P - game.S)
    return gain_from_defecting / (gain_from_defecting + game.R - game.P)


@dataclass(frozen=True)
class PublicGoodsGame:
    """n players, each either contributes the whole endowment or nothing; the pot is
    multiplied by ``multiplier`` and shared equally. A social dilemma needs 1 < m < n."""

    players: int
    multiplier: float
    endowment: float

    def __post_init__(self) -> None:
        if self.players < 2 or not (1 < self.multiplier < self.players) or self.endowment <= 0:
            raise ValueError(f"not a public goods dilemma (need n >= 2, 1 < m < n, e > 0): {self}")

    def payoff(self, contributes: bool, other_contributors: int) -> float:
        contributors = other_contributors + (1 if contributes else 0)
        kept = 0.0 if contributes else self.endowment
        return kept + self.multiplier * self.endowment * contributors / self.players

    def welfare(self, contributors: int) -> float:
        """Total payoff of the group when ``contributors`` players contribute."""
        return self.players * self.endowment + (self.multiplier - 1) * self.endowment * contributors

    @property
    def optimal_welfare(self) -> float:
        return self.welfare(self.players)

    def expected_payoffs(self, b: float) -> tuple[float, float]:
        """(E[contribute], E[keep]) when each other player mirrors me with probability b."""
        others = self.players - 1
        share = self.multiplier * self.endowment / self.players
        contribute = share * (1 + others * b)  # the mirrors contribute with me
        keep = self.endowment + share * others * (1 - b)  # the non-mirrors contribute
        return contribute, keep


def pgg_threshold(game: PublicGoodsGame) -> float:
    """The b above which contributing pays more: b > 1/2 + (n − m) / (2·m·(n − 1)).

    From E[contribute] − E[keep] = e·[(m/n)·(1 + (n−1)(2b−1)) − 1]. The endowment cancels; for
    n = 2 this is 1/m, the prisoner's dilemma formula on the two-player game's table.
    """
    n, m = game.players, game.multiplier
    return 0.5 + (n - m) / (2 * m * (n - 1))
