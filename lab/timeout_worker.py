"""A fix for oTree's timeout worker on SQLite (prodserver's second process).

The worker deletes each due task and, in the same open transaction, asks the server over HTTP
to submit or load a page. On SQLite that transaction holds the file's write lock while the
server, handling that very request, waits for it: every such request stalls for SQLite's 5 s
busy timeout and fails ("database is locked"), under oTree's global lock. Seen here with 72
participants: the worker's wave of page loads after each round-start wait page stalled the
server for minutes. Committing before each HTTP call releases the lock; PostgreSQL, which locks
rows, never had the problem.
"""

from __future__ import annotations

import sys


def release_database_before_requests() -> None:
    """Patch the running timeout worker (no-op in every other process)."""
    if "timeoutsubprocess" not in sys.argv:
        return
    import otree.tasks
    from otree.database import db

    def committing(request):
        def send(*args, **kwargs):
            db.commit()
            return request(*args, **kwargs)

        return send

    if not getattr(otree.tasks, "_lab_commits_first", False):
        otree.tasks.post = committing(otree.tasks.post)
        otree.tasks.get = committing(otree.tasks.get)
        otree.tasks._lab_commits_first = True
