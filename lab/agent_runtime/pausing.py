"""A session resumed after a pause (lab/server/pause.py): its agents' running turns get their time back.

A turn's deadline is kept twice: ``AgentTurn.deadline_at`` (epoch, what pages and the recovery at
start read) and the monotonic deadline its coroutine runs against on the engine, which bounds its
model calls and cannot be moved once the turn runs. On resume each running turn's
``deadline_at`` moves later by the pause's length (a turn started during the pause: by the time
since it started), and then:
- an answer that came in during the pause is kept (the page settles it as usual);
- a turn whose model call its old deadline cut off during the pause (a fallback not yet settled),
  or that is still in flight and would be cut off at its old deadline, is redone from the agent's
  settled memory with the time its new deadline leaves, as a turn redone after a restart; its
  calls so far go on record now (those in flight as ``abandoned``, charged their estimate), so
  every call the provider may bill is counted once.
The session's model forgets its calls cut off unanswered before the resume: the experimenter may
have paused to restart or replace its server, and the scheduler, which sends no call its recent
cut-off calls say cannot finish in time, would otherwise send none for minutes (the redone turns
included).
"""

from __future__ import annotations

from agents.types import TurnStatus
from lab.base import app_registry
from lab.agent_runtime.engine import ENGINE
from lab.agent_runtime.turns import RUNNING, _abandon_calls, _submit, inputs, turn_key
from lab.base.session_settings import GAME_APPS


def postpone_running_turns(session, paused_at: float, now: float) -> dict:
    """Move the session's running turns' deadlines and redo those the pause cut off (see the
    module's docstring). Runs in the resuming request, under oTree's lock. Returns counts."""
    from otree.database import dbq

    counts = dict(turns_postponed=0, turns_redone=0)
    ENGINE.forget_cut_off_calls(session.code)
    apps = set(session.config.get("app_sequence") or ())
    for game, app in GAME_APPS.items():
        if app not in apps:
            continue
        tables = app_registry.game_tables(game)
        Player, Turn = tables.Player, tables.AgentTurn
        running = (dbq(Turn).join(Player, Turn.player_id == Player.id)
                   .filter(Player.session_id == session.id, Turn.status == RUNNING).order_by(Turn.id).all())
        for row in running:
            row.deadline_at += now - max(paused_at, row.started_at or paused_at)
            counts["turns_postponed"] += 1
            player = row.player
            key = turn_key(player, tables, row.kind)
            future = ENGINE.future(key)
            if future is None:
                continue  # nothing in flight (a restart): the next page redoes it, its time now moved
            outcome = ENGINE.outcome(key)
            if outcome is not None and outcome[0].status != TurnStatus.FALLBACK.value:
                continue  # answered during the pause
            _abandon_calls(player, tables, row)  # before the cancel: nothing in flight goes unbilled
            future.cancel()
            ENGINE.forget(key)
            row.attempts = (row.attempts or 1) + 1
            _submit(player, tables, row, inputs(player, tables, row.kind) or {})
            counts["turns_redone"] += 1
    return counts
