"""Agents in the lab: their turns run beside the humans' pages and never block the server.

Design (README, "Agents in the lab"):
- Turns run on a dedicated thread with its own asyncio loop (``AgentEngine``). oTree's event
  loop and its global lock never wait for a model; page hooks only *start* a turn (a
  thread-safe submit) and *settle* a finished one (a dictionary lookup and a few rows).
- The database is the source of truth. An ``AgentTurn`` row is written (status ``running``,
  its deadline) in the same transaction as the page submission that makes its inputs exist;
  the agent's memory (``AgentSeat.state``) changes only when a turn is settled. So a reload
  finds the running turn instead of starting another, and after a server restart (kill -9)
  a turn whose result was lost is redone from the last settled memory if time remains, or
  resolved by the fallback (no message / random choice, flagged) if not.
- A turn starts as soon as its inputs exist: message 1 at the round's start, message 2 once
  the human's message 1 is in (or timed out), the decision once both second messages are in.
  The agent has the human's stage limits; the human waits on ``AgentWait`` pages only while a
  turn is running and never past its deadline.
- At server start (``resume_at_startup``, before the first request) every turn still
  ``running`` is redone if its deadline has not passed (else resolved by the fallback), so a
  human who stays on a page after a kill -9 still gets the agent's answer.
- Every model call is journaled (``CallJournalFile``: a small SQLite file of its own, written
  from the agent thread) before it is sent and again when it returns; settling a turn moves its
  calls into ``LlmCall`` (the journal's rows go once that is committed). At start, calls
  journaled by a killed server are moved too, those still in flight as status ``interrupted``
  with an estimated cost, so cost and the budget count every call the provider may bill.
- A page that settles a turn by the fallback while it still runs (``settle_or_fallback``) puts
  its calls on record at once, those in flight as ``abandoned`` with the same estimate (prompt +
  ``max_tokens``), charged to the session's budget before the turn is cancelled: no call is sent
  on money already spent. One row per call: the engine writes nothing more for an abandoned call
  (a reply that still arrives has its real cost taken back from the budget), and the journal
  keeps it as ``abandoned`` so that a restart adds no second row.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import hashlib
import json
import logging
import os
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Optional

from agents.agent import PENDING, CallJournal, PersonaAgent
from agents.config import ModelConfig
from agents.models import Budget, build_model
from agents.types import CallRecord, CallStatus, ModelReply, TurnKind, TurnResult, TurnStatus
from lab import baked_lookups, channels
from lab import game as lab_game
from lab.session_settings import GAME_APPS, params, params_of, session_code_of

FINAL_STATUSES = {TurnStatus.OK.value, TurnStatus.REASKED.value, TurnStatus.FALLBACK.value}
RUNNING = "running"
# How long an AgentWait page lets the agent run past its deadline before settling anyway:
# the agent returns by its deadline; this covers the hop back to the page.
SETTLE_GRACE_SECONDS = 2.0
TURN_STAGE = {TurnKind.MESSAGE_1.value: "message_1", TurnKind.MESSAGE_2.value: "message_2",
              TurnKind.DECISION.value: "decision"}
AGENT_LANGUAGE = {"zh_hans": "zh", "en": "en"}
logger = logging.getLogger("lab.agents")


# --- The call journal: every call on disk before it is sent -------------------------------------
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


class _TurnJournal(CallJournal):
    """A turn's calls, journaled with the player they belong to, and known to the engine while
    the turn runs (so that a page settling the turn by the fallback can put them on record)."""

    def __init__(self, journal: Optional[CallJournalFile], context: tuple, key: str) -> None:
        self.journal = journal
        self.context = context
        self.key = key

    def started(self, record: CallRecord) -> None:
        ENGINE.call_started(self.key, record)
        if self.journal is not None:
            self.journal.write(self.context, record, PENDING)

    def finished(self, record: CallRecord) -> None:
        # An abandoned call is on record already (with its estimate): nothing more is written.
        if ENGINE.call_finished(self.key, self.context[0], record) and self.journal is not None:
            self.journal.write(self.context, record, "done")


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
        from otree.database import db

        _listen_to_commits()
        db._db.info.setdefault(_FORGET_WHEN_COMMITTED, []).extend(call_ids)


_FORGET_WHEN_COMMITTED = "lab_journal_calls_to_forget"
_listening_to_commits = False


def _forget_committed_calls(session) -> None:
    call_ids = session.info.pop(_FORGET_WHEN_COMMITTED, None)
    journal = call_journal() if call_ids else None
    if journal is not None:
        journal.forget(call_ids)


def _keep_calls_of_rolled_back(session) -> None:
    session.info.pop(_FORGET_WHEN_COMMITTED, None)


def _listen_to_commits() -> None:
    """Once per process, on oTree's sessions (imported here, not at module import: the module
    is also used where oTree's database is not set up)."""
    global _listening_to_commits
    if _listening_to_commits:  # every settle asks: no lock once they are in
        return
    with _journal_lock:
        if _listening_to_commits:
            return
        from otree.database import DBSession
        from sqlalchemy import event

        event.listen(DBSession, "after_commit", _forget_committed_calls)
        event.listen(DBSession, "after_rollback", _keep_calls_of_rolled_back)
        _listening_to_commits = True


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


