"""The experimenter's hands: actions on a participant or on the session, from the dashboard.

- ``advance``: the participant's page is submitted as its timeout would submit it (a random
  choice flagged timed out, a message not sent, what was typed kept as its draft), exactly as
  oTree's Monitor "Advance slowest participants" does (``Session.advance_selected_participants``),
  and oTree's auto-advance push moves their open tab on. Refused for a participant who has not
  started (oTree would start them).
- ``mark_dropped``: ``lab.online.dropouts.mark_dropped(participant, reason="experimenter",
  by=who)``, the online sessions' dropout handling (the stand-in takes over). Refused for a
  participant dropped already.
- ``message``: a text that pops up on the participant's page until they dismiss it
  (lab/server/notices.py); the dismissal is recorded on the message's row (``dismissed_at``).
- ``pause`` / ``resume``: the session (lab/server/pause.py: pages' deadlines; the agents' turns:
  lab/agent_runtime/pausing.py).

Each action carried out is one row of the ``interventions`` table (an ExtraModel of the payment
app, registered with lab/base/app_registry.py: lab/ imports no app), exported as the payment app's
custom export ``interventions`` (docs/DATA.md). The admin page that calls these
(lab/experimenter/admin_views.py ``LabIntervene``) needs oTree's admin login.
"""

from __future__ import annotations

import importlib.util
import json
import time
from typing import Optional

from lab.base import app_registry
from lab.server import notices, pause
from lab.agent_runtime.pausing import postpone_running_turns
from lab.base.text import clean_text

ACTIONS = ("advance", "mark_dropped", "message", "pause", "resume")
COLUMNS = ["session_code", "at", "who", "action", "participant_code", "detail", "dismissed_at"]
MESSAGE_MAX_CHARS = 1000
DROPOUTS_MODULE = "lab.online.dropouts"


