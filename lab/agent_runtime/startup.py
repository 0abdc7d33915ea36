"""Server start: what a killed server left is recovered before the first request.

Owns the recovery (``resume_at_startup``: calls journaled by the stopped server go on record,
those in flight as ``interrupted``; every turn still ``running`` is redone if its deadline has not
passed, else resolved by the fallback) and the hook on oTree's app start that runs it
(``install_startup_hook``, installed when this package is imported), which also hands the
server's event loop to lab/channels.py, installs the "Test model" route (lab/model_probe.py) and
freezes what the server has loaded out of Python's full garbage collections.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Optional

from agents.agent import PENDING
from agents.types import CallStatus
from lab import app_registry, channels
from lab.agent_runtime.journal import ABANDONED, call_journal, forget_when_committed
from lab.agent_runtime.seats import model_config
from lab.agent_runtime.turns import RUNNING, _store_call, ensure_turn
from lab.model_probe import install_test_model_route

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
            install_test_model_route(self)
            await _resume_on_startup()
            freeze_heap()

    startup._lab_agents = True
    Router.startup = startup


install_startup_hook()
