"""A replay of every pair: the session as one participant (or one agent) lived it.

``participant_timeline`` and ``agent_timeline`` return plain dictionaries; lab/admin_views.py
renders them as HTML, escaping every text (participants' and models' words are data, never
markup). Pages and their times come from oTree's own page-time records (lab.dashboard.page_times).
"""

from __future__ import annotations

import json

import protocol
from lab import dashboard
from lab.session_settings import GAME_APPS, params


def _module(game: str):
    from otree.common import get_models_module

    return get_models_module(GAME_APPS[game])


def _message_dict(message) -> dict:
    return dict(
        stage=message.stage, sender=message.sender_code, sender_kind=message.sender_kind,
        receiver=message.receiver_code, text=message.text or "", sent_in_time=bool(message.sent_in_time),
        stage_started_at=message.stage_started_at, sent_at=message.sent_at,
        unsent_draft=message.unsent_draft or "",
    )


def _call_dict(call) -> dict:
    latency = None if call.time_done is None or call.time_sent is None else call.time_done - call.time_sent
    try:
        prompt = json.loads(call.messages or "[]")
    except ValueError:
        prompt = call.messages
    return dict(
        call_id=call.call_id, turn=call.turn, attempt=call.attempt, status=call.status, error=call.error or "",
        model=f"{call.provider} / {call.model}", prompt_version=call.prompt_version, prompt=prompt,
        raw_reply=call.raw_reply or "", parsed=call.parsed or "", latency=latency, time_sent=call.time_sent,
        tokens=f"{call.input_tokens or 0}/{call.output_tokens or 0}", cost=call.cost,
    )


def _seats(module, session) -> dict[str, str]:
    """agent id -> persona, for a game."""
    seats = {}
    for seat in module.AgentSeat.objects_filter().join(module.Subsession).filter(module.Subsession.session == session):
        seats[seat.agent_id] = seat.persona
    return seats


def _round(module, game: str, player, seats: dict) -> dict:
    """One round of one human participant: associate, messages both ways, decisions, payoffs,
    and for an agent associate its turns and model calls."""
    own_code = player.participant.code
    messages = []
    turns, calls = [], []
    if getattr(module, "Message", None) is not None:
        rows = list(module.Message.filter(player=player))
        if player.associate_kind == "human":
            associate = [pl for pl in player.get_others_in_group()]
            for other in associate:
                rows += [m for m in module.Message.filter(player=other) if m.receiver_code == own_code]
        messages = sorted((_message_dict(m) for m in rows), key=lambda m: (m["stage"], m["sender"] != own_code))
    if player.associate_kind == "agent":
        turns = [dict(kind=t.kind, status=t.status, text=t.text or "", choice=t.choice or "",
                      fallback_reason=t.fallback_reason or "", started_at=t.started_at, finished_at=t.finished_at)
                 for t in sorted(module.AgentTurn.filter(player=player), key=lambda t: t.started_at or 0)]
        calls = [_call_dict(c) for c in sorted(module.LlmCall.filter(player=player), key=lambda c: c.time_sent or 0)]
    return dict(
        game=game, round=player.round_number,
        associate=player.field_maybe_none("associate_code") or "",
        associate_kind=player.field_maybe_none("associate_kind") or "",
        persona=seats.get(player.field_maybe_none("associate_code") or "", ""),
        messages=messages,
        choice=player.field_maybe_none("choice") or "",
        timed_out=bool(player.field_maybe_none("choice_timed_out")),
        decided_at=player.field_maybe_none("decided_at"),
        associate_choice=player.field_maybe_none("associate_choice") or "",
        payoff=None if not player.field_maybe_none("choice") else int(player.payoff),
        associate_payoff=player.field_maybe_none("associate_payoff"),
        turns=turns, calls=calls,
    )


def participant_timeline(session, participant_code: str) -> dict | None:
    participant = next((pp for pp in session.get_participants() if pp.code == participant_code), None)
    if participant is None:
        return None
    p = params(session)
    games = []
    for game in protocol.GAME_ORDERS[p.game_order]:
        module = _module(game)
        seats = _seats(module, session) if p.with_agents else {}
        players = module.Player.objects_filter(participant=participant).order_by("round_number")
        games.append(dict(game=game, rounds=[_round(module, game, pl, seats) for pl in players
                                             if pl.round_number <= p.rounds_per_game]))
    pages = dashboard.page_times(session, participant_code).get(participant_code, [])
    previous = None
    for row in pages:
        row["seconds"] = None if previous is None else row["completed_at"] - previous
        previous = row["completed_at"]
    return dict(kind="participant", code=participant_code, label=participant.label or "",
                id_in_session=participant.id_in_session, pages=pages, games=games)


def agent_timeline(session, game: str, agent_id: str) -> dict | None:
    """The same rounds from the agent's side: each human it met, its turns and calls. ``game`` is
    WC/WoC or the game app's name (the agents page links with the app's name)."""
    game = {app: code for code, app in GAME_APPS.items()}.get(game, game)
    if game not in GAME_APPS:
        return None
    module = _module(game)
    seats = _seats(module, session)
    if agent_id not in seats:
        return None
    p = params(session)
    players = [pl for pl in module.Player.objects_filter(session=session)
               if pl.field_maybe_none("associate_code") == agent_id and pl.round_number <= p.rounds_per_game]
    rounds = []
    for pl in sorted(players, key=lambda pl: pl.round_number):
        row = _round(module, game, pl, seats)
        row["human"] = pl.participant.code
        rounds.append(row)
    return dict(kind="agent", agent_id=agent_id, game=game, persona=seats[agent_id], rounds=rounds)


def agent_ids(session) -> list[tuple[str, str, str]]:
    """(game, agent id, persona) of every agent of the session."""
    p = params(session)
    if not p.with_agents:
        return []
    found = []
    for game in protocol.GAME_ORDERS[p.game_order]:
        seats = _seats(_module(game), session)
        found += [(game, agent_id, persona) for agent_id, persona in
                  sorted(seats.items(), key=lambda item: int(item[0].rsplit("-", 1)[-1]))]
    return found
