"""Helpers every participant page uses: its texts, in the session's language."""

from __future__ import annotations

import protocol
from lab import i18n
from lab.session_settings import SessionParams, params_of


def text_params(p: SessionParams) -> dict:
    """Values the texts' {placeholders} may use."""
    values = dict(
        rounds=p.rounds_per_game,
        fee=_money(p.participation_fee),
        rate=_money(p.currency_per_point),
        bonus=_money(p.norm_bonus),
        currency=protocol.CURRENCY_CODE,
        max_chars=p.message_max_chars,
    )
    values.update({stage: _number(seconds) for stage, seconds in p.stage_limits.items()})
    return values


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _money(x: float) -> str:
    return f"{x:g}"


def texts_for(player) -> dict:
    p = params_of(player)
    return i18n.texts(p.language, **text_params(p))


def associates_wording(p: SessionParams) -> str:
    """How page 3 names the associates (PROTOCOL.md, Treatments): never a falsehood."""
    if not p.informed:
        key = "common_associate_either"
    elif p.associate_type == "human":
        key = "common_associate_humans"
    else:
        key = "common_associate_machines"
    return i18n.text(p.language, key)


class TranslatedTimer:
    """Mixin for Page classes: oTree's timer caption in the session's language."""

    @property
    def timer_text(self):
        return i18n.text(params_of(self.player).language, "common_timer")