# --- The engine: a thread with its own event loop ----------------------------------------------
# Python's GIL switch interval once the engine runs (see AgentEngine._ensure_loop); default 5 ms.
ENGINE_SWITCH_INTERVAL_SECONDS = 0.0005


class AgentEngine:
    """Runs agent turns off oTree's loop. Futures are keyed so that a turn is never started twice."""

    def __init__(self) -> None:
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._lock = threading.Lock()
        self._futures: dict[str, concurrent.futures.Future] = {}
        self._models: dict[str, Any] = {}
        self._budgets: dict[str, Budget] = {}
        # The calls of each running turn: turn key -> call_id -> [journal state, record dict].
        self._turn_calls: dict[str, dict[str, list]] = {}
        # Calls abandoned in flight (call_id -> the estimate charged), until they come back.
        self._abandoned: dict[str, float] = {}
        self._outcomes: dict[str, tuple] = {}  # turn key -> (TurnResult, memory), see publish

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                # With the engine's thread busy (72 replies arriving together), a page's thread,
                # which lets go of the GIL at every database call, waited up to Python's switch
                # interval (5 ms) to get it back each time. Measured in bench/lab_load.py, two
                # interleaved repetitions each: H-F page p95 0.54/0.51 s -> 0.41/0.44 s (instant
                # agents) and 0.59/0.35 -> 0.39/0.32 s (5 s agents), CPU 5-10 % lower. Only
                # once agents run: without them (H-H) it cost a few percent of CPU.
                sys.setswitchinterval(ENGINE_SWITCH_INTERVAL_SECONDS)
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="agent-engine", daemon=True).start()
                self._loop = loop
            return self._loop

    def submit(self, key: str, make_coroutine: Callable[[], Any]) -> concurrent.futures.Future:
        loop = self._ensure_loop()
        with self._lock:
            future = self._futures.get(key)
            if future is None:
                future = asyncio.run_coroutine_threadsafe(make_coroutine(), loop)
                self._futures[key] = future
            return future

    # The two reads below take no lock: a page asks them while it holds oTree's lock, and a lock
    # the engine thread holds hands the GIL over and waits for it back, up to Python's switch
    # interval (0.3 ms a call on average in a settling page's profile, issue 14). One dict read
    # is atomic in CPython; ``outcome`` tolerates the entry changing between its two reads.
    def future(self, key: str) -> Optional[concurrent.futures.Future]:
        return self._futures.get(key)

    def forget(self, key: str) -> None:
        with self._lock:
            self._futures.pop(key, None)
            self._turn_calls.pop(key, None)
            self._outcomes.pop(key, None)

    def publish(self, key: str, outcome: tuple) -> None:
        """On the engine thread, the moment a turn has its answer: pages see it at once, not
        when the event loop gets round to completing the turn's future (behind every other turn
        whose reply came in at the same moment, as at a round start)."""
        with self._lock:
            if key in self._futures:
                self._outcomes[key] = outcome

    def outcome(self, key: str) -> Optional[tuple]:
        """A running turn's (TurnResult, memory as JSON) once it has its answer, else None."""
        found = self._outcomes.get(key)
        if found is not None:
            return found
        future = self._futures.get(key)
        return future.result() if future is not None and future.done() else None

    # --- the calls of running turns (written on the engine thread, read by the pages) ----------
    def call_started(self, key: str, record: CallRecord) -> None:
        with self._lock:
            self._turn_calls.setdefault(key, {})[record.call_id] = [PENDING, record.to_dict()]

    def call_finished(self, key: str, session_code: str, record: CallRecord) -> bool:
        """On the engine thread, as a call returns. False if the call was abandoned meanwhile:
        its record (the estimate) stands, and what ``BudgetedModel`` charged for its reply is
        taken back, so that the budget counts it once, as its record does."""
        with self._lock:
            if record.call_id in self._abandoned:
                del self._abandoned[record.call_id]
                budget = self._budgets.get(session_code)
                if budget is not None and record.cost:
                    budget.charge(-record.cost)
                return False
            calls = self._turn_calls.get(key)
            if calls is not None:
                calls[record.call_id] = ["done", record.to_dict()]
            return True

    def abandon_calls(self, key: str, session_code: str,
                      estimate: Callable[[dict], Optional[float]]) -> list[tuple[str, dict, Optional[float]]]:
        """The page settles the turn by the fallback: its calls, (state, record, estimate). Each
        one still in flight is charged its estimate now (an upper bound: prompt + a full reply),
        before anything else can be sent, whether or not its reply ever comes back."""
        with self._lock:
            calls = self._turn_calls.pop(key, {})
            budget = self._budgets.get(session_code)
            taken = []
            for call_id, (state, record) in calls.items():
                cost = None
                if state == PENDING:
                    cost = estimate(record)
                    self._abandoned[call_id] = cost or 0.0
                    if budget is not None:
                        budget.charge(cost)
                taken.append((state, record, cost))
            return taken

    def model(self, session_code: str, config: ModelConfig, budget_limit: Optional[float],
              spent_so_far: Callable[[], float]):
        """One model (client, limits) and one budget per session, shared by all its agents."""
        with self._lock:
            if session_code not in self._models:
                budget = Budget(budget_limit)
                budget.charge(spent_so_far())  # after a restart: what the session already spent
                self._budgets[session_code] = budget
                self._models[session_code] = build_model(config, budget=budget, charge_unanswered=True)
                gc.freeze()  # the provider's SDK and client live as long as the server (see freeze_heap)
            return self._models[session_code]

    def session_model(self, session_code: str):
        """The session's model once built, else None (no config parsed on every turn)."""
        with self._lock:
            return self._models.get(session_code)

    def budget(self, session_code: str) -> Optional[Budget]:
        with self._lock:
            return self._budgets.get(session_code)


