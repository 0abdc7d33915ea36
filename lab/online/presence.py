"""Closed tabs in online sessions: who has no page open, watched by the server itself.

Every participant page holds one websocket (``/lab_notices``, lab/notices.py) for as long as it
is open; a page change closes one and opens the next within a second. Here each connect and
disconnect is counted per participant, in the server process. A watcher on the server's event
loop (started with the app, so nobody needs to act) looks every ``WATCH_SECONDS`` at the online
sessions' participants who have started and not finished: one with no page open for the
session's ``dropout_closed_tab_seconds`` is dropped (reason ``closed_tab``,
lab/online/dropouts.py), under oTree's global lock as a page request would be. "No page open
since" is the last disconnect seen, or, for a participant not seen since this server started,
the later of the server's start and their last request: a restart forgets nothing it needs.
A paused session drops nobody.

This is the server's view: it works under prodserver, whose timeout worker (another process)
only submits expired pages and knows nothing of sockets.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from lab import notices, pause
from lab.online import dropouts

WATCH_SECONDS = 2.0
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


def absent_since(code: str, last_request: float | None) -> float | None:
    """When the participant's last page closed (None: a page is open now)."""
    with _lock:
        if _open.get(code):
            return None
        closed = _closed_at.get(code)
    if closed is not None:
        return closed
    return max(_started_at, float(last_request or 0))


_settled: set = set()  # participant codes the watcher has done with
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
    """Drop every online participant whose pages have all been closed past their session's grace.
    Runs in a database scope under oTree's global lock; returns the codes dropped."""
    from otree.database import dbq
    from otree.models import Participant, Session

    now = time.time() if now is None else now
    if now - _scanned_at >= RESCAN_SECONDS:
        scan_sessions(now)
    dropped = []
    for session in Session.objects_filter(Session.code.in_(sorted(_online_sessions))) if _online_sessions else ():
        if pause.paused_since(session.code) is not None:
            continue
        grace = float(dropouts.settings(session)["dropout_closed_tab_seconds"])
        # Three columns of those who have started and not finished; a whole row (its vars) only
        # for someone whose pages have all been closed past the grace.
        candidates = dbq(Participant).with_entities(Participant.id, Participant.code,
                                                    Participant._last_request_timestamp).filter(
            Participant.session_id == session.id, Participant._index_in_pages > 0,
            Participant._index_in_pages < Participant._max_page_index)
        for participant_id, code, last_request in candidates.all():
            since = absent_since(code, last_request)
            if code in _settled or since is None or now - since < grace:
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


# --- installed at import ------------------------------------------------------------------------
def _install() -> None:
    from otree.channels.routing import websocket_routes
    from starlette.routing import Router

    for route in websocket_routes:
        if getattr(route, "path", None) != notices.SOCKET_PATH:
            continue
        consumer = route.endpoint
        if getattr(consumer, "_lab_presence", False):
            break
        original_connect, original_disconnect = consumer.on_connect, consumer.on_disconnect

        async def on_connect(self, websocket) -> None:
            await original_connect(self, websocket)
            connected(self.cleaned_kwargs["participant_code"])

        async def on_disconnect(self, websocket, close_code: int) -> None:
            await original_disconnect(self, websocket, close_code)
            disconnected(self.cleaned_kwargs["participant_code"])

        consumer.on_connect, consumer.on_disconnect = on_connect, on_disconnect
        consumer._lab_presence = True
    if getattr(Router.startup, "_lab_presence", False):
        return
    original_startup = Router.startup

    async def startup(self):
        await original_startup(self)
        import sys

        asgi = sys.modules.get("otree.asgi")
        if asgi is not None and getattr(asgi, "app", None) is not None and self is asgi.app.router:
            global _started_at
            _started_at = time.time()
            asyncio.ensure_future(watch())

    startup._lab_presence = True
    Router.startup = startup


_install()
