"""What happens to a dropped participant's associates (session config ``stand_in``).

``stand_in = agent`` (the online default), H-H sessions: from the next stage on, an agent plays
the dropped seat, through the agent runtime that plays H-F sessions (lab/agent_runtime/,
lab/agent_runtime/wait_pages.py): each of the seat's remaining pair-rounds (the current one from the first
stage its participant did not play, and every later round of both games) becomes, for the
partner, a round against an agent: ``associate_kind = "agent"``, the stand-in's seat
(``AgentSeat``, one per dropped participant and game, ``STAND_IN_SEAT_BASE`` + their
``id_in_session``), ``dropout = "stand_in"``. The associate's code stays the seat's (the dropped
participant's), so the pair-round's conversation id and the messages already exchanged stay
the pair's; the stand-in's turns, messages, choices and model calls are the agent runtime's rows
(AgentTurn, Message, LlmCall) and every export flags them (``stand_in``; the partner's rows
``partner_stand_in``). The stages the seat's participant did play before the drop are on record
as turns of status ``seat`` (``SEAT_PLAYED``): the stand-in's memory starts from them. Persona:
``stand_in_persona`` (default ``fair``; ``imitate``: the fair persona whose memory holds the
dropped participant's rounds of the game as its own, so its decision prompt shows their past
choices). In another experiment than the paper's: one of its personas (its configs default to its
first when it has no ``fair``), and ``imitate`` plays its ``fair`` or else its first persona. A partner who waits for the seat waits on the agent's wait page, never past the
stand-in's stage limit.

In H-C/H-F/H-S sessions every associate is an agent already: nobody waits for a dropped
participant but the round starts, which count them as arrived.

``stand_in = none``: the partner finishes each of the seat's remaining pair-rounds alone: the
seat sends no message and its choice is random, flagged ``timed_out``, exactly as a late
participant's (docs/protocol.md, One round); the partner is paid by the payoff table against it, and these
pair-rounds are marked ``dropout = "alone"``; the partner's outcome becomes ``partner_dropped``.
The seat's rows are ``after_drop``: they pay the dropped participant 0 and are nobody's choices in
the norm estimate check (lab/shared_pages/game.py ``after_drop``).
"""

from __future__ import annotations

import json
import time

from lab import agent_runtime as agents
from lab.base import app_registry
from lab.shared_pages import game as lab_game
from lab.agent_runtime.turns import SEAT_PLAYED
from lab.base.online_settings import STAND_IN_IMITATE, imitating_persona
from lab.base.session_game import frozen_experiment
from lab.base.session_settings import GAME_APPS, params

STAND_IN_SEAT_BASE = 100000
OUTCOME_KEY = "online_outcome"


def hand_over(participant) -> dict:
    """The dropped ``participant``'s remaining pair-rounds go on without them. Returns what was
    done: {"rule": ..., "pair_rounds": n}."""
    session = participant.session
    p = params(session)
    rule = session.config.get("stand_in", "agent")
    if p.with_agents:
        return dict(rule="agents already", pair_rounds=0, turns_settled=settle_their_agents(participant))
    done = 0
    for game, tables in app_registry.all_game_tables().items():
        for seat_player in lab_game.players_of(participant, GAME_APPS[game]):
            if not lab_game.is_played(seat_player) or seat_player.field_maybe_none("choice") is not None:
                continue  # rounds the seat's participant decided in are theirs
            if seat_player.field_maybe_none("associate_kind") != "human":
                continue
            partner = lab_game.human_associate(seat_player)
            if lab_game.seat_dropped(partner.participant) or lab_game.dropout_rule(partner):
                continue  # nobody left to play against
            if rule == "agent":
                take_over(seat_player, partner, tables)
            else:
                finish_alone(seat_player, partner, game)
            done += 1
    return dict(rule=rule, pair_rounds=done)


def settle_their_agents(participant) -> int:
    """H-C/H-F/H-S: the turns their agents still run against the dropped participant are settled
    now (by the fallback if need be): their calls go on record and the agents' memories move on;
    no page of theirs would settle them. Returns how many."""
    settled = 0
    for game, tables in app_registry.all_game_tables().items():
        for player in lab_game.players_of(participant, GAME_APPS[game]):
            if player.field_maybe_none("associate_kind") != "agent" or not lab_game.is_played(player):
                continue
            for kind in agents.TURN_STAGE:
                turn = agents.find_turn(player, tables, kind)
                if turn is not None and turn.status == agents.RUNNING:
                    agents.settle_or_fallback(player, tables, kind)
                    settled += 1
    return settled


# --- stand_in = none -------------------------------------------------------------------------------
def finish_alone(seat_player, partner, game: str) -> None:
    """The seat's choice is a late participant's (random, flagged); the partner goes on alone.
    The seat's row earns its participant nothing (``after_drop``: they did not play it)."""
    lab_game.record_choice(seat_player, None, True, game)
    seat_player.dropout = partner.dropout = "alone"
    seat_player.after_drop = True
    outcomes = partner.participant.vars
    if not outcomes.get(OUTCOME_KEY):
        outcomes[OUTCOME_KEY] = "partner_dropped"


