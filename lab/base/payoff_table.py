"""The payoff table participants see (rules, quiz, decision page): the session's game."""

from __future__ import annotations

from lab.base.session_game import SessionGame


def payoff_table_vars(t: dict, game: SessionGame) -> dict:
    """Template variables of lab/PayoffTable.html: column heads and rows of (own, other) points."""
    return dict(
        payoff_cols=[t["intro_payoff_col"].format(other=other) for other in game.choices],
        payoff_rows=[
            dict(label=t["intro_payoff_row"].format(own=own),
                 cells=[game.points(own, other) for other in game.choices])
            for own in game.choices
        ],
    )
