"""Work to do once the request's database transaction has committed, and never if it rolls back:
pushes to participants' pages about what was written, and this process's copies of it
(lab/server/pause.py, lab/server/notices.py). A page told of a change before the change is committed could
ask the server and not find it; a copy updated by a request that then failed would disagree
with the database."""

from __future__ import annotations

import logging
import threading
from typing import Callable

_KEY = "lab_after_commit"
_listening = False
_lock = threading.Lock()
logger = logging.getLogger("lab.base.committed")


def after_commit(work: Callable[[], None]) -> None:
    """Run ``work`` after the current transaction commits (at once when there is none)."""
    from otree.database import db

    session = db._db
    if session is None:
        work()
        return
    _listen()
    session.info.setdefault(_KEY, []).append(work)


def _run(session) -> None:
    for work in session.info.pop(_KEY, ()):
        try:
            work()
        except Exception:  # the commit stands; one failed push must not stop the others
            logger.exception("after commit")


def _drop(session) -> None:
    session.info.pop(_KEY, None)


def _listen() -> None:
    global _listening
    if _listening:
        return
    with _lock:
        if _listening:
            return
        from otree.database import DBSession
        from sqlalchemy import event

        event.listen(DBSession, "after_commit", _run)
        event.listen(DBSession, "after_rollback", _drop)
        _listening = True
