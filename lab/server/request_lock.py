"""oTree's per-request transaction and global lock, as plain ASGI middleware.

oTree 6 wraps every page request in ``CommitTransactionMiddleware``: take the global lock
(``otree.middleware.lock2``), open a database session, run the page, commit (rollback on a 5xx),
release. It and ``PerfMiddleware`` inside it are starlette ``BaseHTTPMiddleware``s, which run the
rest of the app in a new task and pass every response message through a queue: each hop is a
turn of the event loop, taken while the lock is held. With 600 open sockets at 300 online
participants a turn of the loop costs milliseconds, so the lock was held ~15 ms per request,
half of it in those turns (bench/server_trace.py), and the requests queued for it.

The same steps here without the task and the queues: the request's body is read first (a
form still in flight is not awaited under the lock), then the lock is taken and the session opened
as before; when the page starts its response (``http.response.start``) the transaction is
committed (rolled back on a 5xx or when no response came) and the lock released, before the
client is sent anything, as in oTree. A streamed body (an export) is sent after the release, as
in oTree. ``PerfMiddleware``'s one job, a timing line on Heroku (``X-Request-ID``), is kept.

One change: oTree leaves its exports and the admin's Data tab (``VIEWS_WITHOUT_LOCK``) out of the
lock, but they read the database on the server's one connection (SQLAlchemy's ``StaticPool``,
PostgreSQL too) while page requests write on it: when an export's session let go of the
connection, its reset (a ROLLBACK) undid the writes a page request had flushed and not yet
committed. Measured: 16 participants playing while two clients downloaded the custom exports
in a loop, on PostgreSQL: a pair's decisions lost, their Result page a 500 from then on
(tests/test_exports_during_play.py). Here only the paths that never touch the database
(``PATHS_WITHOUT_DATABASE``: static files, the agents' model test) go without the lock; an export
waits for the pages and they for it.
"""

from __future__ import annotations

import logging
import time

perf_logger = logging.getLogger("otree.perf")
# Path prefixes of requests that never read or write the database: the only ones that run without
# oTree's lock. oTree's static files (a browser asks for several with every page it loads; oTree
# serves them under the lock) and lab/agent_runtime/model_probe.py's route, which adds itself.
PATHS_WITHOUT_DATABASE: set[str] = {"/static/", "/favicon.ico"}


class CommitTransaction:
    """``otree.middleware.CommitTransactionMiddleware`` without a task or queue per request."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        from otree import middleware
        from otree.database import NEW_IDMAP_EACH_REQUEST, db

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        lock = None if any(path.startswith(p) for p in PATHS_WITHOUT_DATABASE) else middleware.lock2
        if lock is not None:
            _, receive = await read_body_first(receive)
            await lock.acquire()
        open_ = [True]

        def end_transaction(status) -> None:
            if not open_[0]:
                return
            open_[0] = False
            try:
                if status is not None and status < 500:
                    db.commit()
                else:
                    db.rollback()
            finally:
                if lock is not None:
                    lock.release()

        async def send_after_commit(message) -> None:
            if message["type"] == "http.response.start":
                end_transaction(message["status"])
            await send(message)

        try:
            if NEW_IDMAP_EACH_REQUEST:
                db.new_session()
            await self.app(scope, receive, send_after_commit)
        finally:
            end_transaction(None)  # no response started (an exception): roll back, release


async def read_body_first(receive):
    """The request's body, and a ``receive`` that gives the app the same messages again, then the
    live one (a disconnect). Read before the lock is taken: a form's body still in flight would
    otherwise be awaited under the lock, and every wait hands the loop to the other sockets.
    (lab/server/request_guard.py reads a REST call's body the same way, to check it.)"""
    read = []
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break
    body = b"".join(m.get("body", b"") for m in read if m["type"] == "http.request")
    pending = list(read)

    async def replay():
        return pending.pop(0) if pending else await receive()

    return body, replay


class PerfLog:
    """``otree.middleware.PerfMiddleware``: on Heroku (a request with ``X-Request-ID``) the
    request's own time in the log."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        request_id = None
        if scope["type"] == "http":
            request_id = dict(scope.get("headers") or ()).get(b"x-request-id")
        if not request_id:
            await self.app(scope, receive, send)
            return
        started = time.time()
        try:
            await self.app(scope, receive, send)
        finally:
            msec = int((time.time() - started) * 1000)
            perf_logger.info(f"own_time={msec}ms request_id={request_id.decode(errors='replace')}")
