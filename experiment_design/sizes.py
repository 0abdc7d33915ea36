"""Which session sizes an experiment's matching can serve: the check asks it of the file's demo sizes,
and a session's creation of its real size."""

from __future__ import annotations

from experiment_design.schema import HUMAN, Design


def least_human_participants(design: Design) -> int:
    """The fewest participants a human-human session of the design can pair (an even number):
    perfect strangers meet a different associate every round, so each needs rounds + 1 people in all;
    a fixed partner with two games meets a new partner in the second game (the games are
    independent), so four; otherwise two."""
    rounds = design.game.rounds_per_game
    if design.matching == "perfect_strangers":
        return rounds + 1 + (rounds + 1) % 2
    if design.matching == "fixed_partner" and len(design.games) == 2:
        return 4
    return 2


def session_size_problem(design: Design, associate_type: str, num_participants: int) -> str | None:
    """Why a session of ``num_participants`` with associates ``associate_type`` cannot run, or None."""
    if num_participants < 1:
        return "a session needs at least 1 participant"
    if associate_type != HUMAN:
        return None  # every participant has agents of their own
    if num_participants % 2:
        return (f"a human-human session needs an even number of participants (2 per pair); {num_participants} cannot "
                f"be paired: use {num_participants + 1}")
    least = least_human_participants(design)
    if num_participants >= least:
        return None
    rounds = design.game.rounds_per_game
    if design.matching == "perfect_strangers":
        return (f"with {num_participants} participants each can meet only {num_participants - 1} different associates, "
                f"but perfect-strangers matching needs a new one in each of {rounds} rounds: use at least {least} "
                f"participants (or fewer rounds per game)")
    return (f"{design.matching} matching with {len(design.games)} games needs a new partner for the second game: "
            f"use at least {least} participants")
