"""What every column of oTree's own exports means (per app, wide, page times, the session
config's keys): the counterpart of lab/record/data_dictionary.py for the files oTree writes."""

from __future__ import annotations

from dataclasses import replace

import protocol
from lab.record.data_dictionary import (CHOICE, EPOCH, KIND, PARTICIPANTS, PAYMENT_FIELDS, POINTS, QUESTIONNAIRE, SECONDS,
                                 SESSION_KEYS, DROPOUT_RULE, Column, _c, _from_protocol, _money)

OTREE_PARTICIPANT = {
    "id_in_session": _c("participant number in the session, from 1", "integer"),
    "code": _c("oTree participant code"),
    "label": _c("participant label (room seat or panel id), if any"),
    "_is_bot": _c("played by oTree's bots", "boolean"),
    "_index_in_pages": _c("index of the participant's current page", "integer"),
    "_max_page_index": _c("number of pages of the session", "integer"),
    "_current_app_name": _c("app of the current page"),
    "_current_page_name": _c("name of the current page"),
    "time_started_utc": _c("when the participant opened the start link (UTC, text)"),
    "visited": _c("the start link was opened", "boolean"),
    "mturk_worker_id": _c("MTurk only"),
    "mturk_assignment_id": _c("MTurk only"),
    "payoff": _c("oTree's payoff: game points plus the norm bonus as points", "number", POINTS),
}
OTREE_SESSION = {
    "code": _c("oTree session code"),
    "label": _c("session label set by the experimenter"),
    "mturk_HITId": _c("MTurk only"),
    "mturk_HITGroupId": _c("MTurk only"),
    "comment": _c("experimenter's comment"),
    "is_demo": _c("created from the demo page", "boolean"),
}
OTREE_BUILT_IN = {
    "player": {"id_in_group": _c("position in the oTree group", "integer"), "role": _c("oTree role (unused)"),
               "payoff": _c("points of this round (payment: the norm bonus as points)", "number", POINTS)},
    "group": {"id_in_subsession": _c("oTree group number in the round", "integer")},
    "subsession": {"round_number": _c("oTree round (rounds past rounds_per_game are not played)", "integer")},
}
_GAME_PLAYER = {
    "associate_code": _c("the associate's participant code or agent id"),
    "associate_kind": KIND,
    "agent_seat": _c("agent sessions: the agent's seat (agent id = seat + 1)", "integer"),
    "choice": CHOICE,
    "choice_timed_out": _c("no choice in time: the choice is random", "boolean"),
    "decided_at": _c("time of the choice", "number", EPOCH),
    "associate_choice": CHOICE,
    "associate_payoff": _c("the associate's points of the round", "integer", POINTS), "dropout": DROPOUT_RULE,
    "after_drop": _c("online, stand_in = none: a dropped participant's seat after the drop (choice random, payoff 0)",
                     "boolean"),
}
APP_PLAYER_FIELDS = {
    "instructions": {
        **{f"quiz_{own}{other}": _from_protocol(lambda v, own=own, other=other: _c(
            f"quiz: own points when you choose {own} and the associate {other} (last attempt)", "integer", POINTS,
            sorted({points[0] for points in v["payoff_table"].values()}))) for own, other in protocol.PAYOFFS},
        "quiz_same_associate": _c("quiz: 'you meet the same associate again' (last attempt; right: false with perfect "
                                  "strangers, true with a fixed partner or random pairs)", "boolean"),
        "quiz_attempts": PARTICIPANTS["quiz_attempts"],
        "quiz_passed_at": _c("time the quiz was passed", "number", EPOCH),
    },
    "game_with_chat": {
        **{k: v for k, v in _GAME_PLAYER.items() if k != "choice"},
        "message_1": _c("the participant's message 1 as submitted (also in messages)"),
        "message_2": _c("the participant's message 2 as submitted (also in messages)"),
        "message_1_started_at": _c("start of message stage 1", "number", EPOCH),
        "message_2_started_at": _c("start of message stage 2", "number", EPOCH),
        "choice": CHOICE,
    },
    "game_without_chat": dict(_GAME_PLAYER),
    "questionnaire": dict(QUESTIONNAIRE),
    "payment": {
        **{key: value for game in protocol.GAMES for key, value in (
            (f"points_{game}", PAYMENT_FIELDS[f"points_{game}"]),
            (f"decisions_{game}", _c(f"decisions made in {game}", "integer")),
            (f"cooperations_{game}", _from_protocol(lambda v, game=game: _c(
                f"{v['cooperative_choice']} choices in {game}" if v.get("cooperative_choice")
                else "not counted: no choice counts as cooperation in this experiment; always empty", "integer"))),
            (f"norm_true_{game}", PAYMENT_FIELDS[f"norm_true_{game}"]),
            (f"norm_correct_{game}", PAYMENT_FIELDS[f"norm_correct_{game}"]))},
        "payout": PAYMENT_FIELDS["payout"],
    },
}
PAGE_TIMES = {
    "session_code": SESSION_KEYS["session_code"],
    "participant_id_in_session": OTREE_PARTICIPANT["id_in_session"],
    "participant_code": OTREE_PARTICIPANT["code"],
    "page_index": _c("position of the page in the session, from 0", "integer"),
    "app_name": _c("app of the page"),
    "page_name": _c("page (or wait page) class name"),
    "epoch_time_completed": _c("time the page was completed", "integer", EPOCH),
    "round_number": _c("round of the page", "integer"),
    "timeout_happened": _c("the page's time limit submitted it", "boolean"),
    "is_wait_page": _c("a wait page", "boolean"),
}


