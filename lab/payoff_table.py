"""The payoff table participants see (rules, quiz, decision page), from protocol.PAYOFFS."""

from __future__ import annotations

import protocol


def payoff_table_vars(t: dict) -> dict:
    """Template variables of lab/PayoffTable.html: column heads and rows of (own, other) points."""
    return dict(
        payoff_cols=[t["intro_payoff_col"].format(other=other) for other in protocol.CHOICES],
        payoff_rows=[
            dict(label=t["intro_payoff_row"].format(own=own),
                 cells=[protocol.PAYOFFS[(own, other)] for other in protocol.CHOICES])
            for own in protocol.CHOICES
        ],
    )
