"""Fixes for oTree's timeout worker (prodserver's second process, `otree timeoutsubprocess`);
lab/otree_patches/timeout_worker.py puts them in.

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

3. A database error ends oTree's worker: its loop deletes each task once it has run and commits
   them together, so on SQLite a write lock the server holds past the 5 s busy timeout ("database
   is locked") fails that commit, the error leaves the loop, and the process exits. prodserver
   does not notice; from then on no closed tab is ever advanced. Here each task is deleted in a
   commit of its own, a database error costs one poll (the task stays and is run again), and a
   task whose request the server answered with an error (a 5xx: it was busy too) is retried a
   few times before it is dropped as oTree drops it. Running a task twice is harmless: it
   submits or loads a page only if the participant is still on it.

4. After every wait page, oTree's worker loads, 10 s later, the page each of its participants
   should be on, so that a closed tab's next page starts its timer. It loads it whether or not
   the participant's own browser has long since shown it: at a round start that was some 50
   renders of Message1 ten seconds in, queued with the participants' own submissions (the
   bench's server trace). A page whose timer is already running (oTree notes the
   page index when it first shows a page, in the transaction that schedules its timeout) is
   left alone; every other participant is visited as oTree visits them.

5. A paused session (the experimenter's dashboard, lab/server/pause.py): its participants' tasks stay
   in the queue, untouched, until the resume moves them past the pause.
"""

from __future__ import annotations

import logging
import re
import time
from urllib.error import HTTPError, URLError
from urllib.parse import urljoin

# An outage of a lab morning is minutes; a session left for longer is not resumed by timeouts.
RESUME_OVERDUE_WITHIN_SECONDS = 3600
# Lets open tabs resubmit their page (with its typed text) before the worker submits it empty.
RECOVERY_DELAY_SECONDS = 10
# The server may still be starting when the worker sends its first requests.
CONNECT_RETRY_SECONDS = 30
POLL_SECONDS = 3  # oTree's
# A task the server answered with an error is run again at the next polls, this many times in all.
SERVER_ERROR_ATTEMPTS = 5
logger = logging.getLogger("lab.server.timeout_worker")


def committing(request):
    """oTree's ``otree.tasks.post``/``get``: the worker's transaction committed first (fix 1), and
    a server still starting waited for."""
    from otree.database import db

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


def _is_connection_refused(exc: BaseException) -> bool:
    # oTree's get() re-raises a plain Exception that names the URLError
    reason = getattr(exc, "reason", None) if isinstance(exc, URLError) else None
    return isinstance(reason, ConnectionRefusedError) or "Connection refused" in repr(exc)


def resuming_init(self, port):
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


def listen(self):
    """oTree's Worker.listen: the same polls, surviving a database error (fix 3)."""
    print("timeoutworker is listening for messages through DB", flush=True)
    failures: dict[int, int] = {}
    while True:
        run_due_tasks(self, failures)
        time.sleep(POLL_SECONDS)


def run_due_tasks(worker, failures: dict[int, int]) -> int:
    """One poll: every due task run, and deleted in a commit of its own. ``failures`` counts,
    by task id, the runs the server answered with an error. Returns the tasks done."""
    import sqlalchemy.exc
    from otree.database import db, session_scope
    from otree.models_concrete import TaskQueueMessage

    from lab.server.pause import task_is_held

    done = 0
    paused: dict[str, bool] = {}
    try:
        with session_scope():
            due = list(TaskQueueMessage.objects_filter(TaskQueueMessage.epoch_time <= time.time())
                       .order_by("epoch_time"))
            for task in due:
                task_id = task.id
                if task_is_held(task, paused):
                    continue  # its session is paused: the resume reschedules it (fix 5)
                try:
                    getattr(worker, task.method)(**task.kwargs())
                except sqlalchemy.exc.SQLAlchemyError:
                    raise  # the session is unusable: end this poll, the task stays
                except Exception as exc:
                    if _server_was_busy(exc) and failures.get(task_id, 0) + 1 < SERVER_ERROR_ATTEMPTS:
                        failures[task_id] = failures.get(task_id, 0) + 1
                        logger.warning("timeout task %s: the server answered %r; run again at the next poll",
                                       task_id, exc)
                        db.commit()
                        continue
                    logger.exception(repr(exc))  # as oTree: logged, and the task dropped
                failures.pop(task_id, None)
                db.delete(task)
                db.commit()
                done += 1
    except sqlalchemy.exc.SQLAlchemyError as exc:
        logger.warning("timeout worker: database error, its due tasks stay for the next poll: %s",
                       str(exc).splitlines()[0])
    return done


def ensure_pages_visited(self, participant_pks, page_index):
    """oTree's task (fix 4): each participant still at most one page past ``page_index`` gets
    the page they should be on loaded, unless that page has already been shown."""
    from otree.tasks import get

    for participant in unvisited_participants(participant_pks, page_index):
        get(urljoin(self.base_url, participant._url_i_should_be_on()))


def unvisited_participants(participant_pks, page_index) -> list:
    """The participants oTree's task would visit (the +1 is oTree's, for a participant who has
    just been moved on), less those whose current page has been shown (its timer is running)."""
    from otree.models.participant import Participant

    candidates = Participant.objects_filter(Participant.id.in_(participant_pks),
                                            Participant._index_in_pages <= page_index + 1)
    return [p for p in candidates if p._timeout_page_index != p._index_in_pages]


def _server_was_busy(exc: BaseException) -> bool:
    """A 5xx from the server (oTree's post() raises HTTPError; its get() wraps it in an
    Exception that names it)."""
    if isinstance(exc, HTTPError):
        return exc.code >= 500
    return bool(re.search(r"HTTP ?Error 5\d\d", repr(exc)))