def config_columns() -> dict:
    """Session-config keys (oTree's wide export: ``session.config.KEY``)."""
    from agents.config import SESSION_CONFIG_PREFIX, ModelConfig
    from lab.base import online_settings as online_config
    from lab.base.session_settings import STAGE_CONFIG_KEYS

    columns = {
        "name": _c("session config name (settings.py)"),
        "experiment": _c("the experiment the config was built from: experiments/NAME.toml (manifest: experiment)"),
        "experiment_sha256": _c("SHA-256 of that file's bytes when the server started"),
        "associate_type": SESSION_KEYS["associate_type"], "label_setting": SESSION_KEYS["label_setting"],
        "game_order": SESSION_KEYS["game_order"],
        "language": _from_protocol(lambda v: _c("participants' language", enum=v["languages"])),
        "rounds_per_game": _c("rounds played in each game", "integer"),
        "message_max_chars": _c("longest chat message", "integer", "characters"),
        "participation_fee": _money("show-up fee"),
        "real_world_currency_per_point": _money("money per point", "/point"),
        "norm_bonus": _money("bonus per correct norm estimate"),
        "session_budget": _c("agent sessions: money the model calls may cost (0 = no limit)", "number", "USD"),
        # "online" and the entry's keys: lab/base/online_settings.py CONFIG_COLUMNS (below)
        "stand_in": _c("online: who plays a dropped seat", enum=("agent", "none")), "dropout_closed_tab_seconds": _c(
            "online: no page open this long drops a participant", "number", SECONDS),
        # an experiment without personas keeps the create page's default, which no stand-in plays
        "stand_in_persona": _from_protocol(lambda v: _c("online: the stand-in's persona",
                                                        enum=(*v["personas"], "imitate") if v["personas"] else None)),
        "dropout_after_timeouts": _c("online: timed-out form pages in a row that drop a participant", "integer"),
        "constrained_output_resolved_at": _c("when the model check resolved llm_constrained_output", "number", EPOCH),
        **{key: _c(f"time limit of the stage {stage}", "number", SECONDS) for stage, key in STAGE_CONFIG_KEYS.items()},
        **{key: _c(*described) for key, described in online_config.CONFIG_COLUMNS.items()},
    }
    units = {"max_tokens": "tokens", "context_window": "tokens", "request_timeout": SECONDS,
             "retry_base_delay": SECONDS, "retry_max_delay": SECONDS, "simulated_latency": SECONDS,
             "price_input_per_mtok": "USD per million tokens", "price_output_per_mtok": "USD per million tokens",
             "requests_per_minute": "requests per minute"}
    for name, model_field in ModelConfig.model_fields.items():
        kind, values = _annotation_type(model_field.annotation)
        columns[SESSION_CONFIG_PREFIX + name] = _c(
            f"agents' model, {name}" + (f": {model_field.description}" if model_field.description else "") + "; empty = the default", kind,
            units.get(name), values)
    return columns


def _annotation_type(annotation) -> tuple[str, tuple | None]:
    """Table Schema type (and allowed values) of a ModelConfig field's annotation."""
    import typing

    if typing.get_origin(annotation) is typing.Literal:
        return "string", typing.get_args(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    kinds = {bool: "boolean", int: "integer", float: "number"}
    return kinds.get(args[0], "string"), None


def otree_column(name: str) -> Column | None:
    """A column of oTree's per-app or wide export: ``participant.X``, ``session.X``,
    ``session.config.X``, ``player.X`` (per app: APP given by the file) or ``APP.ROUND.player.X``."""
    parts = name.split(".")
    if parts[0] == "participant" and len(parts) == 2:
        return OTREE_PARTICIPANT.get(parts[1])
    if parts[:2] == ["session", "config"] and len(parts) == 3:
        return config_columns().get(parts[2])
    if parts[0] == "session" and len(parts) == 2:
        return OTREE_SESSION.get(parts[1])
    if len(parts) == 4 and parts[1].isdigit():
        app, round_number, model, field = parts
        column = _model_column(app, model, field)
        return None if column is None else _prefixed(column, f"{app}, round {round_number}: ")
    return None


def _prefixed(column: Column, prefix: str) -> Column:
    """``column`` with its description after ``prefix`` (as its session describes it too)."""
    if column.from_protocol is None:
        return replace(column, description=prefix + column.description)
    build = column.from_protocol
    return _from_protocol(lambda values: replace(build(values), description=prefix + build(values).description))


def app_column(app: str, name: str) -> Column | None:
    """A column of oTree's export of one app (``player.X``, ``group.X``, ...)."""
    parts = name.split(".")
    if len(parts) == 2 and parts[0] in OTREE_BUILT_IN:
        return _model_column(app, *parts)
    return otree_column(name)


def _model_column(app: str, model: str, field: str) -> Column | None:
    if field in OTREE_BUILT_IN.get(model, {}):
        return OTREE_BUILT_IN[model][field]
    return APP_PLAYER_FIELDS.get(app, {}).get(field) if model == "player" else None
