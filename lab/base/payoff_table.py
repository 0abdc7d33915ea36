"""The payoff table participants see (rules, quiz, decision page): the session's game."""

from __future__ import annotations

import html

from lab.base.session_game import SessionGame


def payoff_table_vars(t: dict, game: SessionGame, labels: dict[str, str] | None = None) -> dict:
    """Template variables of lab/PayoffTable.html: column heads and rows of (own, other) points,
    the choices named by their ``labels`` (id -> label, lab/base/session_game.py ``choice_labels``;
    escaped: the texts around them are HTML)."""
    shown = {choice: html.escape((labels or {}).get(choice, choice)) for choice in game.choices}
    return dict(
        payoff_cols=[t["intro_payoff_col"].format(other=shown[other]) for other in game.choices],
        payoff_rows=[
            dict(label=t["intro_payoff_row"].format(own=shown[own]),
                 cells=[game.points(own, other) for other in game.choices])
            for own in game.choices
        ],
    )
