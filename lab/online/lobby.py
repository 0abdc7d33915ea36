"""The lobby of online H-H sessions: cohorts form by arrival, each matched within itself.

Online, participants arrive over an hour, so the lab's design (everyone of the session paired at
creation, every round starting for the whole session together) would strand them. Instead:

- At creation (``creating_session``) every participant of an online H-H session is a group of
  one in every round of each game and in the payment app: nobody is paired yet.
- A participant who passed the quiz waits on the lobby page (the instructions app's ``Lobby``),
  which asks the server every 2 s (a plain ``live_method``: under oTree's global lock, so one
  cohort forms at a time). When ``cohort_size`` participants are present in the lobby (asked in
  the last ``PRESENCE_SECONDS``), the first ``cohort_size`` to have arrived form a cohort
  (``seat_cohort``): in every round of each game they are paired by the session's perfect-stranger
  matching (lab/base/matching.py) *within the cohort*, drawn for this cohort and game, and in the payment
  app they are one group. Their lobby pages go on by themselves.
- The games' round starts and the payment's wait are then per group (the pair, the cohort) in an
  online H-H session (``waits_per_group``), not for the whole session: a cohort never waits for
  another, and no pair mixes cohorts, games or rounds (each game's matching stays in its app).
- The lobby page's limit (``online_lobby_seconds``) sends those who could not be grouped to the
  exit page with ``lobby_timeout`` and the show-up fee (``participation_fee``) as their payout in
  the payment table.

The cohort size (``online_cohort_size``; 0 = the smallest possible: rounds + 1, made even) is
what the perfect-stranger matching needs; agents' sessions have no lobby.
"""

from __future__ import annotations

import random
import time

from lab.base import online_settings as online_config

PRESENCE_SECONDS = 10
POLL_SECONDS = 2


cohort_size = online_config.cohort_size


def poll(player) -> dict:
    """The lobby page's question every POLL_SECONDS: note the participant present, form a cohort
    if enough are, and answer whether this participant has one."""
    participant, session = player.participant, player.session
    now = time.time()
    participant.vars.setdefault("online_lobby_since", now)
    participant.vars["online_lobby_seen"] = now
    if not participant.vars.get("online_cohort"):
        size = cohort_size(session.config)
        present = waiting_participants(session, participant._index_in_pages, now)
        if len(present) >= size:
            seat_cohort(session, present[:size])
    return dict(seated=bool(participant.vars.get("online_cohort")), waiting=len(
        waiting_participants(session, participant._index_in_pages, now)), needed=cohort_size(session.config))


def waiting_participants(session, page_index: int, now: float) -> list:
    """Participants on the lobby page, present, without a cohort or an outcome, by arrival."""
    from otree.models import Participant

    found = []
    for participant in Participant.objects_filter(session=session, _index_in_pages=page_index):
        vars_ = participant.vars
        if (vars_.get("online_cohort") or vars_.get("online_outcome") or vars_.get("online_dropped_at")
                or now - vars_.get("online_lobby_seen", 0) > PRESENCE_SECONDS):
            continue
        found.append(participant)
    return sorted(found, key=lambda p: (p.vars.get("online_lobby_since", now), p.id_in_session))


def seat_cohort(session, participants: list) -> int:
    """Pair ``participants`` (in arrival order) in every round of the session's games among
    themselves, and make them one group of the payment app. Returns the cohort's number (1, 2, ...)."""
    from otree.database import db

    from lab.base import app_registry, matching
    from lab.base.session_settings import GAME_APPS, params

    number = int(session.vars.get("online_cohorts", 0)) + 1
    session.vars["online_cohorts"] = number
    now = time.time()
    for participant in participants:
        participant.vars["online_cohort"] = number
        participant.vars["online_seated_at"] = now
    ids = [participant.id for participant in participants]
    p = params(session)
    for game in p.games:
        Player = app_registry.player_model(GAME_APPS[game])
        rng = random.Random(f"{session.code}-{game}-cohort{number}")
        schedule = matching.perfect_stranger_pairs(len(participants), p.rounds_per_game, rng)
        for round_number, pairs in enumerate(schedule, start=1):
            by_participant = {pl.participant_id: pl for pl in Player.objects_filter(
                Player.participant_id.in_(ids), session=session, round_number=round_number)}
            players = [by_participant[pid] for pid in ids]
            for a, b in pairs:
                _group_together(db, [players[a], players[b]])
                players[a].associate_kind = players[b].associate_kind = "human"
                players[a].associate_code = players[b].participant.code
                players[b].associate_code = players[a].participant.code
    Payment = app_registry.player_model("payment")
    by_participant = {pl.participant_id: pl for pl in Payment.objects_filter(Payment.participant_id.in_(ids),
                                                                               session=session)}
    _group_together(db, [by_participant[pid] for pid in ids])
    return number


def _group_together(db, players: list) -> None:
    """Move ``players`` (each a group of one until now) into the first one's group; the emptied
    groups are deleted, as oTree's own grouping by arrival time prunes them."""
    group = players[0].group
    emptied = [player.group for player in players[1:] if player.group_id != group.id]
    group.set_players(players)
    db._db.flush()  # the players' new group is written before their old ones go
    for old in emptied:
        db.delete(old)


def leave(player, timeout_happened: bool) -> None:
    """The lobby page is submitted: with a cohort, on to the game; at its limit without one, to the
    exit with ``lobby_timeout`` and the show-up fee."""
    from lab.online import exit as online_exit

    participant = player.participant
    if participant.vars.get("online_cohort"):
        return
    if timeout_happened:
        online_exit.set_outcome(participant, "lobby_timeout",
                                payout=float(player.session.config.get("participation_fee") or 0))