# --- stand_in = agent ------------------------------------------------------------------------------
def stand_in_seat(tables, seat_player):
    """The stand-in's AgentSeat for the dropped participant in this game (created once)."""
    from agents.agent import PersonaAgent
    from lab.agent_runtime.seats import _agent_seed, agent_language, model_config

    session = seat_player.session
    participant = seat_player.participant
    number = STAND_IN_SEAT_BASE + participant.id_in_session
    first_round = type(seat_player.subsession).objects_get(session_id=session.id, round_number=1)
    found = tables.AgentSeat.objects_first(subsession=first_round, seat=number)
    if found is not None:
        return found
    p = params(session)
    chosen = session.config.get("stand_in_persona", "fair")
    experiment = frozen_experiment(session)
    persona = imitating_persona(experiment) if chosen == STAND_IN_IMITATE else chosen
    agent = PersonaAgent(participant.code, persona, model=None, language=agent_language(p.language),
                         with_communication=tables.with_chat, seed=_agent_seed(session.code, tables.game, number),
                         memory=model_config(session).memory, message_max_chars=p.message_max_chars,
                         experiment=experiment)
    if chosen == "imitate":
        for earlier in lab_game.players_of(participant, GAME_APPS[tables.game]):
            if earlier.round_number < seat_player.round_number and earlier.field_maybe_none("associate_choice"):
                agent.record_outcome(earlier.round_number, earlier.choice, earlier.associate_choice)
    return tables.AgentSeat.create(subsession=first_round, seat=number, agent_id=participant.code,
                                   persona=f"stand_in:{chosen}", state=json.dumps(agent.to_state()),
                                   updated_at=time.time())


def take_over(seat_player, partner, tables) -> None:
    """From the first stage the seat's participant did not play, the stand-in plays the seat
    against ``partner`` in this pair-round."""
    seat = stand_in_seat(tables, seat_player)
    partner.associate_kind = "agent"
    partner.agent_seat = seat.seat
    partner.dropout = "stand_in"
    first_kind = _record_played_stages(seat_player, partner, tables, seat)
    started = partner.participant._index_in_pages >= _round_start_index(partner)
    if started:
        # The pair-round is under way: the stand-in's first turn starts now (it has its own stage
        # limit from now); a partner waiting for the seat is told to look again.
        agents.ensure_turn(partner, tables, first_kind)
        _wake_waiting_partner(partner)


def _round_start_index(partner) -> int:
    """The page index of the partner's RoundStart in this round (the stand-in's first turn of
    a later round starts with the round, lab/agent_runtime/turns.py start_round)."""
    from otree.lookup import _get_session_lookups  # the session's page list, as oTree keeps it

    app = type(partner).__module__.split(".")[0]
    for index, lookup in sorted(_get_session_lookups(partner.session.code).items()):
        if lookup.app_name == app and lookup.round_number == partner.round_number \
                and lookup.page_class.__name__ == "RoundStart":
            return index + 1  # past RoundStart: the round's turns have been started
    return 10 ** 9


def _record_played_stages(seat_player, partner, tables, seat) -> str:
    """The message stages the seat's participant played in this round, as settled turns of
    status ``seat``, and in the stand-in's memory; returns the stand-in's first turn kind."""
    if not tables.with_chat:
        return "decision"
    state = json.loads(seat.state)
    rounds = state.setdefault("rounds", {})
    this_round = rounds.setdefault(str(seat_player.round_number), {})
    first_kind = "message_1"
    exchanges = lab_game.chat_exchanges(seat_player, tables.game)
    for stage in range(1, exchanges + 1):
        rows = tables.Message.filter(player=seat_player, stage=stage, sender_kind="human")
        if not rows:
            break
        message = rows[0]
        text = message.text if message.sent_in_time else None
        tables.AgentTurn.create(player=partner, agent_id=seat_player.participant.code, kind=f"message_{stage}",
                                status=SEAT_PLAYED, text=text, started_at=message.stage_started_at,
                                deadline_at=message.sent_at or time.time(), finished_at=message.sent_at or time.time(),
                                attempts=0)
        this_round[f"message_{stage}"] = text
        if stage == 1:
            received = tables.Message.filter(player=partner, stage=1, sender_kind="human")
            this_round["associate_message_1"] = received[0].text if received and received[0].sent_in_time else None
        first_kind = f"message_{stage + 1}" if stage < exchanges else "decision"
    seat.state = json.dumps(state, ensure_ascii=False)
    seat.updated_at = time.time()
    return first_kind


def _wake_waiting_partner(partner) -> None:
    """A partner on the pair's wait page reloads it, now an agent's wait (lab/agent_runtime/wait_pages.py)."""
    from otree.channels import utils as channel_utils

    from lab.base.committed import after_commit

    participant = partner.participant
    if not participant.is_on_wait_page:
        return
    group = channel_utils.group_wait_page_name(participant.session.id, participant._index_in_pages, partner.group_id)
    after_commit(lambda: channel_utils.sync_group_send(group=group, data={"status": "ready"}))


# --- the experimenter's dashboard ------------------------------------------------------------------
def summary(session) -> dict:
    """Dropped participants and the pair-rounds that went on without them, as the exports count
    them (participants' ``dropped_reason``; decisions' ``dropout_rule`` of the partners' rows)."""
    dropped = []
    for participant in session.get_participants():
        found = participant._vars or {}
        if found.get(lab_game.DROPPED_AT_KEY):
            dropped.append(dict(code=participant.code, reason=found.get("online_dropped_reason"),
                                at=found.get(lab_game.DROPPED_AT_KEY), by=found.get("online_dropped_by")))
    pair_rounds = {rule: 0 for rule in lab_game.DROPOUT_RULES}
    for game, tables in app_registry.all_game_tables().items():
        Player = tables.Player
        for rule in lab_game.DROPOUT_RULES:
            # A pair-round is the pair's group of that round; counted once it has a decision on record.
            rows = Player.objects_filter(session_id=session.id, dropout=rule)
            pair_rounds[rule] += len({row.group_id for row in rows if row.field_maybe_none("choice") is not None})
    return dict(dropped=sorted(dropped, key=lambda d: d["at"]), stand_in_pair_rounds=pair_rounds["stand_in"],
                alone_pair_rounds=pair_rounds["alone"], rule=session.config.get("stand_in", "agent"))
