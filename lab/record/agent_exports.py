"""The agents' rows of the exports: their decisions beside the humans' (docs/DATA.md 'decisions'),
and every model call ('llm_calls')."""

from __future__ import annotations

from agents.types import TurnKind, TurnStatus
from lab import agent_runtime as agents
from lab.base import app_registry
from lab.record import data_dictionary as dd
from lab.shared_pages import game as lab_game
from lab.base.session_game import frozen_experiment
from lab.base.session_settings import params


def decision_rows(player, tables: agents.GameTables):
    """The human's decision row, and the agent's when the associate was one (docs/DATA.md); the
    points are those stored with the human's row, never recomputed from today's protocol.py."""
    if not player.field_maybe_none("choice"):
        return
    yield lab_game.decision_row(player, tables.game)
    if player.associate_kind != "agent":
        return
    turn = agents.find_turn(player, tables, TurnKind.DECISION.value)
    if turn is None or getattr(turn, "choice") is None:
        return
    p = params(player.session)
    # The points stored when the round was settled (the human's row holds both sides'); empty, as
    # on the human's row, in an export taken before.
    settled = player.field_maybe_none("associate_choice") is not None
    agent_points, human_points = (player.associate_payoff, int(player.payoff)) if settled else (None, None)
    rule = lab_game.dropout_rule(player)
    stand_in = rule == "stand_in"  # an online stand-in playing a dropped participant's seat
    yield [
        *lab_game.session_keys(player.session), tables.game, p.game_index(tables.game), player.round_number,
        turn.agent_id, "agent", stand_in_persona(player.session) if stand_in else p.associate_type,
        player.participant.code, "human",
        lab_game.conversation_id(player, tables.game), turn.choice,
        lab_game.csv_bool(turn.status == TurnStatus.FALLBACK.value), player.choice, agent_points, human_points,
        turn.finished_at, lab_game.csv_bool(stand_in), "False", rule, lab_game.csv_bool(stand_in),
    ]


def stand_in_persona(session) -> str:
    """The persona column of a stand-in's rows (``imitate`` plays the fair persona, or the
    experiment's first without one: lab/base/online_settings.py ``imitating_persona``)."""
    from lab.base.online_settings import STAND_IN_IMITATE, imitating_persona

    chosen = str(session.config.get("stand_in_persona") or "fair")
    return imitating_persona(frozen_experiment(session)) if chosen == STAND_IN_IMITATE else chosen


LLM_CALL_COLUMNS = list(dd.LLM_CALLS)  # the session's keys, game, participant_code, then a call's fields


def llm_call_rows(players):
    """One row per model call of the sessions of ``players`` (docs/DATA.md 'llm_calls')."""
    from otree.database import db
    from otree.models import Participant

    yield LLM_CALL_COLUMNS
    sessions = {player.session.code: player.session for player in players}
    for code, session in sessions.items():
        for game, tables in app_registry.all_game_tables().items():
            # Each call's participant in one query, not through ``call.player.participant`` (two each).
            participant_codes = dict(db.query(tables.Player.id, Participant.code).join(
                Participant, tables.Player.participant_id == Participant.id).filter(
                tables.Player.session_id == session.id))
            for call in tables.LlmCall.objects_filter(session_code=code).order_by("id"):
                values = [getattr(call, column) for column in LLM_CALL_COLUMNS[8:]]
                values[-1] = lab_game.csv_bool(values[-1])
                yield [*lab_game.session_keys(session), game, participant_codes[call.player_id], *values]


