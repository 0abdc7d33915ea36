"""Pausing a session (the experimenter's dashboard): while paused no page times out; on resume
every deadline moves later by the pause's length.

How deadlines are kept, and what a pause does to each:
- A page's deadline is oTree's ``participant._timeout_expiration_time`` (for the page
  ``_timeout_page_index``), set when the page is first shown. The browser's timer auto-submits
  at it; oTree's timeout worker (prodserver's second process) submits it for a closed tab from
  a ``TaskQueueMessage`` due 6 s later; lab/shared_pages/pages.py counts a submission as late past it.
  While paused: the page's own timer is stopped (_static/lab/lab-notices.js), the worker holds
  every task of the session's participants (``task_is_held``: it leaves them in the queue),
  and the server's clock for deadlines is the moment of the pause (``clock``): nothing counts
  as late that was not late when the pause began. A page first shown during the pause gets its
  deadline as if shown at the pause's start, so that the shift below gives it its full time.
  On resume: each participant's deadline moves later by the pause's length, and the session's
  worker tasks are rescheduled from the new deadlines (held tasks and ones the worker may have
  dropped after a restart alike).
- Agent turns' deadlines (``AgentTurn.deadline_at``) move by the same length (a turn started
  during the pause: by the time since it started); a turn whose model call was cut off by its
  deadline during the pause, or is still in flight, is redone with the time its new deadline
  leaves; an answer that came in during the pause is kept (lab/agent_runtime/pausing.py, which
  lab/experimenter/interventions.py calls on resume beside ``resume``).
- The dashboard's time on a page leaves pauses out (lab/experimenter/dashboard.py).

The state is ``session.vars["lab_paused_at"]`` (the database is the record, which the timeout
worker reads); the server process keeps a copy per session code, updated when the change is
committed, so that a page request need not load the session row to know (only this process
pauses and resumes).
"""

from __future__ import annotations

import threading
import time
from typing import Optional

from lab.base.committed import after_commit

PAUSED_AT = "lab_paused_at"
# oTree's worker submits a page this long after its deadline (otree/views/abstract.py).
OTREE_WORKER_MARGIN_SECONDS = 6

_paused: dict[str, float] = {}  # session code -> when it was paused (this process)
_loaded = False
_lock = threading.Lock()


def _load() -> None:
    """Once per process: the sessions the database says are paused."""
    global _loaded
    if _loaded:
        return
    from otree.database import dbq
    from otree.models import Session

    found = {}
    for code, session_vars in dbq(Session).with_entities(Session.code, Session._vars):
        at = (session_vars or {}).get(PAUSED_AT)
        if at is not None:
            found[code] = float(at)
    with _lock:
        if not _loaded:
            _paused.update(found)
            _loaded = True


def paused_since(session_code: str) -> Optional[float]:
    """When the session was paused (epoch seconds), or None while it runs."""
    if not _loaded:
        _load()
    return _paused.get(session_code)


def clock(session_code: str, now: Optional[float] = None) -> float:
    """The time against which the session's deadlines are compared: the moment of the pause
    while paused, else now."""
    now = time.time() if now is None else now
    at = paused_since(session_code)
    return now if at is None else min(now, at)


def pause(session, now: Optional[float] = None) -> bool:
    """Pause the session; False if it is paused already."""
    now = time.time() if now is None else now
    if paused_since(session.code) is not None:
        return False
    session.vars[PAUSED_AT] = now
    after_commit(lambda: _remember(session.code, now))
    return True


def _remember(session_code: str, paused_at: Optional[float]) -> None:
    with _lock:
        if paused_at is None:
            _paused.pop(session_code, None)
        else:
            _paused[session_code] = paused_at


def resume(session, now: Optional[float] = None) -> Optional[dict]:
    """Resume the session and move its deadlines; None if it was not paused. Returns what moved:
    ``paused_at``, ``seconds`` (the pause's length) and counts."""
    now = time.time() if now is None else now
    paused_at = paused_since(session.code)
    if paused_at is None:
        return None
    moved = shift_deadlines(session, paused_at, now)
    session.vars.pop(PAUSED_AT, None)
    after_commit(lambda: _remember(session.code, None))
    return dict(paused_at=paused_at, seconds=round(now - paused_at, 3), **moved)


