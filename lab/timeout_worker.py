"""Fixes for oTree's timeout worker (prodserver's second process, `otree timeoutsubprocess`).

1. SQLite: the worker deletes each due task and, in the same open transaction, asks the server
   over HTTP to submit or load a page. On SQLite that transaction holds the file's write lock
   while the server, handling that very request, waits for it: every such request stalls for
   SQLite's 5 s busy timeout and fails ("database is locked"), under oTree's global lock. Seen
   here with 72 participants: the worker's wave of page loads after each round-start wait page
   stalled the server for minutes. Committing before each HTTP call releases the lock;
   PostgreSQL, which locks rows, never had the problem.

2. Outages: when it starts, oTree's worker deletes every task more than 60 s overdue, so after
   a longer outage the pages that expired meanwhile are never submitted for closed tabs, and the
   next round's wait page waits for them forever. Instead, tasks that fell due during an outage
   (up to ``RESUME_OVERDUE_WITHIN_SECONDS`` ago) are kept and run ``RECOVERY_DELAY_SECONDS``
   after the start: open tabs, which retry their own submission every 2 s once the server
   answers (`_static/lab/lab-page.js`), get there first with what the participant had typed.
   Older tasks belong to sessions abandoned long ago and are still dropped, so that yesterday's
   unfinished session does not play itself out by timeouts this morning.
"""

from __future__ import annotations

import sys
import time
from urllib.error import URLError

# An outage of a lab morning is minutes; a session left for longer is not resumed by timeouts.
RESUME_OVERDUE_WITHIN_SECONDS = 3600
# Lets open tabs resubmit their page (with its typed text) before the worker submits it empty.
RECOVERY_DELAY_SECONDS = 10
# The server may still be starting when the worker sends its first requests.
CONNECT_RETRY_SECONDS = 30


def release_database_before_requests() -> None:
    """Patch the running timeout worker (no-op in every other process). The name is kept for
    the callers; it installs both fixes of this module."""
    if "timeoutsubprocess" not in sys.argv:
        return
    import otree.tasks
    from otree.database import db

    def committing(request):
        def send(*args, **kwargs):
            db.commit()
            deadline = time.monotonic() + CONNECT_RETRY_SECONDS
            while True:
                try:
                    return request(*args, **kwargs)
                except Exception as exc:
                    if not _is_connection_refused(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(1)

        return send

    if not getattr(otree.tasks, "_lab_patched", False):
        otree.tasks.post = committing(otree.tasks.post)
        otree.tasks.get = committing(otree.tasks.get)
        otree.tasks.Worker.__init__ = _resuming_init
        otree.tasks._lab_patched = True


def _is_connection_refused(exc: BaseException) -> bool:
    # oTree's get() re-raises a plain Exception that names the URLError
    reason = getattr(exc, "reason", None) if isinstance(exc, URLError) else None
    return isinstance(reason, ConnectionRefusedError) or "Connection refused" in repr(exc)


def _resuming_init(self, port):
    """oTree's Worker.__init__, except that tasks overdue from an outage are rescheduled."""
    self.base_url = f"http://127.0.0.1:{port}"
    reschedule_overdue_tasks(time.time())


def reschedule_overdue_tasks(now: float) -> int:
    """Overdue tasks: dropped if older than the resume window, otherwise due shortly after
    ``now``. Returns how many were rescheduled."""
    from otree.database import db
    from otree.models_concrete import TaskQueueMessage

    TaskQueueMessage.objects_filter(TaskQueueMessage.epoch_time < now - RESUME_OVERDUE_WITHIN_SECONDS).delete()
    overdue = list(TaskQueueMessage.objects_filter(TaskQueueMessage.epoch_time < now).order_by("epoch_time"))
    resume_at = int(now) + RECOVERY_DELAY_SECONDS
    for task in overdue:
        task.epoch_time = resume_at
    db.commit()
    if overdue:
        print(f"timeout worker: {len(overdue)} page timeouts overdue after an outage, "
              f"run in {RECOVERY_DELAY_SECONDS} s", flush=True)
    return len(overdue)
