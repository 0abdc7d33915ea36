"""Server start: what a killed server left is recovered before the first request.

Owns the recovery (``resume_at_startup``: calls journaled by the stopped server go on record,
those in flight as ``interrupted``; every turn still ``running`` is redone if its deadline has not
passed, else resolved by the fallback) and what runs on oTree's app start
(``before_server_start``, ``after_server_start``: lab/otree_patches/router_startup.py calls them):
the server's event loop handed to lab/server/channels.py, the recovery, and what the server has loaded
frozen out of Python's full garbage collections.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Optional

from agents.agent import PENDING
from agents.types import CallStatus
from lab.base import app_registry
from lab.server import channels
from lab.agent_runtime.journal import ABANDONED, call_journal, forget_when_committed
from lab.agent_runtime.seats import model_config
from lab.agent_runtime.turns import RUNNING, _store_call, ensure_turn

logger = logging.getLogger("lab.agents")


def recover_journaled_calls(tables_by_game: Optional[dict] = None) -> int:
    """Move calls journaled by a server that stopped into ``LlmCall``: those still in flight as
    ``interrupted`` with the cost of the prompt plus a full reply (an upper bound). Returns how
    many. Calls of sessions this database does not hold stay in the journal."""
    journal = call_journal()
    if journal is None:
        return 0
    tables_by_game = tables_by_game or app_registry.all_game_tables()
    moved = []
    for session_code, game, player_id, state, record in journal.orphans():
        tables = tables_by_game.get(game)
        if tables is None:
            continue
        player = tables.Player.objects_first(id=player_id)
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
    tables_by_game = app_registry.all_game_tables()
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


def before_server_start() -> None:
    """On oTree's app start, before anything else (lab/otree_patches/router_startup.py): the
    server's event loop is handed to lab/server/channels.py before any request is served."""
    channels.remember_server_loop(asyncio.get_running_loop())


async def after_server_start() -> None:
    """Once oTree's app has started, before the first request: the recovery, then the heap
    frozen."""
    await _resume_on_startup()
    freeze_heap()