def shift_deadlines(session, paused_at: float, now: float) -> dict:
    """Every page deadline of the session later by the pause's length (see the module's
    docstring; the agents' turns: lab/agent_runtime/pausing.py, called beside this)."""
    seconds = now - paused_at
    participants = list(session.pp_set)
    shifted = 0
    for pp in participants:
        if pp._timeout_expiration_time is not None:
            pp._timeout_expiration_time += seconds
            shifted += 1
    tasks = reschedule_worker_tasks(participants, seconds)
    return dict(page_deadlines=shifted, worker_tasks=tasks)


def reschedule_worker_tasks(participants: list, seconds: float) -> int:
    """The timeout worker's tasks of these participants: a submission of each open timed page
    at its (moved) deadline + oTree's margin, and its page visits after wait pages ``seconds``
    later. Returns the tasks now queued for them."""
    import otree.common
    import otree.tasks
    from otree.database import db
    from otree.models_concrete import TaskQueueMessage

    codes = {pp.code for pp in participants}
    ids = {pp.id for pp in participants}
    count = 0
    for task in TaskQueueMessage.objects_filter():
        kwargs = task.kwargs()
        if task.method == "submit_expired_url" and kwargs.get("participant_code") in codes:
            db.delete(task)  # made again below from the participant's deadline
        elif task.method == "ensure_pages_visited" and ids.intersection(kwargs.get("participant_pks") or ()):
            task.epoch_time = round(task.epoch_time + seconds)
            count += 1
    if not otree.common.USE_TIMEOUT_WORKER:
        return count
    now = time.time()
    for pp in participants:
        expires = pp._timeout_expiration_time
        if expires is None or pp._timeout_page_index != pp._index_in_pages or pp.is_browser_bot:
            continue
        otree.tasks.submit_expired_url(participant_code=pp.code, page_index=pp._index_in_pages,
                                       delay=max(0, round(expires - now)) + OTREE_WORKER_MARGIN_SECONDS)
        count += 1
    return count


def paused_seconds(pauses: list[tuple[float, Optional[float]]], start: float, end: float) -> float:
    """How much of [start, end] the pauses cover (a pause still running ends at ``end``)."""
    covered = 0.0
    for began, ended in pauses:
        ended = end if ended is None else ended
        covered += max(0.0, min(end, ended) - max(start, began))
    return covered


# --- the timeout worker (its own process: it reads the database) -----------------------------------
_session_of_participant: dict = {}  # participant code or id -> session code (never changes)


def task_is_held(task, paused: dict) -> bool:
    """Whether a due worker task belongs to a paused session (then it stays in the queue until
    the resume reschedules it). ``paused``: session code -> paused, for one poll."""
    from otree.database import dbq
    from otree.models import Participant, Session

    kwargs = task.kwargs()
    if task.method == "submit_expired_url":
        key = kwargs.get("participant_code")
        condition = Participant.code == key
    elif task.method == "ensure_pages_visited" and kwargs.get("participant_pks"):
        key = int(kwargs["participant_pks"][0])
        condition = Participant.id == key
    else:
        return False
    code = _session_of_participant.get(key)
    if code is None:
        found = dbq(Participant).filter(condition).with_entities(Participant._session_code).first()
        if found is None:
            return False
        code = _session_of_participant[key] = found[0]
    if code not in paused:
        row = dbq(Session).filter(Session.code == code).with_entities(Session._vars).first()
        paused[code] = bool(row and (row[0] or {}).get(PAUSED_AT) is not None)
    return paused[code]


# --- oTree's page timer, made pause-aware (lab/otree_patches/page_timer.py puts these in) ---------------
def pause_aware_time_left(first_shown):
    """oTree's ``Page.remaining_timeout_seconds_inner``: the time left by the session's clock
    (``clock``); a page first shown during a pause starts its time at the pause."""

    def remaining_timeout_seconds_inner(self):
        pp = self.participant
        paused_at = paused_since(pp._session_code)
        if paused_at is None:
            return first_shown(self)
        shown_before = pp._timeout_page_index == pp._index_in_pages
        now = time.time()
        remaining = first_shown(self)  # sets the deadline (from now) if the page is new
        if remaining is None or pp._timeout_expiration_time is None:
            return None
        if not shown_before:
            pp._timeout_expiration_time -= max(0.0, now - paused_at)
        return pp._timeout_expiration_time - paused_at

    return remaining_timeout_seconds_inner


def is_past_timeout(self):
    """oTree's ``Page._is_past_timeout``, against the session's clock (its 2 s tolerance kept)."""
    pp = self.participant
    return (pp._timeout_page_index == pp._index_in_pages and pp._timeout_expiration_time is not None
            and pp._timeout_expiration_time - clock(pp._session_code) < 2)