class ActionRefused(Exception):
    """The action was not carried out (nothing written); ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def table():
    """The ExtraModel with the columns of ``COLUMNS`` (the payment app's, lab/base/app_registry.py)."""
    return app_registry.interventions_model()


def record(session_code: str, who: str, action: str, participant_code: str = "", detail: Optional[dict] = None,
           at: Optional[float] = None):
    """One row; flushed, so that its id is known (a message's id is its row's)."""
    from otree.database import db

    row = table().create(session_code=session_code, at=time.time() if at is None else at, who=who, action=action,
                         participant_code=participant_code or "",
                         detail=json.dumps(detail or {}, ensure_ascii=False, sort_keys=True))
    db._db.flush()
    return row


def where(participant) -> dict:
    """The page a participant is on, as oTree's records have it."""
    from lab.base.online_settings import is_online
    from lab.online.exit import on_last_page

    finished = on_last_page(participant, is_online(participant.session))
    return dict(app=participant._current_app_name or "", page=participant._current_page_name or "",
                round=participant._round_number, index=participant._index_in_pages, finished=finished)


# --- the actions --------------------------------------------------------------------------------------
def carry_out(session, action: str, who: str, participant_code: str = "", text: str = "",
              page_index: Optional[int] = None) -> dict:
    """Carry out one action; returns its row as a dict. Raises ActionRefused (nothing written).
    ``page_index``: advance only a participant still on that page (the one the experimenter saw)."""
    if action not in ACTIONS:
        raise ActionRefused(400, f"unknown action {action!r}")
    if action == "pause":
        return _pause(session, who)
    if action == "resume":
        return _resume(session, who)
    participant = _participant(session, participant_code)
    if action == "advance":
        return _advance(session, participant, who, page_index)
    if action == "mark_dropped":
        return _mark_dropped(session, participant, who)
    return _message(session, participant, who, text)


def _participant(session, code: str):
    from otree.models import Participant

    participant = Participant.objects_filter(code=code or "", session_id=session.id).first() if code else None
    if participant is None:
        raise ActionRefused(404, f"no participant {code!r} in session {session.code}")
    return participant


def _advance(session, participant, who: str, page_index: Optional[int] = None) -> dict:
    before = where(participant)
    if not participant._index_in_pages:
        # oTree's advance would start them (no label, no study link's record): their place could
        # then not be taken by the person it is for.
        raise ActionRefused(409, f"participant {participant.code} has not started: no page of theirs to advance")
    if before["finished"]:
        raise ActionRefused(409, f"participant {participant.code} has finished: nothing to advance")
    if participant.is_on_wait_page:
        raise ActionRefused(409, f"participant {participant.code} is on a wait page ({before['page']}): it moves "
                                 "on when those it waits for arrive; nothing to submit")
    if page_index is not None and page_index != participant._index_in_pages:
        raise ActionRefused(409, f"participant {participant.code} has moved on (now on {before['app']} round "
                                 f"{before['round']} {before['page']}): not advanced")
    # oTree's own per-participant advance (its Monitor's): the page is submitted as a timeout
    # (timeout_happened, with oTree's admin secret), the next page is visited (its timer set),
    # and the auto-advance push reloads the participant's open tab.
    session.advance_selected_participants([participant])
    return _as_dict(record(session.code, who, "advance", participant.code, dict(page_before=before,
                                                                                page_after=where(participant))))


def dropouts_available() -> bool:
    try:
        return importlib.util.find_spec(DROPOUTS_MODULE) is not None
    except ModuleNotFoundError:  # no lab.online package at all
        return False


def _mark_dropped(session, participant, who: str) -> dict:
    if not dropouts_available():
        raise ActionRefused(501, "mark dropped is not available in this version: the online sessions' dropout "
                                 f"handling ({DROPOUTS_MODULE}) is not installed")
    from lab.online import dropouts

    page = where(participant)
    if dropouts.is_dropped(participant):
        found = participant._vars or {}
        raise ActionRefused(409, f"mark dropped refused: participant {participant.code} was dropped already "
                                 f"({found.get(dropouts.REASON_KEY)}, by {found.get(dropouts.BY_KEY)})")
    try:
        dropouts.mark_dropped(participant, reason="experimenter", by=who)
    except ValueError as refused:  # the documented refusal (not an online session, finished, ...)
        raise ActionRefused(409, f"mark dropped refused: {refused}") from None
    return _as_dict(record(session.code, who, "mark_dropped", participant.code, dict(page=page, reason="experimenter")))


def _message(session, participant, who: str, text: str) -> dict:
    text = clean_text(text).strip()
    if not text:
        raise ActionRefused(400, "the message is empty")
    if len(text) > MESSAGE_MAX_CHARS:
        raise ActionRefused(400, f"the message is longer than {MESSAGE_MAX_CHARS} characters")
    row = record(session.code, who, "message", participant.code, dict(text=text, page=where(participant)))
    notices.set_pending_messages(participant, notices.pending_messages(participant) + [dict(id=row.id, text=text)])
    notices.push(notices.participant_group(participant.code), dict(lab_notice="message", id=row.id, text=text))
    return _as_dict(row)


def _pause(session, who: str) -> dict:
    now = time.time()
    if not pause.pause(session, now):
        raise ActionRefused(409, f"session {session.code} is paused already")
    row = record(session.code, who, "pause", "", dict(paused_at=now), at=now)
    notices.push(notices.session_group(session.code), dict(lab_notice="pause"), now=now)
    return _as_dict(row)


def _resume(session, who: str) -> dict:
    now = time.time()
    moved = pause.resume(session, now)
    if moved is None:
        raise ActionRefused(409, f"session {session.code} is not paused")
    moved.update(postpone_running_turns(session, moved["paused_at"], now))
    row = record(session.code, who, "resume", "", moved, at=now)
    notices.push(notices.session_group(session.code), dict(lab_notice="resume", seconds=moved["seconds"]), now=now)
    return _as_dict(row)


# --- reading the record ---------------------------------------------------------------------------------
def _as_dict(row) -> dict:
    return dict(id=row.id, session_code=row.session_code, at=row.at, who=row.who, action=row.action,
                participant_code=row.participant_code, detail=json.loads(row.detail or "{}"),
                dismissed_at=row.dismissed_at)


def session_interventions(session_code: str) -> list[dict]:
    """The session's actions, oldest first."""
    Model = table()
    return [_as_dict(row) for row in Model.objects_filter(session_code=session_code).order_by(Model.id)]


def pauses(interventions: list[dict]) -> list[tuple[float, Optional[float]]]:
    """(paused at, resumed at or None) of each pause, from the record."""
    found: list[list] = []
    for row in interventions:
        if row["action"] == "pause":
            found.append([row["at"], None])
        elif row["action"] == "resume" and found and found[-1][1] is None:
            found[-1][1] = row["at"]
    return [tuple(pair) for pair in found]


def export_rows(players):
    """The payment app's custom export ``interventions``: one row per action, by session and time
    (docs/DATA.md 'interventions')."""
    from otree.database import dbq
    from otree.models import Session

    yield COLUMNS
    session_ids = {player.session_id for player in players}
    codes = sorted(code for (code,) in dbq(Session).filter(Session.id.in_(session_ids)).with_entities(Session.code)) \
        if session_ids else []
    for code in codes:
        for row in session_interventions(code):
            yield [row["session_code"], row["at"], row["who"], row["action"], row["participant_code"],
                   json.dumps(row["detail"], ensure_ascii=False, sort_keys=True), row["dismissed_at"]]
