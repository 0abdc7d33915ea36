"""The call journal: every model call on disk before it is sent, until its record is committed.

Owns ``CallJournalFile`` (a small SQLite file of its own, written from the agent thread), the
journal of this process (``call_journal``) and the rule that a call leaves the journal only once
the transaction holding its ``LlmCall`` row has committed (``forget_when_committed``). What the
turns write into it: lab/agent_runtime/turns.py; what a server start reads back out of it:
lab/agent_runtime/startup.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from typing import Optional

from agents.types import CallRecord
from lab.base.committed import after_commit

logger = logging.getLogger("lab.agents")


class CallJournalFile:
    """Call records in a SQLite file of their own, written from any thread.

    Not oTree's database: its one connection belongs to the request being served, and writes
    from the agent thread would race the pages' commits. One row per call: ``pending`` when
    sent, ``done`` when it returned, deleted once the settled turn's ``LlmCall`` rows are
    committed (``forget_when_committed``). WAL with synchronous=NORMAL: a committed row survives
    the process being killed.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=NORMAL")
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS calls (call_id TEXT PRIMARY KEY, session_code TEXT, game TEXT, "
            "player_id INTEGER, state TEXT, record TEXT, updated_at REAL)")

    def write(self, context: tuple, record: CallRecord, state: str) -> None:
        session_code, game, player_id = context
        with self._lock:
            self._connection.execute(
                "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.call_id, session_code, game, player_id, state,
                 json.dumps(record.to_dict(), ensure_ascii=False), time.time()))

    def forget(self, call_ids: list[str]) -> None:
        if call_ids:
            with self._lock:
                self._connection.executemany("DELETE FROM calls WHERE call_id = ?", [(c,) for c in call_ids])

    def orphans(self) -> list[tuple]:
        """(session_code, game, player_id, state, record dict) of every call not yet settled."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT session_code, game, player_id, state, record FROM calls ORDER BY updated_at").fetchall()
        return [(code, game, player_id, state, json.loads(record)) for code, game, player_id, state, record in rows]


ABANDONED = "abandoned"  # a journal state: the page settled the turn while the call was in flight


_journal_file: Optional[CallJournalFile] = None
_journal_lock = threading.Lock()


def journal_path() -> str:
    """``LAB_CALL_JOURNAL``, else a file in the working directory named after the database."""
    if os.environ.get("LAB_CALL_JOURNAL"):
        return os.environ["LAB_CALL_JOURNAL"]
    database = os.environ.get("DATABASE_URL") or "sqlite:///db.sqlite3"
    return f"llm_call_journal-{hashlib.sha256(database.encode()).hexdigest()[:8]}.sqlite3"


def forget_when_committed(call_ids: list[str]) -> None:
    """Drop these calls from the journal once the transaction holding their ``LlmCall`` rows
    has committed: a request that dies (kill -9) or rolls back before its commit leaves them in
    the journal, for ``recover_journaled_calls`` at the next start (which skips a call already on
    record). Dropped before the commit, they were lost with it."""
    if call_ids:
        after_commit(lambda: _forget(list(call_ids)))


def _forget(call_ids: list[str]) -> None:
    journal = call_journal()
    if journal is not None:
        journal.forget(call_ids)


def call_journal() -> Optional[CallJournalFile]:
    global _journal_file
    with _journal_lock:
        if _journal_file is None:
            try:
                _journal_file = CallJournalFile(journal_path())
            except sqlite3.Error as error:  # a read-only directory: run without the journal, say so
                logger.error("agent call journal %s unavailable: %s", journal_path(), error)
                return None
        return _journal_file
