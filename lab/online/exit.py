"""The way out of an online session: an outcome per participant, its Prolific completion code, the
exit page (``OnlineExit``, the payment app's last page, online only) and the skip to it.

``participant.vars["online_outcome"]`` is one of ``config.OUTCOMES``, set by whoever decides it
(the quiz here: ``screened_out``; the dropout handling: ``timed_out``, ``partner_dropped``); a
participant who reaches the exit page without one has ``completed``. A participant whose outcome
ends their session (``LEAVING_OUTCOMES``: screened out, lobby timeout, dropped) skips every page up
to the exit page; ``partner_dropped`` goes on to the end alone and is shown its code there
(``skipping_leavers``: oTree's own skip, as for a page whose ``is_displayed`` is False, so wait
pages count them as arrived). The exit page records the
code it showed (``online_completion_code``) and sends the browser to Prolific's completion URL.
"""

from __future__ import annotations

import time

from lab.base import online_settings as online_config

EXIT_PAGE = "OnlineExit"
REDIRECT_SECONDS = 5


def set_outcome(participant, outcome: str, *, payout: float | None = None) -> None:
    """Record how the participant leaves (the first outcome stands); ``payout`` (the session's
    currency), when given, is written to the payment table at once (a show-up payment)."""
    if outcome not in online_config.OUTCOMES:
        raise ValueError(f"unknown online outcome {outcome!r}")
    if participant.vars.get("online_outcome"):
        return
    participant.vars["online_outcome"] = outcome
    participant.vars["online_outcome_at"] = time.time()
    if payout is not None:
        from lab.base import app_registry

        Payment = app_registry.player_model("payment")
        player = Payment.objects_filter(participant=participant).first()
        if player is not None:
            player.payout = float(payout)


# Outcomes that end the participant's session where it is decided; ``partner_dropped`` does not:
# that participant finishes the session alone (lab/online/stand_in.py, stand_in = none) and is
# shown its code at the end.
LEAVING_OUTCOMES = ("screened_out", "lobby_timeout", "timed_out")


def leaves_early(participant) -> bool:
    """An outcome that ends the session (screened out, lobby timeout, dropped): every page but the
    exit page is skipped."""
    return (participant._vars or {}).get("online_outcome") in LEAVING_OUTCOMES


def left_before_games(participant) -> bool:
    """Screened out or not grouped: no game played, the payout set when they left stands."""
    return participant.vars.get("online_outcome") in ("screened_out", "lobby_timeout")


def outcome_of(participant) -> str:
    return participant.vars.get("online_outcome") or "completed"


def exit_vars(participant, session) -> dict:
    """The exit page: the outcome, its code, Prolific's completion URL (recorded once shown)."""
    outcome = outcome_of(participant)
    code = online_config.completion_codes(session.config)[outcome]
    if not participant.vars.get("online_outcome"):
        participant.vars["online_outcome"] = outcome
        participant.vars["online_outcome_at"] = time.time()
    if participant.vars.get("online_completion_code") != code:
        participant.vars["online_completion_code"] = code
        participant.vars["online_exit_shown_at"] = time.time()
    return dict(outcome=outcome, completion_code=code, completion_url=online_config.COMPLETION_URL.format(code=code),
                redirect_seconds=REDIRECT_SECONDS)


def on_last_page(participant, online: bool) -> bool:
    """Finished: on the last page the session shows. Online that is the exit page, the payment
    app's (and the session's) last; in the lab the exit page is never shown, so the payment page
    before it is the last."""
    last = participant._max_page_index - (0 if online else 1)
    return bool(participant._index_in_pages and participant._index_in_pages >= last)


def skipping_leavers(original_is_displayed):
    """oTree's ``_is_displayed``: participants leaving early see no page but the exit page
    (lab/otree_patches/page_index.py puts it in)."""

    def _is_displayed(self):
        if type(self).__name__ != EXIT_PAGE and leaves_early(self.participant):
            return False
        return original_is_displayed(self)

    return _is_displayed
