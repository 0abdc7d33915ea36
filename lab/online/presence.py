"""Closed tabs in online sessions: who has no page open, watched by the server itself.

Every participant page holds one websocket (``/lab_notices``, lab/server/notices.py) for as long as it
is open; a page change closes one and opens the next within a second. Here each connect and
disconnect is counted per participant, in the server process. A watcher on the server's event
loop (started with the app, so nobody needs to act) looks every ``WATCH_SECONDS`` at the online
sessions' participants who have started and not finished: one with no page open for the
session's ``dropout_closed_tab_seconds`` (the grace) is dropped (reason ``closed_tab``,
lab/online/dropouts.py), under oTree's global lock as a page request would be. A paused session
drops nobody.

The grace counts from the later of
- their arrival: oTree's ``time_started_utc``, written when their link is first followed
  (``InitializeParticipant``, where the study link sends them at once), so someone whose first
  page is still on its way has the whole grace from the moment they came, whenever the server
  started;
- the last time the server knew a page of theirs open: the close of their last page's socket,
  seen by this process, or else what a previous run of the server recorded (the payment app's
  ``PagePresence`` table, written by the watcher in its own transaction: a page that closed, and
  every ``HEARTBEAT_SECONDS`` the pages open, in one statement; no write in a page request). A
  tab closed before a restart is timed from its close; one whose page was open when the server
  stopped is timed from its last heartbeat, but not dropped before ``RECONNECT_SECONDS`` after
  the start, the time an open tab takes to reconnect its socket.
Neither oTree's ``_last_request_timestamp`` (its timeout worker refreshes it when it submits an
absent participant's page) nor the server's start stands for a person being there.

This is the server's view: it works under prodserver, whose timeout worker (another process)
only submits expired pages and knows nothing of sockets.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import threading
import time

from lab.base import app_registry
from lab.server import pause
from lab.online import dropouts

WATCH_SECONDS = 2.0
# An open page's presence is written this often: after a crash, a tab that never comes back is
# timed from at most this long before the server stopped.
HEARTBEAT_SECONDS = 10.0
# After a (re)start, a tab that was open has this long to reconnect its socket before it can be
# dropped (oTree's reconnecting websocket waits at most 10 s between tries).
RECONNECT_SECONDS = 10.0
# A socket closed this briefly is a page change (the next page's socket follows within a second),
# not yet worth recording as a close.
CLOSE_SETTLES_SECONDS = 1.0
logger = logging.getLogger("lab.online")

_lock = threading.Lock()
_open: dict[str, int] = {}  # participant code -> sockets open now
_closed_at: dict[str, float] = {}  # participant code -> when their last socket closed
_started_at = time.time()


def connected(participant_code: str) -> None:
    with _lock:
        _open[participant_code] = _open.get(participant_code, 0) + 1
        _closed_at.pop(participant_code, None)


def disconnected(participant_code: str, now: float | None = None) -> None:
    with _lock:
        left = _open.get(participant_code, 0) - 1
        if left > 0:
            _open[participant_code] = left
            return
        _open.pop(participant_code, None)
        _closed_at[participant_code] = time.time() if now is None else now


def arrival(time_started_utc: str | None) -> float | None:
    """oTree's ``time_started_utc`` (``str(datetime.utcnow())``) as epoch seconds."""
    if not time_started_utc:
        return None
    try:
        started = datetime.datetime.fromisoformat(time_started_utc)
    except ValueError:
        return None
    return started.replace(tzinfo=datetime.timezone.utc).timestamp()


def drop_due_at(code: str, arrived_at: float, recorded: tuple | None, grace: float) -> float | None:
    """When the participant is to be dropped for having no page open (None: a page is open now).
    ``recorded``: (seen_at, page_open) as a previous run of the server left it, or None."""
    with _lock:
        if _open.get(code):
            return None
        closed = _closed_at.get(code)
    if closed is not None:  # this process saw their last page close
        return max(arrived_at, closed) + grace
    seen_at, page_open = recorded or (None, False)
    due = max(arrived_at, seen_at or 0.0) + grace
    if page_open:  # open when the server stopped: the outage cut their socket, not they
        due = max(due, _started_at + min(grace, RECONNECT_SECONDS))
    return due


# --- what the next start needs: the PagePresence table ------------------------------------------
_recorded: dict[str, tuple] = {}  # participant code -> (seen_at, page_open), as in the database
_recorded_sessions: set = set()  # sessions whose rows have been read into _recorded


def recorded_presence(session_code: str) -> dict:
    """The session's rows, read once per run of the server (only the watcher writes them)."""
    if session_code not in _recorded_sessions:
        Presence = app_registry.page_presence_model()
        for code, seen_at, page_open in Presence.objects_filter(session_code=session_code).with_entities(
                Presence.participant_code, Presence.seen_at, Presence.page_open):
            _recorded[code] = (seen_at, bool(page_open))
        _recorded_sessions.add(session_code)
    return _recorded


def presence_changes(codes, now: float, heartbeat: bool) -> list:
    """(code, seen_at, page_open) to write for these participants: each page closed since (and
    not reopened), each open page seen for the first time, and with ``heartbeat`` every open page."""
    changes = []
    with _lock:
        for code in codes:
            seen_at, page_open = _recorded.get(code, (None, False))
            if _open.get(code):
                if heartbeat or seen_at is None:
                    changes.append((code, now, True))
                continue
            closed = _closed_at.get(code)
            if closed is not None and now - closed >= CLOSE_SETTLES_SECONDS and (page_open or seen_at != closed):
                changes.append((code, closed, False))
    return changes


