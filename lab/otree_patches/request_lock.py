"""REPLACES: otree.middleware.CommitTransactionMiddleware, otree.middleware.PerfMiddleware

WHY: oTree's per-request transaction and global lock are Starlette ``BaseHTTPMiddleware``s, which
run the page in a new task and pass every response message through a queue, each hop a turn of
the event loop taken under oTree's global lock: at 300 online participants (600 sockets) the lock
was held ~15 ms per request, half of it in those turns, and page requests queued for it. And
oTree leaves its exports and the admin's Data tab out of the lock while they share the server's
one database connection: an export during play undid a page's flushed writes (a pair's decisions
lost, their Result page a 500). The same steps as plain ASGI middleware, with only the paths that
never touch the database outside the lock: lab/server/request_lock.py.

HOW TO CHECK: tests/test_request_lock.py and tests/test_exports_during_play.py against plain
oTree (remove this patch from patch_modules()); bench/server_trace.py for the time under the lock.
"""

from __future__ import annotations

import sys

TARGETS = ["otree.middleware.CommitTransactionMiddleware", "otree.middleware.PerfMiddleware",
           "otree.middleware.lock2", "otree.middleware._get_paths_without_lock", "otree.asgi"]
REPLACED = ["otree.middleware.CommitTransactionMiddleware", "otree.middleware.PerfMiddleware"]


def install() -> None:
    """oTree's app builds its middleware stack from ``otree.middleware``'s names; if it is built
    already, it is built again."""
    from otree import middleware

    from lab.server.request_lock import CommitTransaction, PerfLog

    if middleware.CommitTransactionMiddleware is CommitTransaction:
        return
    middleware.CommitTransactionMiddleware = CommitTransaction
    middleware.PerfMiddleware = PerfLog
    app = getattr(sys.modules.get("otree.asgi"), "app", None)  # None while otree.asgi imports the apps
    if app is not None:
        app.middleware_stack = app.build_middleware_stack()
