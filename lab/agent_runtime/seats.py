"""A session's agents: their model and budget, their seats, and the rows a request has read.

Owns the session's model config and budget limit (from its config), its one model (built at
session creation, held by the engine) and what it has spent so far; the agents' seats (one per
agent, created in round 1, holding the agent's settled memory), read one at a time; and the
request's memo of seat and turn rows (``_request_memo``), which lab/agent_runtime/turns.py
shares.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Optional

from agents.agent import PersonaAgent
from agents.config import ModelConfig
from lab.base import app_registry
from lab.server import baked_lookups
from lab.shared_pages import game as lab_game
from lab.agent_runtime.engine import ENGINE
from lab.agent_runtime.tables import GameTables
from lab.base.session_game import frozen_experiment
from lab.base.i18n import agent_language
from lab.base.session_settings import params, session_code_of


def model_config(session) -> ModelConfig:
    return ModelConfig.from_session_config(session.config)


def budget_limit(session) -> Optional[float]:
    value = session.config.get("session_budget")
    return float(value) if value not in (None, "", 0) else None


def create_seats(subsession, tables: GameTables) -> None:
    """creating_session, round 1: one agent per seat, fresh memory for this game."""
    p = params(subsession.session)
    _session_model(subsession.session)  # builds the client now, not in a participant's request
    from lab.base.matching import agent_seat_numbers
    from lab.base.online_settings import is_online
    from lab.base.session_settings import session_experiment

    language = agent_language(p.language)
    humans = len(subsession.get_players())
    # Online: every participant has agents of their own (lab.base.matching.private_agent_schedule).
    rule = session_experiment(subsession.session.config).matching
    seats = range(humans * p.rounds_per_game) if is_online(subsession.session) else agent_seat_numbers(
        rule, humans, p.rounds_per_game, p.game_index(tables.game))
    for seat in seats:
        agent_id = lab_game.agent_id(seat)
        agent = PersonaAgent(agent_id, p.associate_type, model=None, language=language,
                             with_communication=tables.with_chat, seed=_agent_seed(subsession.session.code, tables.game, seat),
                             memory=model_config(subsession.session).memory, message_max_chars=p.message_max_chars,
                             experiment=frozen_experiment(subsession.session))
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
    (bench/lab_load.py's --trace profile)."""
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
    total = 0.0
    for tables in app_registry.all_game_tables().values():
        total += sum(call.cost or 0.0 for call in tables.LlmCall.objects_filter(session_code=session.code))
    return total
