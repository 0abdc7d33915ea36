"""REPLACES: otree.tasks.post, otree.tasks.get (wrapped), otree.tasks.Worker.__init__,
otree.tasks.Worker.listen, otree.tasks.Worker.ensure_pages_visited (in effect a fork of oTree's
worker loop); in the timeout worker process (``otree timeoutsubprocess``) only.

WHY: (lab/server/timeout_worker.py has the details) on SQLite the worker calls the server while its
own write transaction is open, so every such request stalls 5 s and fails ("database is
locked"): a 72-participant session stalled for minutes. After an outage of over 60 s oTree drops
the overdue tasks and the next round's wait page waits for ever. One database error ends oTree's
loop and the process, unnoticed: no closed tab advances again. It loads every participant's next
page 10 s after each wait page even when their own browser has shown it (some 50 renders at each
round start). And a paused session's tasks must wait for the resume.

HOW TO CHECK: tests/test_timeout_worker_locked_database.py, tests/test_outage.py and
tests/test_timeout_worker_visits.py without this patch (remove it from patch_modules()); compare oTree's
Worker.listen with lab.server.timeout_worker.run_due_tasks.
"""

from __future__ import annotations

import sys

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.tasks.post", "otree.tasks.get", "otree.tasks.Worker", "otree.tasks.Worker.__init__",
           "otree.tasks.Worker.listen", "otree.tasks.Worker.ensure_pages_visited",
           "otree.tasks.ensure_pages_visited", "otree.models_concrete.TaskQueueMessage",
           "otree.models.participant.Participant._url_i_should_be_on"]
# In force in the timeout worker process only (tests/test_otree_seam.py knows).
REPLACED = ["otree.tasks.post", "otree.tasks.get", "otree.tasks.Worker.__init__", "otree.tasks.Worker.listen",
            "otree.tasks.Worker.ensure_pages_visited"]


def applies() -> bool:
    """Only the timeout worker runs oTree's worker; every other process is left as it is."""
    return "timeoutsubprocess" in sys.argv


def install() -> None:
    import otree.tasks

    from lab.server import timeout_worker

    if not applies() or patched_by(otree.tasks.Worker.listen) == "timeout_worker":
        return
    for name in ("post", "get"):
        original = getattr(otree.tasks, name)
        setattr(otree.tasks, name, marked(timeout_worker.committing(original), original, __name__))
    Worker = otree.tasks.Worker
    for name, replacement in (("__init__", timeout_worker.resuming_init), ("listen", timeout_worker.listen),
                              ("ensure_pages_visited", timeout_worker.ensure_pages_visited)):
        setattr(Worker, name, marked(replacement, getattr(Worker, name), __name__))