def record_presence(session_code: str, changes: list) -> None:
    """Write ``changes`` in the watcher's transaction: the rows that share a value (a heartbeat's)
    in one statement, the others (a close) one each, new rows added."""
    from otree.database import db

    Presence = app_registry.page_presence_model()
    table = Presence.__table__
    by_value: dict[tuple, list] = {}
    for code, seen_at, page_open in changes:
        if code in _recorded:
            by_value.setdefault((seen_at, page_open), []).append(code)
        else:
            db.add(Presence(session_code=session_code, participant_code=code, seen_at=seen_at, page_open=page_open))
        _recorded[code] = (seen_at, page_open)
    for (seen_at, page_open), codes in by_value.items():
        db._db.execute(table.update().where(table.c.participant_code.in_(codes)).values(
            seen_at=seen_at, page_open=page_open))


_heartbeat_at: dict[str, float] = {}  # session code -> when its open pages were last written


_settled: set = set()  # participant codes the watcher has done with
_arrived: dict[str, float] = {}  # participant code -> their arrival (epoch seconds)
_online_sessions = dropouts.ONLINE_SESSIONS  # codes of the online sessions this server knows of
_scanned_at = 0.0
RESCAN_SECONDS = 30.0  # new sessions are looked for this often (and at the start)


def scan_sessions(now: float) -> None:
    """Note the online sessions among the database's (each session's config is read once)."""
    global _scanned_at
    from otree.database import dbq
    from otree.models import Session

    _scanned_at = now
    for (code,) in dbq(Session).with_entities(Session.code):
        if code not in _online_sessions and dropouts._online_by_code(code):
            _online_sessions.add(code)


def needs_a_look(now: float) -> bool:
    """Whether the watcher has anything to do (a lab server with no online session never takes
    oTree's lock for it but to look for new sessions every ``RESCAN_SECONDS``)."""
    return bool(_online_sessions) or now - _scanned_at >= RESCAN_SECONDS


def due(now: float | None = None) -> list:
    """Record who has a page open, and drop every online participant whose pages have all been
    closed past their session's grace. Runs in a database scope under oTree's global lock;
    returns the codes dropped."""
    from otree.database import dbq
    from otree.models import Participant, Session

    now = time.time() if now is None else now
    if now - _scanned_at >= RESCAN_SECONDS:
        scan_sessions(now)
    dropped = []
    for session in Session.objects_filter(Session.code.in_(sorted(_online_sessions))) if _online_sessions else ():
        # Three columns of those who have started and not finished; a whole row (its vars) only
        # for someone whose pages have all been closed past the grace.
        candidates = dbq(Participant).with_entities(Participant.id, Participant.code,
                                                    Participant.time_started_utc).filter(
            Participant.session_id == session.id, Participant._index_in_pages > 0,
            Participant._index_in_pages < Participant._max_page_index).all()
        recorded = recorded_presence(session.code)
        heartbeat = now - _heartbeat_at.get(session.code, 0.0) >= HEARTBEAT_SECONDS
        if heartbeat:
            _heartbeat_at[session.code] = now
        record_presence(session.code, presence_changes(
            [code for _, code, _ in candidates if code not in _settled], now, heartbeat))
        if pause.paused_since(session.code) is not None:
            continue
        grace = float(dropouts.settings(session)["dropout_closed_tab_seconds"])
        for participant_id, code, time_started_utc in candidates:
            if code in _settled:
                continue
            arrived_at = _arrived.get(code)
            if arrived_at is None:
                # Not known (a row oTree did not start): from the first look that finds them.
                arrived_at = _arrived[code] = arrival(time_started_utc) or now
            due_at = drop_due_at(code, arrived_at, recorded.get(code), grace)
            if due_at is None or now < due_at:
                continue
            participant = Participant.objects_get(id=participant_id)
            # A partner who goes on alone (partner_dropped) can still leave; the screened out and
            # the lobby's timed out have left already.
            if dropouts.is_dropped(participant) or dropouts.finished(participant) or dropouts.left_already(participant):
                _settled.add(code)  # dropped, finished or out: never looked at again
                continue
            try:
                if dropouts.mark_dropped(participant, "closed_tab", by="server"):
                    dropped.append(participant.code)
            except ValueError as refused:
                logger.warning("closed tab of %s not dropped: %s", participant.code, refused)
    return dropped


async def watch() -> None:
    """The watcher, on the server's loop for as long as it runs."""
    from otree.database import session_scope
    from otree.middleware import lock2

    def work():
        with session_scope():
            return due()

    while True:
        await asyncio.sleep(WATCH_SECONDS)
        if not needs_a_look(time.time()):
            continue
        try:
            async with lock2:  # the lock every page request takes
                dropped = await asyncio.get_running_loop().run_in_executor(None, work)
            if dropped:
                logger.info("closed tabs dropped: %s", dropped)
        except Exception:  # one bad row must not end the watcher
            logger.exception("closed-tab watcher")


# --- hooks lab/otree_patches/ puts in ------------------------------------------------------------
def tracking_presence(consumer) -> None:
    """The notices socket's consumer (lab/server/notices.py) notes each participant's page open and
    closed."""
    original_connect, original_disconnect = consumer.on_connect, consumer.on_disconnect

    async def on_connect(self, websocket) -> None:
        await original_connect(self, websocket)
        connected(self.cleaned_kwargs["participant_code"])

    async def on_disconnect(self, websocket, close_code: int) -> None:
        await original_disconnect(self, websocket, close_code)
        disconnected(self.cleaned_kwargs["participant_code"])

    consumer.on_connect, consumer.on_disconnect = on_connect, on_disconnect


def after_server_start() -> None:
    """On oTree's app start (lab/otree_patches/router_startup.py): the closed-tab watcher runs,
    and reconnections are given their grace from now."""
    global _started_at
    _started_at = time.time()
    asyncio.ensure_future(watch())
