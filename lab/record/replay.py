"""A replay of every pair: the session as one participant (or one agent) lived it.

``participant_timeline`` and ``agent_timeline`` return plain dictionaries; lab/experimenter/admin_views.py
renders them as HTML, escaping every text (participants' and models' words are data, never
markup). Pages and their times come from oTree's own page-time records (lab.record.page_times).
"""

from __future__ import annotations

import json

from agents.types import TurnStatus
from lab.base import app_registry
from lab.record.page_times import page_times
from lab.base.session_settings import GAME_APPS, params


FALLBACK = TurnStatus.FALLBACK.value


def _message_dict(message, late_at) -> dict:
    """A message with ``at``, the time it is ordered by: when it was sent, or for one not sent in
    time when the stage ended for its sender (``late_at``)."""
    at = message.sent_at if message.sent_in_time else late_at
    return dict(
        stage=message.stage, sender=message.sender_code, sender_kind=message.sender_kind,
        receiver=message.receiver_code, text=message.text or "", sent_in_time=bool(message.sent_in_time),
        stage_started_at=message.stage_started_at, sent_at=message.sent_at, late_at=late_at, at=at,
        unsent_draft=message.unsent_draft or "",
    )


def _late_at(message, page_done: dict, turns: list, game_app: str, round_number: int):
    """When a message not sent in time was taken: a human's message page submitted at its limit
    (oTree's page-time records), an agent's turn settled by its fallback."""
    if message.sent_in_time:
        return None
    if message.sender_kind == "agent":
        return next((t["finished_at"] for t in turns if t["kind"] == f"message_{message.stage}"), None)
    return page_done.get((message.sender_code, game_app, round_number, f"Message{message.stage}"))


def page_completions(session) -> dict:
    """(participant code, app, round, page) -> when oTree recorded the page as completed."""
    return {(row["participant_code"], row["app_name"], row["round_number"], row["page_name"]): row["completed_at"]
            for rows in page_times(session).values() for row in rows}


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


def _seats(tables, session) -> dict[str, str]:
    """agent id -> persona, for a game."""
    Seat = tables.AgentSeat
    return {seat.agent_id: seat.persona
            for seat in Seat.objects_filter().filter(Seat.subsession.has(session_id=session.id))}


def _round(tables, game: str, player, seats: dict, page_done: dict) -> dict:
    """One round of one human participant: associate, messages both ways in the order they were
    sent, decisions (flagged when a choice was random), payoffs, and for an agent associate its
    turns and model calls."""
    own_code = player.participant.code
    messages = []
    turns, calls = [], []
    associates = player.get_others_in_group() if player.associate_kind == "human" else []
    if player.associate_kind == "agent":
        turns = [dict(kind=t.kind, status=t.status, text=t.text or "", choice=t.choice or "",
                      fallback_reason=t.fallback_reason or "", started_at=t.started_at, finished_at=t.finished_at)
                 for t in sorted(tables.AgentTurn.filter(player=player), key=lambda t: t.started_at or 0)]
        calls = [_call_dict(c) for c in sorted(tables.LlmCall.filter(player=player), key=lambda c: c.time_sent or 0)]
    if tables.with_chat:
        rows = list(tables.Message.filter(player=player))
        for other in associates:
            rows += [m for m in tables.Message.filter(player=other) if m.receiver_code == own_code]
        app = GAME_APPS[game]
        messages = sorted((_message_dict(m, _late_at(m, page_done, turns, app, player.round_number)) for m in rows),
                          key=lambda m: (m["at"] is None, m["at"] or 0, m["stage"]))
    if associates:
        associate_timed_out = bool(associates[0].field_maybe_none("choice_timed_out"))
    else:
        associate_timed_out = any(t["kind"] == "decision" and t["status"] == FALLBACK for t in turns)
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
        associate_timed_out=associate_timed_out,
        payoff=None if not player.field_maybe_none("choice") else int(player.payoff),
        associate_payoff=player.field_maybe_none("associate_payoff"),
        turns=turns, calls=calls,
    )


def participant_timeline(session, participant_code: str) -> dict | None:
    participant = next((pp for pp in session.get_participants() if pp.code == participant_code), None)
    if participant is None:
        return None
    p = params(session)
    page_done = page_completions(session)
    games = []
    for game in p.games:
        tables = app_registry.game_tables(game)
        seats = _seats(tables, session) if p.with_agents else {}
        players = tables.Player.objects_filter(participant=participant).order_by("round_number")
        games.append(dict(game=game, rounds=[_round(tables, game, pl, seats, page_done) for pl in players
                                             if pl.round_number <= p.rounds_per_game]))
    pages = page_times(session, participant_code).get(participant_code, [])
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
    tables = app_registry.game_tables(game)
    seats = _seats(tables, session)
    if agent_id not in seats:
        return None
    p = params(session)
    players = [pl for pl in tables.Player.objects_filter(session=session)
               if pl.field_maybe_none("associate_code") == agent_id and pl.round_number <= p.rounds_per_game]
    rounds = []
    page_done = page_completions(session)
    for pl in sorted(players, key=lambda pl: pl.round_number):
        row = _round(tables, game, pl, seats, page_done)
        row["human"] = pl.participant.code
        rounds.append(row)
    return dict(kind="agent", agent_id=agent_id, game=game, persona=seats[agent_id], rounds=rounds)


def agent_ids(session) -> list[tuple[str, str, str]]:
    """(game, agent id, persona) of every agent of the session."""
    p = params(session)
    if not p.with_agents:
        return []
    found = []
    for game in p.games:
        seats = _seats(app_registry.game_tables(game), session)
        found += [(game, agent_id, persona) for agent_id, persona in
                  sorted(seats.items(), key=lambda item: int(item[0].rsplit("-", 1)[-1]))]
    return found
