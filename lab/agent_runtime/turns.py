"""Agent turns in the database: started as soon as their inputs exist, settled by the pages.

Owns the ``AgentTurn`` rows and their life: a turn is written (``running``, with its deadline)
in the transaction that makes its inputs exist and handed to the engine (``ensure_turn``, and
every agent's first turn of a round at once in ``start_round``); a page settles it from the
engine's answer, or by the agent's fallback when its time is up (``settle_or_fallback``), putting
its calls on record (``LlmCall``) and its new memory on the seat; ``finish_round`` settles the
round's payoffs. The agent's memory changes only when a turn is settled, so a reload finds the
running turn, and a turn whose result a restart lost is redone or resolved by the fallback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import time
from types import SimpleNamespace
from typing import Optional

from agents.agent import PENDING, CallJournal, PersonaAgent
from agents.types import CallRecord, CallStatus, ModelReply, TurnKind, TurnResult, TurnStatus
from lab.shared_pages import game as lab_game
from lab.agent_runtime.engine import ENGINE
from lab.agent_runtime.journal import ABANDONED, CallJournalFile, call_journal, forget_when_committed
from lab.agent_runtime.page_bursts import yield_to_page_bursts
from lab.agent_runtime.seats import _load_seats, _request_memo, _seat, _session_model_of, model_config
from lab.base.session_game import frozen_experiment
from lab.agent_runtime.tables import GameTables
from lab.base.session_settings import params, params_of, session_code_of

# A stage the seat's own participant played before an online stand-in took the seat over
# (lab/online/stand_in.py): settled, with no model call.
SEAT_PLAYED = "seat"
FINAL_STATUSES = {TurnStatus.OK.value, TurnStatus.REASKED.value, TurnStatus.FALLBACK.value, SEAT_PLAYED}
RUNNING = "running"
TURN_STAGE = {TurnKind.MESSAGE_1.value: "message_1", TurnKind.MESSAGE_2.value: "message_2",
              TurnKind.DECISION.value: "decision"}


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


def remember_turns_of_session(tables: GameTables, session_id: int) -> None:
    """Every turn against the session's players of this game, read in one query into the memo
    ``find_turn`` reads (an export asks for every player's: one query each was most of its time)."""
    from otree.database import db

    memo = _request_memo()
    found: dict = {player_id: {} for (player_id,) in db.query(tables.Player.id).filter(
        tables.Player.session_id == session_id)}
    for row in db.query(tables.AgentTurn).join(tables.Player, tables.AgentTurn.player_id == tables.Player.id).filter(
            tables.Player.session_id == session_id).order_by(tables.AgentTurn.id):
        found[row.player_id].setdefault(row.kind, row)  # the first of a kind, by id
    for player_id, turns in found.items():
        for turn_kind in TURN_STAGE:
            memo.setdefault(("turn", tables.game, player_id, turn_kind), turns.get(turn_kind))


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
    # The decision follows the last exchange: message 2, or message 1 where one exchange is the chat.
    stage = 1 if kind == TurnKind.MESSAGE_2.value else lab_game.chat_exchanges(player, tables.game)
    previous = f"message_{stage}"
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


def _turn_coroutine(player, tables: GameTables, row, turn_inputs: dict, model, deadline: float,
                    after_page_burst: bool = False):
    """The turn as a coroutine on a copy of the settled memory: (TurnResult, new memory as JSON).
    ``after_page_burst``: a round's first turn, which lets the round start's page loads go first."""
    seat_state = _seat(player, tables).state  # parsed on the engine's thread, not the page's
    experiment = frozen_experiment(player.session)  # read here: the engine's thread has no database
    kind, round_number = row.kind, player.round_number
    sends = not isinstance(model, _NoTimeLeft)
    journal = call_journal() if sends else None
    context = (session_code_of(player), tables.game, player.id)
    key = turn_key(player, tables, kind)

    async def run_turn():
        if sends and after_page_burst:
            await yield_to_page_bursts(deadline)
        agent = PersonaAgent.from_state(json.loads(seat_state), model, experiment=experiment)
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

    async def complete(self, messages, *, deadline, options=None):
        return ModelReply(status=CallStatus.TIMEOUT.value, error="the stage limit passed before a reply", not_sent=True)


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


def start_round(subsession, tables: GameTables, players=None) -> None:
    """RoundStart: every agent's first turn of the round starts now (of ``players`` only when
    given: online, a participant's round starts when they arrive)."""
    first = TurnKind.MESSAGE_1.value if tables.with_chat else TurnKind.DECISION.value
    whole_round = players is None
    online = bool(subsession.session.config.get("online"))  # the lab reads no participant here
    players = [player for player in (subsession.get_players() if players is None else players)
               if lab_game.is_played(player) and player.associate_kind == "agent"
               and not (online and lab_game.seat_dropped(player.participant))]  # an online dropout's pages are skipped
    if not players:
        return
    # One request starts every agent's turn: read their turns and seats in two queries, not
    # three per participant (the wait page everyone reloads from waits for this request).
    memo = _request_memo()
    found = {row.player_id: row for row in tables.AgentTurn.objects_filter(
        tables.AgentTurn.player_id.in_([player.id for player in players]), kind=first)}
    for player in players:
        memo[("turn", tables.game, player.id, first)] = found.get(player.id)
    if whole_round:  # online, a group's one or two seats are read alone: not all 300 per arrival
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
    agent = PersonaAgent.from_state(json.loads(seat.state), model=None, experiment=frozen_experiment(player.session))
    agent.record_outcome(player.round_number, row.choice, player.choice)
    seat.state = json.dumps(agent.to_state(), ensure_ascii=False)
    seat.updated_at = time.time()