ENGINE = AgentEngine()


# --- What an app hands in ------------------------------------------------------------------------
@dataclass(frozen=True)
class GameTables:
    """A game app's name and its agent-related models."""

    game: str
    Message: Any  # None in the game without chat
    AgentSeat: Any
    AgentTurn: Any
    LlmCall: Any

    @property
    def with_chat(self) -> bool:
        return self.Message is not None


# --- Session set-up --------------------------------------------------------------------------------
def model_config(session) -> ModelConfig:
    return ModelConfig.from_session_config(session.config)


def budget_limit(session) -> Optional[float]:
    value = session.config.get("session_budget")
    return float(value) if value not in (None, "", 0) else None


def create_seats(subsession, tables: GameTables) -> None:
    """creating_session, round 1: one agent per seat, fresh memory for this game."""
    p = params(subsession.session)
    _session_model(subsession.session)  # builds the client now, not in a participant's request
    from lab.matching import agent_count

    language = AGENT_LANGUAGE[p.language]
    for seat in range(agent_count(len(subsession.get_players()), p.rounds_per_game)):
        agent_id = lab_game.agent_id(seat)
        agent = PersonaAgent(agent_id, p.associate_type, model=None, language=language,
                             with_communication=tables.with_chat, seed=_agent_seed(subsession.session.code, tables.game, seat),
                             memory=model_config(subsession.session).memory, message_max_chars=p.message_max_chars)
        tables.AgentSeat.create(subsession=subsession, seat=seat, agent_id=agent_id, persona=p.associate_type,
                                state=json.dumps(agent.to_state()), updated_at=time.time())


