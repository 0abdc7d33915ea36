"""The long-format exports of docs/DATA.md, as oTree custom export functions.

They live in the last app (``payment``) so that an experimenter finds every table in one
place on oTree's Data page; each takes that app's players (one per participant).
"""

from __future__ import annotations

import json

import protocol
from lab.base import app_registry
from lab.record import data_dictionary as dd
from lab.shared_pages import game as lab_game
from lab.base.session_settings import GAME_APPS

# The tables' columns are the data dictionary's, in its order: named once, with their meaning.
DECISION_COLUMNS = list(dd.DECISIONS)
MESSAGE_COLUMNS = list(dd.MESSAGES)


def _questionnaire_columns() -> list:
    """The questionnaire's fields, in the data dictionary's order (a test holds them to the app's)."""
    return list(dd.QUESTIONNAIRE)


def participant_columns() -> list:
    per_game = []
    for game in protocol.GAMES:
        per_game += [f"norm_true_{game}", f"norm_correct_{game}"]
    return (["session_code", "treatment", "associate_type", "label_setting", "game_order", "source",
             "participant_code", "participant_label", "quiz_attempts"]
            + _questionnaire_columns() + per_game
            + [f"points_{game}" for game in protocol.GAMES] + ["payout"] + ONLINE_COLUMNS
            + ["dropped_reason", "dropped_at"])


# Online sessions (lab/online/entry.py, exit.py): the study link's ids and its other parameters the
# session config names (JSON), the outcome and its code.
ONLINE_COLUMNS = ["prolific_pid", "study_id", "prolific_session_id", "url_params", "online_outcome", "completion_code"]
_ONLINE_VARS = {"completion_code": "online_completion_code", "url_params": "online_params"}


def _online_value(participant, column: str):
    value = (participant._vars or {}).get(_ONLINE_VARS.get(column, column))
    if column == "url_params" and value is not None:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value


def _first(rows):
    return rows[0] if rows else None


def participants_rows(players):
    """One row per participant: quiz, questionnaires, norms and payment."""
    yield participant_columns()
    questionnaire_columns = _questionnaire_columns()
    for player in players:
        quiz = _first(lab_game.players_of(player.participant, "instructions"))
        answers = _first(lab_game.players_of(player.participant, "questionnaire"))
        row = [*lab_game.session_keys(player.session), player.participant.code,
               player.participant.label, quiz.quiz_attempts if quiz else None]
        row += [answers.field_maybe_none(c) if answers else None for c in questionnaire_columns]
        for game in protocol.GAMES:
            row += [player.field_maybe_none(f"norm_true_{game}"),
                    lab_game.csv_bool(player.field_maybe_none(f"norm_correct_{game}"))]
        row += [player.field_maybe_none(f"points_{game}") for game in protocol.GAMES]
        row.append(player.field_maybe_none("payout"))
        row += [_online_value(player.participant, column) for column in ONLINE_COLUMNS]
        row += dropped(player.participant)
        yield row


def dropped(participant) -> list:
    """dropped_reason, dropped_at of an online session's dropout (lab/online/dropouts.py)."""
    found = participant._vars or {}
    return [found.get("online_dropped_reason") or None, found.get(lab_game.DROPPED_AT_KEY) or None]


def decisions_rows(players):
    """One row per decision of a human or an agent, both games (docs/DATA.md 'decisions')."""
    from lab import agent_runtime
    from lab.record.agent_exports import decision_rows

    yield DECISION_COLUMNS
    game_players: dict = {}  # the games' player rows and the agents' turns, read a session at a time
    for player in players:
        for game, tables in app_registry.all_game_tables().items():
            if (game, player.session_id) not in game_players:
                agent_runtime.remember_turns_of_session(tables, player.session_id)
                game_players[game, player.session_id] = lab_game.players_by_participant(
                    player.session_id, GAME_APPS[game])
            for game_player in game_players[game, player.session_id].get(player.participant_id, ()):
                yield from decision_rows(game_player, tables)


def messages_by_player(tables, session_id: int) -> dict:
    """The session's messages of the game with chat in one query, by their player row, each
    player's in the order they were written (what ``Message.filter(player=...)`` gives)."""
    from otree.database import db

    found: dict = {}
    for message in db.query(tables.Message).join(tables.Player, tables.Message.player_id == tables.Player.id).filter(
            tables.Player.session_id == session_id).order_by(tables.Message.id):
        found.setdefault(message.player_id, []).append(message)
    return found


def messages_rows(players):
    """One row per chat message of the game with chat (docs/DATA.md 'messages')."""
    tables = app_registry.game_tables("WC")
    yield MESSAGE_COLUMNS
    by_player: dict = {}  # the game's player rows and messages, read a session at a time
    game_players: dict = {}
    for player in players:
        if player.session_id not in by_player:
            by_player[player.session_id] = messages_by_player(tables, player.session_id)
            game_players[player.session_id] = lab_game.players_by_participant(player.session_id, GAME_APPS["WC"])
        for game_player in game_players[player.session_id].get(player.participant_id, ()):
            against_stand_in = lab_game.dropout_rule(game_player) == "stand_in"
            for message in by_player[player.session_id].get(game_player.id, ()):
                # On a partner's row of a stand-in pair-round: the stand-in's messages (an agent's,
                # hung on the reader's row) and the partner's own.
                by_stand_in = against_stand_in and message.sender_kind == "agent"
                yield [
                    *lab_game.session_keys(player.session), "WC", game_player.round_number,
                    lab_game.conversation_id(game_player, "WC"), message.stage,
                    message.sender_code, message.sender_kind, message.receiver_code,
                    message.receiver_kind, message.text, lab_game.csv_bool(message.sent_in_time),
                    message.stage_started_at, message.sent_at, message.unsent_draft,
                    lab_game.csv_bool(by_stand_in), lab_game.csv_bool(against_stand_in and not by_stand_in),
                ]