def _agent_seed(session_code: str, game: str, seat: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{session_code}|{game}|{seat}".encode()).digest()[:4], "big")


def _request_memo() -> dict:
    """Rows already read in this request: its database session's ``info`` (oTree opens a new
    session per request, so nothing outlives the request). Every page hook runs under oTree's
    global lock and only they write turns and seats, so a row read once stays current for the
    request: a turn created here is noted here too. Outside a request, an empty memo."""
    from otree.database import db

    session = db._db
    return session.info.setdefault("lab_agents", {}) if session is not None else {}


def _seat(player, tables: GameTables):
    """The player's agent seat, read alone: a seat holds its agent's whole memory, and reading
    all 72 to use one was about two fifths of what H-F's settling posts cost over H-H's pages
    (issue 14's profile)."""
    memo = _request_memo()
    key = ("seat", tables.game, player.session_id, player.agent_seat)
    if key not in memo:
        from otree.database import db

        memo[key] = baked_lookups.cached_all(db._db, tables.AgentSeat, dict(
            subsession_id=_first_subsession_id(player), seat=player.agent_seat))[0]
    return memo[key]


# (session code, game app) -> the id of the game's round-1 subsession, where the seats hang.
_FIRST_SUBSESSION_IDS: dict[tuple, int] = {}


def _first_subsession_id(player) -> int:
    """The id of the round-1 subsession of the player's game, without loading the player's own
    subsession row (a settling page needs nothing else of it); it never changes."""
    key = (session_code_of(player), type(player).__module__)
    if key not in _FIRST_SUBSESSION_IDS:
        if player.round_number == 1:
            _FIRST_SUBSESSION_IDS[key] = player.subsession_id
        else:
            _FIRST_SUBSESSION_IDS[key] = _first_subsession(player.subsession).id
    return _FIRST_SUBSESSION_IDS[key]


def _first_subsession(subsession):
    """The game's round-1 subsession, where the seats hang (one lookup per request)."""
    if subsession.round_number == 1:
        return subsession
    memo = _request_memo()
    key = ("first subsession", subsession.session_id, type(subsession).__module__)
    if key not in memo:
        memo[key] = type(subsession).objects_get(session_id=subsession.session_id, round_number=1)
    return memo[key]


def _load_seats(memo: dict, tables: GameTables, subsession, session_id: int) -> None:
    """All seats of the game in one query (they are few: one per agent)."""
    for seat in tables.AgentSeat.filter(subsession=_first_subsession(subsession)):
        memo[("seat", tables.game, session_id, seat.seat)] = seat


def _session_model(session):
    found = ENGINE.session_model(session.code)
    if found is not None:
        return found
    return ENGINE.model(session.code, model_config(session), budget_limit(session), lambda: session_spent(session))


def _session_model_of(player):
    """The model of the player's session, by the session's code: once the model is built, the
    session row (its config and vars) is not loaded for it."""
    found = ENGINE.session_model(session_code_of(player))
    return found if found is not None else _session_model(player.session)


def session_spent(session) -> float:
    """Money spent on model calls by this session, from the call records (both games)."""
    from otree.common import get_models_module

    total = 0.0
    for app in GAME_APPS.values():
        LlmCall = get_models_module(app).LlmCall
        total += sum(call.cost or 0.0 for call in LlmCall.objects_filter(session_code=session.code))
    return total


# --- Turns -----------------------------------------------------------------------------------------
def turn_key(player, tables: GameTables, kind: str) -> str:
    return f"{session_code_of(player)}|{tables.game}|{player.agent_seat}|r{player.round_number}|{kind}"


def find_turn(player, tables: GameTables, kind: str):
    """The agent's ``kind`` turn against ``player``, or None. A settling page asks for two or
    three kinds of the same player, so the player's turns (three at most) are read together."""
    memo = _request_memo()
    key = ("turn", tables.game, player.id, kind)
    if key not in memo:
        found: dict = {}
        for row in tables.AgentTurn.filter(player=player):
            found.setdefault(row.kind, row)  # the first of a kind, by id
        for turn_kind in TURN_STAGE:  # a turn created in this request is in the memo already
            memo.setdefault(("turn", tables.game, player.id, turn_kind), found.get(turn_kind))
        memo[key] = found.get(kind)
    return memo[key]


def _new_turn(player, tables: GameTables, kind: str, **fields):
    row = tables.AgentTurn.create(player=player, agent_id=player.associate_code, kind=kind, status=RUNNING,
                                  attempts=1, **fields)
    _request_memo()[("turn", tables.game, player.id, kind)] = row
    return row


def human_message(player, tables: GameTables, stage: int):
    """The human's Message row of ``stage`` (sent or not), or None while not submitted."""
    rows = tables.Message.filter(player=player, stage=stage, sender_kind="human")
    return rows[0] if rows else None


def inputs(player, tables: GameTables, kind: str) -> Optional[dict]:
    """The turn's inputs if they all exist yet, else None."""
    if kind == TurnKind.MESSAGE_1.value or not tables.with_chat:
        return {}
    previous = TurnKind.MESSAGE_1.value if kind == TurnKind.MESSAGE_2.value else TurnKind.MESSAGE_2.value
    stage = 1 if kind == TurnKind.MESSAGE_2.value else 2
    earlier_turn = find_turn(player, tables, previous)
    message = human_message(player, tables, stage)
    if earlier_turn is None or earlier_turn.status not in FINAL_STATUSES or message is None:
        return None
    text = message.text if message.sent_in_time else None
    return {"associate_message_1": text} if stage == 1 else {"associate_message_2": text}


def ensure_turn(player, tables: GameTables, kind: str):
    """Start, resume, redo or settle the agent's ``kind`` turn against ``player``; idempotent.

    Returns the AgentTurn row (None while the turn's inputs don't exist yet).
    """
    row = find_turn(player, tables, kind)
    if row is not None and row.status in FINAL_STATUSES:
        return row
    if row is None:
        turn_inputs = inputs(player, tables, kind)
        if turn_inputs is None:
            return None
        now = time.time()
        limit = params_of(player).stage_limits[TURN_STAGE[kind]]
        row = _new_turn(player, tables, kind, started_at=now, deadline_at=now + limit)
        _submit(player, tables, row, turn_inputs)
        return row
    future = ENGINE.future(turn_key(player, tables, kind))
    if future is None:
        # The server restarted while the turn ran: redo it from the settled memory if time
        # remains, else resolve it now by the fallback.
        row.attempts = (row.attempts or 1) + 1
        if row.deadline_at > time.time():
            _submit(player, tables, row, inputs(player, tables, kind) or {})
        else:
            _settle_by_fallback(player, tables, row)
    else:
        outcome = ENGINE.outcome(turn_key(player, tables, kind))
        if outcome is not None:
            settle(player, tables, row, outcome)
    return row


def _turn_coroutine(player, tables: GameTables, row, turn_inputs: dict, model, deadline: float,
                    after_page_burst: bool = False):
    """The turn as a coroutine on a copy of the settled memory: (TurnResult, new memory as JSON).
    ``after_page_burst``: a round's first turn, which lets the round start's page loads go first."""
    seat_state = _seat(player, tables).state  # parsed on the engine's thread, not the page's
    kind, round_number = row.kind, player.round_number
    sends = not isinstance(model, _NoTimeLeft)
    journal = call_journal() if sends else None
    context = (session_code_of(player), tables.game, player.id)
    key = turn_key(player, tables, kind)

    async def run_turn():
        if sends and after_page_burst:
            await yield_to_page_bursts(deadline)
        agent = PersonaAgent.from_state(json.loads(seat_state), model)
        if sends:
            agent.journal = _TurnJournal(journal, context, key)
        if kind == TurnKind.MESSAGE_1.value:
            result = await agent.message_1(round_number, deadline=deadline)
        elif kind == TurnKind.MESSAGE_2.value:
            result = await agent.message_2(round_number, deadline=deadline, **turn_inputs)
        else:
            result = await agent.decide(round_number, deadline=deadline, **turn_inputs)
        # The new memory as the seat stores it, serialised here rather than in the settling page.
        outcome = result, json.dumps(agent.to_state(), ensure_ascii=False)
        if sends:
            ENGINE.publish(key, outcome)
        return outcome

    return run_turn


# At a round start the request that completes the round's wait page starts every agent's turn,
# and every other participant's page reloads at that moment. The turns' prompts, token counts and
# SDK calls run in this process, so they would take the GIL from those pages: the round's first
# turns wait until page requests have left oTree's lock alone for PAGE_BURST_QUIET_SECONDS, at
# most PAGE_BURST_MAX_DEFER_SECONDS or a twentieth of their time (a human writes for many
# seconds, and nothing a participant sees waits for these turns yet).
PAGE_BURST_MAX_DEFER_SECONDS = 2.0
PAGE_BURST_POLL_SECONDS = 0.02
# The quiet spell covers the moment between the wait page's push and the browsers' reloads.
PAGE_BURST_QUIET_SECONDS = 0.2


_turn_waiters = 0  # page requests (oTree's bots) that hold oTree's lock to wait for a turn
_turn_waiters_lock = threading.Lock()


def pages_busy() -> bool:
    """A page request holds oTree's global lock or waits for it, other than one holding it to
    wait for an agent (then the agents go first). Read from the engine's thread: a glance at the
    lock, never a wait on it."""
    from otree.middleware import lock2

    if _turn_waiters:
        return False
    return lock2.locked() or bool(getattr(lock2, "_waiters", None))


class _PageBurstGate:
    """One poller per event loop, however many turns wait on it (a round start holds dozens)."""

    def __init__(self) -> None:
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.served: Optional[asyncio.Event] = None
        self.poller: Optional[asyncio.Future] = None

    async def wait(self, bound: float) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is not loop:  # a new engine loop (or a test's): start afresh
            self.loop, self.poller = loop, None
        if self.poller is None or self.poller.done():
            self.served = asyncio.Event()
            self.poller = asyncio.ensure_future(self._poll(self.served))
        try:
            await asyncio.wait_for(asyncio.shield(self.served.wait()), timeout=bound)
        except asyncio.TimeoutError:
            pass

    @staticmethod
    async def _poll(served: asyncio.Event) -> None:
        quiet_since = None
        while True:
            now = time.monotonic()
            if pages_busy():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= PAGE_BURST_QUIET_SECONDS:
                break
            await asyncio.sleep(PAGE_BURST_POLL_SECONDS)
        served.set()


_PAGE_BURST_GATE = _PageBurstGate()


async def yield_to_page_bursts(deadline: float) -> float:
    """Wait until page requests have left oTree's lock alone for a moment (bounded, see
    PAGE_BURST_MAX_DEFER_SECONDS); the seconds waited."""
    started = time.monotonic()
    until = started + min(PAGE_BURST_MAX_DEFER_SECONDS, max(0.0, deadline - started) / 20)
    while pages_busy() and time.monotonic() < until:
        await _PAGE_BURST_GATE.wait(until - time.monotonic())
    return time.monotonic() - started


def engine_lag_seconds() -> float:
    """``LAB_AGENT_ENGINE_LAG_SECONDS`` (tests only, default 0): the engine runs each turn as if
    it were this far behind its deadline (a blocked or overloaded engine thread), so that pages
    settle turns by the fallback while their model calls are still in flight."""
    try:
        return max(0.0, float(os.environ.get("LAB_AGENT_ENGINE_LAG_SECONDS") or 0))
    except ValueError:
        return 0.0


def _submit(player, tables: GameTables, row, turn_inputs: dict, after_page_burst: bool = False) -> None:
    model = _session_model_of(player)
    deadline = time.monotonic() + (row.deadline_at - time.time()) + engine_lag_seconds()
    ENGINE.submit(turn_key(player, tables, row.kind),
                  _turn_coroutine(player, tables, row, turn_inputs, model, deadline, after_page_burst))


class _NoTimeLeft:
    """A model for a turn whose limit has passed: answers 'timeout' at once, sends nothing."""

    def __init__(self, settings) -> None:
        self.settings = settings

    async def complete(self, messages, *, deadline):
        return ModelReply(status=CallStatus.TIMEOUT.value, error="the stage limit passed before a reply")


def _settle_by_fallback(player, tables: GameTables, row) -> None:
    """Resolve a turn now, as a late human's: the agent records its fallback in its memory."""
    ENGINE.forget(turn_key(player, tables, row.kind))
    model = _NoTimeLeft(_session_model_of(player).settings)
    run_turn = _turn_coroutine(player, tables, row, inputs(player, tables, row.kind) or {}, model, time.monotonic())
    # Runs in this hook's thread; nothing is sent, so it returns at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        outcome = pool.submit(lambda: asyncio.run(run_turn())).result()
    settle(player, tables, row, outcome)


def settle(player, tables: GameTables, row, outcome: tuple) -> None:
    """Write a finished turn: its row, its calls, the agent's memory, its message or choice."""
    result: TurnResult
    result, new_state_json = outcome
    ENGINE.forget(turn_key(player, tables, row.kind))
    row.status = result.status
    row.text = result.text
    row.choice = result.choice
    row.fallback_reason = result.fallback_reason
    row.finished_at = result.finished_at
    for call in result.calls:
        _store_call(player, tables, call.to_dict())
    forget_when_committed([call.call_id for call in result.calls])
    seat = _seat(player, tables)
    seat.state = new_state_json
    seat.updated_at = time.time()
    if row.kind in (TurnKind.MESSAGE_1.value, TurnKind.MESSAGE_2.value):
        sent = result.text is not None
        tables.Message.create(
            player=player, stage=1 if row.kind == TurnKind.MESSAGE_1.value else 2,
            sender_code=row.agent_id, sender_kind="agent", receiver_code=player.participant.code,
            receiver_kind="human", text=result.text or "", sent_in_time=sent, stage_started_at=row.started_at,
            sent_at=result.finished_at if sent else None, unsent_draft=None,
        )


def _store_call(player, tables: GameTables, record: dict) -> None:
    record = dict(record)
    record["parameters"] = json.dumps(record["parameters"], ensure_ascii=False)
    record["messages"] = json.dumps(record["messages"], ensure_ascii=False)
    tables.LlmCall.create(player=player, session_code=session_code_of(player), **record)


# --- Server start --------------------------------------------------------------------------------
def game_tables() -> dict[str, GameTables]:
    from otree.common import get_models_module

    return {game: get_models_module(app).TABLES for game, app in GAME_APPS.items()}


def recover_journaled_calls(tables_by_game: Optional[dict] = None) -> int:
    """Move calls journaled by a server that stopped into ``LlmCall``: those still in flight as
    ``interrupted`` with the cost of the prompt plus a full reply (an upper bound). Returns how
    many. Calls of sessions this database does not hold stay in the journal."""
    journal = call_journal()
    if journal is None:
        return 0
    tables_by_game = tables_by_game or game_tables()
    from otree.common import get_models_module

    moved = []
    for session_code, game, player_id, state, record in journal.orphans():
        tables = tables_by_game.get(game)
        if tables is None:
            continue
        Player = get_models_module(GAME_APPS[game]).Player
        player = Player.objects_first(id=player_id)
        if player is None or player.session.code != session_code:
            continue
        if tables.LlmCall.objects_first(call_id=record["call_id"]) is None:
            if state == PENDING:
                config = model_config(player.session)
                record["status"] = CallStatus.INTERRUPTED.value
                record["error"] = "the server stopped while the call was in flight; cost estimated"
                record["cost"] = config.cost(record.get("prompt_tokens") or 0, config.max_tokens)
                record["input_tokens"] = record.get("prompt_tokens")
            if state != ABANDONED:  # abandoned: on record with its estimate, its commit lost
                record["flags"] = ",".join(filter(None, [record.get("flags"), "interrupted"]))
            _store_call(player, tables, record)
        moved.append(record["call_id"])
    forget_when_committed(moved)
    return len(moved)


def resume_at_startup() -> dict:
    """Before the first request: recover journaled calls, then redo every running turn whose
    deadline has not passed (resolve the others by the fallback). Needs a database session."""
    tables_by_game = game_tables()
    recovered = recover_journaled_calls(tables_by_game)
    resumed = resolved = 0
    for tables in tables_by_game.values():
        for row in tables.AgentTurn.objects_filter(status=RUNNING):
            in_time = row.deadline_at > time.time()
            ensure_turn(row.player, tables, row.kind)
            resumed += in_time
            resolved += not in_time
    if recovered or resumed or resolved:
        logger.warning("agents at server start: %s journaled call(s) recovered, %s running turn(s) resumed, "
                       "%s resolved by the fallback", recovered, resumed, resolved)
    return dict(recovered=recovered, resumed=resumed, resolved=resolved)


async def _resume_on_startup() -> None:
    from otree.database import session_scope
    from otree.middleware import lock2

    async with lock2:  # the lock every page request takes: no page runs meanwhile
        try:
            with session_scope():
                resume_at_startup()
        except Exception:  # a damaged row must not stop the server; the pages still settle turns
            logger.exception("resuming agent turns at server start failed")


def freeze_heap() -> None:
    """Leave what the server has loaded (oTree, its apps, SQLAlchemy's mappers; later a session's
    model SDK) out of Python's full garbage collections. They run while a page is served, and
    their pause grows with everything alive: measured in the bench, up to 0.1 s with an SDK
    loaded (H-F) and 0.04 s without, every few seconds at a round start's allocation rate.
    Objects frozen stay alive, which these do anyway."""
    gc.collect()
    gc.freeze()


def install_startup_hook() -> None:
    """Run ``_resume_on_startup`` when oTree's app starts (its Starlette app has no hook of its own
    that apps can reach at import, so the router's startup is wrapped once)."""
    from starlette.routing import Router

    if getattr(Router.startup, "_lab_agents", False):
        return
    original = Router.startup

    async def startup(self):
        channels.remember_server_loop(asyncio.get_running_loop())  # before any request is served
        await original(self)
        import sys

        asgi = sys.modules.get("otree.asgi")
        if asgi is not None and getattr(asgi, "app", None) is not None and self is asgi.app.router:
            from lab.agent_pages import install_test_model_route

            install_test_model_route(self)
            await _resume_on_startup()
            freeze_heap()

    startup._lab_agents = True
    Router.startup = startup


install_startup_hook()


def settle_or_fallback(player, tables: GameTables, kind: str):
    """At the page's limit: the turn is settled now, by the agent's fallback if it is still
    running. Never waits: this runs under oTree's global lock."""
    row = ensure_turn(player, tables, kind)
    if row is None:
        # Inputs never arrived (cannot happen in page order); resolve with what exists.
        turn_limit = params_of(player).stage_limits[TURN_STAGE[kind]]
        now = time.time()
        row = _new_turn(player, tables, kind, started_at=now, deadline_at=now + turn_limit)
    if row.status in FINAL_STATUSES:
        return row
    key = turn_key(player, tables, kind)
    future = ENGINE.future(key)
    outcome = ENGINE.outcome(key)  # None without a future too
    if outcome is not None:
        settle(player, tables, row, outcome)
    else:
        if future is not None:
            _abandon_calls(player, tables, row)  # before the cancel: nothing in flight goes unbilled
            future.cancel()
        _settle_by_fallback(player, tables, row)
    return row


def _abandon_calls(player, tables: GameTables, row) -> None:
    """The turn is settled by the fallback while it still runs: its calls go on record now,
    those in flight as ``abandoned`` with the cost of the prompt plus a full reply (an upper
    bound, as for ``interrupted``), charged to the session's budget at once. One row per call:
    the engine writes nothing more for them, and a restart finds them on record."""
    config = model_config(player.session)

    def estimate(record: dict) -> Optional[float]:
        return config.cost(record.get("prompt_tokens") or 0, config.max_tokens)

    taken = ENGINE.abandon_calls(turn_key(player, tables, row.kind), player.session.code, estimate)
    journal = call_journal()
    context = (player.session.code, tables.game, player.id)
    done = []
    for state, record, cost in taken:
        if tables.LlmCall.objects_first(call_id=record["call_id"]) is not None:
            continue
        if state == PENDING:
            record = mark_abandoned(record, cost)
            if journal is not None:  # until the next start: a lost commit is still recovered, once
                journal.write(context, CallRecord.from_dict(record), ABANDONED)
        else:
            done.append(record["call_id"])
        _store_call(player, tables, record)
    forget_when_committed(done)


def mark_abandoned(record: dict, cost: Optional[float]) -> dict:
    record = dict(record)
    record.update(status=CallStatus.ABANDONED.value, cost=cost, input_tokens=record.get("prompt_tokens"),
                  time_done=time.time(),
                  error="the turn was settled by the fallback while the call was in flight; "
                        "cost estimated (prompt + max_tokens)")
    record["flags"] = ",".join(filter(None, [record.get("flags"), "abandoned"]))
    return record


# Rows of one multi-row INSERT (7 values each: well under SQLite's 999 parameters).
INSERT_ROWS_PER_STATEMENT = 100


def start_round(subsession, tables: GameTables) -> None:
    """RoundStart: every agent's first turn of the round starts now."""
    first = TurnKind.MESSAGE_1.value if tables.with_chat else TurnKind.DECISION.value
    players = [player for player in subsession.get_players()
               if lab_game.is_played(player) and player.associate_kind == "agent"]
    if not players:
        return
    # One request starts every agent's turn: read their turns and seats in two queries, not
    # three per participant (the wait page everyone reloads from waits for this request).
    memo = _request_memo()
    found = {row.player_id: row for row in tables.AgentTurn.objects_filter(
        tables.AgentTurn.player_id.in_([player.id for player in players]), kind=first)}
    for player in players:
        memo[("turn", tables.game, player.id, first)] = found.get(player.id)
    _load_seats(memo, tables, subsession, subsession.session_id)
    new = [player for player in players if found.get(player.id) is None]
    for player in players:
        if found.get(player.id) is not None:
            ensure_turn(player, tables, first)  # a reload after a restart: resumed or settled
    if not new:
        return
    # The new turns in one INSERT per 100 (the first turn's inputs always exist: none), then each
    # is handed to the engine. The same rows in the same transaction as ensure_turn writes.
    from otree.database import db

    now = time.time()
    deadline = now + params(subsession.session).stage_limits[TURN_STAGE[first]]
    rows = [dict(player_id=player.id, agent_id=player.associate_code, kind=first, status=RUNNING,
                 started_at=now, deadline_at=deadline, attempts=1) for player in new]
    for chunk in range(0, len(rows), INSERT_ROWS_PER_STATEMENT):  # one round trip per chunk
        db._db.execute(tables.AgentTurn.__table__.insert().values(rows[chunk:chunk + INSERT_ROWS_PER_STATEMENT]))
    for player in new:
        del memo[("turn", tables.game, player.id, first)]  # read from the database when asked
        _submit(player, tables, SimpleNamespace(kind=first, deadline_at=deadline), {}, after_page_burst=True)


def finish_round(player, tables: GameTables) -> None:
    """After the human's decision: the agent's choice, both payoffs, the agent's memory of them."""
    row = settle_or_fallback(player, tables, TurnKind.DECISION.value)
    if player.field_maybe_none("associate_choice") is not None:
        return
    lab_game.settle_round(player, row.choice)
    seat = _seat(player, tables)
    agent = PersonaAgent.from_state(json.loads(seat.state), model=None)
    agent.record_outcome(player.round_number, row.choice, player.choice)
    seat.state = json.dumps(agent.to_state(), ensure_ascii=False)
    seat.updated_at = time.time()


def wait_timeout_seconds(player, tables: GameTables, kind: str) -> float:
    """An AgentWait page's limit: the turn's deadline (fixed at first render) plus the grace."""
    row = ensure_turn(player, tables, kind)
    limit = params_of(player).stage_limits[TURN_STAGE[kind]]
    remaining = (row.deadline_at - time.time()) if row else limit
    return max(1.0, remaining + SETTLE_GRACE_SECONDS)


def is_running(player, tables: GameTables, kind: str) -> bool:
    row = ensure_turn(player, tables, kind)
    return row is None or row.status == RUNNING


def settle_if_finished(player, tables: GameTables, kind: str) -> bool:
    """True when the turn is settled (now, if its answer has just come in): the participant
    goes on without seeing a wait page. Idempotent."""
    row = ensure_turn(player, tables, kind)
    return row is not None and row.status in FINAL_STATUSES


def turn_deadline(player, tables: GameTables, kind: str) -> float:
    """Epoch seconds by which the turn ends (the agent's stage limit)."""
    row = ensure_turn(player, tables, kind)
    if row is None:
        return time.time() + params_of(player).stage_limits[TURN_STAGE[kind]]
    return row.deadline_at


def wait_is_over(player, tables: GameTables, kind: str) -> bool:
    """The turn's deadline and the grace have passed: settle it now, by the fallback if need be."""
    return time.time() > turn_deadline(player, tables, kind) + SETTLE_GRACE_SECONDS


def wait_for_turn(player, tables: GameTables, kind: str, timeout: float) -> None:
    """Block until the running turn's answer is in (oTree's bots only: their runner gives up
    after ten passes over wait pages without progress)."""
    global _turn_waiters
    future = ENGINE.future(turn_key(player, tables, kind))
    if future is not None:
        with _turn_waiters_lock:
            _turn_waiters += 1
        try:
            future.result(timeout=max(0.0, timeout))
        except Exception:  # a timeout or a failed turn: settled by the fallback
            pass
        finally:
            with _turn_waiters_lock:
                _turn_waiters -= 1


# --- Telling a waiting page that the turn is over --------------------------------------------------
class WaitNotifier:
    """When a turn ends, pushes {'status': 'ready'} to the websocket group of the page the
    human waits on: oTree's own wait-page channel, so the page behaves as an H-H wait page (it
    reloads, and that request settles the turn under oTree's lock). Nothing is written here;
    the push only wakes the page.

    The turn ends on the agent engine's thread and the push is handed to the server's event loop
    (``call_soon_threadsafe``; lab/channels.py knows it from the app's start), and a page whose
    socket joins after its turn has ended gets the push as it joins.
    """

    READY = {"status": "ready"}

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, float] = {}  # channel -> until when a joining socket is told
        self._installed = False

    def install(self) -> None:
        """Hook oTree's in-process channel layer (in the server process only)."""
        from otree.channels.utils import channel_layer

        if self._installed:
            return
        original_add = channel_layer.add

        def add(group, websocket):
            original_add(group, websocket)  # on the server's loop
            with self._lock:
                ready = self._ready.get(group, 0) > time.time()
            if ready:
                asyncio.ensure_future(channel_layer.send(group, self.READY))

        channel_layer.add = add
        self._installed = True

    def watch(self, player, tables: GameTables, kind: str, channel: str, until: float) -> bool:
        """Push to ``channel`` when the turn ends; False if there is nothing to watch."""
        self.install()
        future = ENGINE.future(turn_key(player, tables, kind))
        if future is None:
            return False
        future.add_done_callback(lambda _: self._turn_ended(channel, until))
        return True

    def _turn_ended(self, channel: str, until: float) -> None:
        """On the engine's thread."""
        now = time.time()
        with self._lock:
            for stale in [c for c, t in self._ready.items() if t < now]:
                del self._ready[stale]
            self._ready[channel] = until
        loop = channels.server_loop()
        if loop is not None:
            loop.call_soon_threadsafe(self._push, channel)

    def _push(self, channel: str) -> None:
        from otree.channels.utils import channel_layer

        if channel_layer._subs.get(channel):  # sockets on the page now; later ones are told as they join
            asyncio.ensure_future(channel_layer.send(channel, self.READY))


NOTIFIER = WaitNotifier()
