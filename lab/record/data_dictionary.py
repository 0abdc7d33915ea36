"""What every column of the lab's data means: the one place for column descriptions.

It covers docs/DATA.md's tables (the payment and instructions apps' custom exports); oTree's
own exports (per app, wide, page times) are in lab/record/data_dictionary_otree.py. The data package (lab/record/data_package.py) turns it into
each file's Table Schema in ``datapackage.json``; docs/DATA.md's column tables are generated from
it (``python -m lab.record.data_md`` rewrites them; tests/test_data_dictionary.py checks they are
current and that every exported column is here).

Types are Table Schema types (https://specs.frictionlessdata.io/table-schema/); ``unit`` is ours
(Table Schema has none); ``enum`` becomes ``constraints.enum``. An empty cell is a missing value.

A column whose allowed values, unit or description come from protocol.py (choices, payoffs,
answer scales, the currency) is built from those values (``_from_protocol``): here, and so in
DATA.md, from today's; in a session's data package from the values frozen with the session
(``Column.of_session``, lab/base/session_game.py ``session_protocol_values``), so that the description
of a session's data is the protocol it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import protocol
from lab.base.session_game import label_values, protocol_values, treatment_values

EPOCH = "s (Unix epoch)"
POINTS = "points"
SECONDS = "s"
TODAY = {**protocol_values(), **treatment_values(), **label_values()}
# How booleans are written: our long tables say True/False (lab.shared_pages.game.csv_bool), oTree's
# CSV writer 1/0 (its own exports, and custom-export cells that are Python booleans).
# (true values, false values), Table Schema's trueValues/falseValues.
WORDS = (("True",), ("False",))
DIGITS = (("1",), ("0",))
EITHER = (("1", "True"), ("0", "False"))  # oTree's page times write both


@dataclass(frozen=True)
class Column:
    description: str
    type: str = "string"
    unit: str | None = None
    enum: tuple | None = None
    # builds the column from protocol values (lab/base/session_game.py protocol_values); None: fixed
    from_protocol: Callable[[dict], "Column"] | None = field(default=None, compare=False, repr=False)

    def of_session(self, values: dict) -> "Column":
        """The column as a session whose protocol values are ``values`` describes it."""
        return self if self.from_protocol is None else _from_protocol(self.from_protocol, values)


@dataclass(frozen=True)
class Table:
    title: str
    description: str
    columns: dict
    booleans: tuple = WORDS


def _c(description, type="string", unit=None, enum=None) -> Column:
    return Column(description, type, unit, tuple(enum) if enum is not None else None)


def _from_protocol(build: Callable[[dict], Column], values: dict = TODAY) -> Column:
    return replace(build(values), from_protocol=build)


def _scale(values: dict) -> tuple:
    low, high = values["answer_scales"]["likert"]
    return tuple(range(low, high + 1))


def _norm_index(values: dict) -> tuple:
    return tuple(range(len(values["answer_scales"]["norm_intervals"])))


def _norm_text(values: dict) -> str:
    intervals = values["answer_scales"]["norm_intervals"]
    if not intervals:
        return "not asked in this experiment: always empty"
    return ", ".join(f"{i} = {lo}-{hi} %" for i, (lo, hi) in enumerate(intervals))


def _likert(text: str, note: str = "") -> Column:
    """An item of a Likert scale: ``text``, the scale's range, ``note``."""
    return _from_protocol(lambda v: _c(f"{text}, {_scale(v)[0]}..{_scale(v)[-1]}{note}", "integer", enum=_scale(v)))


def _money(description: str, per: str = "") -> Column:
    return _from_protocol(lambda v: _c(description, "number", v["currency"] + per))


# --- docs/DATA.md's tables ----------------------------------------------------------------------
SESSION_KEYS = {
    "session_code": _c("oTree session code (simulation: run id)"),
    "treatment": _from_protocol(lambda v: _c("treatment code (simulation: A-A)",
                                             enum=(*v["treatment_codes"].values(), "A-A"))),
    "associate_type": _from_protocol(lambda v: _c("who the associates are: humans or an agent persona",
                                                  enum=v["treatment_codes"])),
    "label_setting": _from_protocol(lambda v: _c("informed: associates labelled truthfully; uninformed: 'machines or "
                                                 "humans'", enum=v["label_settings"])),
    "game_order": _from_protocol(lambda v: _c(
        "order of the two games" if all(len(order) == 2 for order in v["game_orders"].values())
        else "the game played (the design has one game)", enum=v["game_orders"])),
    "source": _c("where the row comes from", enum=("lab", "simulation")),
}
GAME = _c("WC (with communication) or WoC (without)", enum=protocol.GAMES)
ROUND = _c("round of the game, from 1", "integer")


def _shown_as(values: dict) -> str:
    """How participants saw each choice, where a label is not its id ("" when each is shown as its id)."""
    labels = values.get("choice_labels") or {}
    if all(label == choice for choice in values["choices"] for label in labels.get(choice, {}).values()):
        return ""
    return "; ".join(f"{choice} as " + ", ".join(f'"{label}" ({language})' for language, label in
                                                 labels.get(choice, {}).items()) for choice in values["choices"])


def _choice(v: dict, note: str = "") -> Column:
    return _c(" or ".join(v["choices"]) + (f" ({v['cooperative_choice']} counts as cooperation)"
                                           if v.get("cooperative_choice") else " (no choice counts as cooperation)")
              + (f"; shown on screen {_shown_as(v)}" if _shown_as(v) else "; labels are neutral on screen") + note,
              enum=v["choices"])


CHOICE = _from_protocol(_choice)
KIND = _c("human or agent", enum=("human", "agent"))
CONVERSATION = _c("{session_code}-{game}-r{round}-{pair}: shared by both sides of one pair-round")
DROPOUT_RULE = _c("online: stand_in (an agent played a dropped seat) or alone (its choice random)", enum=("stand_in", "alone"))
AFTER_DROP = _c("online: True on a dropped participant's seat after the drop: a stand-in's row, or (stand_in = none) "
                "the seat's random choice, paying them 0 and in no one's norm estimate check", "boolean")

DECISIONS = {
    **SESSION_KEYS,
    "game": GAME,
    "game_index": _c("1 or 2: the game's position in the session", "integer", enum=(1, 2)),
    "round": ROUND,
    "player_code": _c("participant code (agents: agent id, e.g. agent-3)"),
    "player_kind": KIND,
    "persona": _from_protocol(lambda v: _c("agent persona; empty for humans", enum=v["personas"])),
    "associate_code": _c("the other side's participant code or agent id"),
    "associate_kind": KIND,
    "conversation_id": CONVERSATION,
    "choice": CHOICE,
    "timed_out": _c("True when the choice was random because none came in time (agents: the fallback)",
                    "boolean"),
    "associate_choice": _from_protocol(lambda v: _choice(v, "; empty in an export taken before the associate decided")),
    "payoff": _c("points of the round; empty before the associate decided", "integer", POINTS),
    "associate_payoff": _c("the associate's points of the round; empty before the associate decided", "integer",
                           POINTS),
    "decided_at": _c("time of the choice", "number", EPOCH),
    "stand_in": _c("online: True when a stand-in agent played this row's seat (a dropped participant's)", "boolean"),
    "partner_stand_in": _c("online: True when a stand-in played the associate's seat", "boolean"), "dropout_rule": DROPOUT_RULE,
    "after_drop": AFTER_DROP,
}

MESSAGES = {
    **SESSION_KEYS,
    "game": GAME,
    "round": ROUND,
    "conversation_id": CONVERSATION,
    "stage": _c("1 or 2: message 1, message 2", "integer", enum=(1, 2)),
    "sender_code": _c("who wrote it: participant code or agent id"),
    "sender_kind": KIND,
    "receiver_code": _c("who read it: participant code or agent id"),
    "receiver_kind": KIND,
    "text": _c("the message exactly as typed (plain text; empty when not sent in time)"),
    "sent_in_time": _c("False when the stage limit passed before it was sent: nothing was shown", "boolean"),
    "stage_started_at": _c("start of the message stage", "number", EPOCH),
    "sent_at": _c("time the message was sent", "number", EPOCH),
    "unsent_draft": _c("for a message not sent in time: what was in the box at the limit, or what it last held when "
                       "the page was submitted without its browser (a closed tab, the experimenter's advance); "
                       "never shown"),
    "stand_in": _c("online: True when a stand-in agent wrote it in a dropped participant's seat", "boolean"),
    "partner_stand_in": _c("online: True for the partner's own messages of a stand-in pair-round", "boolean"),
}

QUESTIONNAIRE = {
    **{f"norm_estimate_{game}": _from_protocol(lambda v, game=game: _c(
        f"Q1: estimated interval of the others' cooperation rate in {game} ({_norm_text(v)})", "integer",
        enum=_norm_index(v))) for game in protocol.GAMES},
    **{f"perception_{item}": _likert(f"Q2: perception of the associates, {item}") for item in protocol.PERCEPTION_ITEMS},
    **{f"c7_{item}": _likert(f"Q3: communication quality (7C), {item}") for item in protocol.SEVEN_C_ITEMS},
    "believed_human": _likert("Q4: 'my associates were humans'", "; label-uninformed sessions only"),
    "llm_familiarity": _from_protocol(lambda v, levels="llm_familiarity_levels": _c(
        f"Q5: familiarity with LLMs, {v['answer_scales'][levels][0]} (never heard of them) .. "
        f"{v['answer_scales'][levels][-1]} (use them daily)", "integer", enum=v["answer_scales"][levels])),
    **{f"svo_item_{n}": _from_protocol(lambda v, n=n: _c(
        f"Q6: SVO slider item {n}, position 0..{v['answer_scales']['svo_steps'] - 1} of the {v['answer_scales']['svo_steps']} "
        "allocations", "integer",
        enum=range(v["answer_scales"]["svo_steps"]))) for n in range(1, len(protocol.SVO_ITEMS) + 1)},
    "svo_angle": _c("SVO angle (Murphy et al. 2011) from the six items", "number", "degrees"),
    "svo_category": _c("SVO category of the angle", enum=("altruistic", "prosocial", "individualistic", "competitive")),
    "age": _c("Q7: age", "integer", "years"),
    "gender": _c("Q7: gender", enum=protocol.GENDERS),
    "major": _c("Q7: field of study (free text)"),
}

PAYMENT_FIELDS = {
    **{f"norm_true_{game}": _from_protocol(lambda v, game=game: _c(
        f"the true interval index of the other participants' cooperation rate in {game}; empty when nobody else "
        "played", "integer", enum=_norm_index(v))) for game in protocol.GAMES},
    **{f"norm_correct_{game}": _c(f"True when the {game} norm estimate was in the true interval", "boolean")
       for game in protocol.GAMES},
    **{f"points_{game}": _c(f"points of game {game}", "integer", POINTS) for game in protocol.GAMES},
    "payout": _money("the payment: show-up fee + rate x points + bonus per correct norm estimate"),
}

PARTICIPANTS = {
    **SESSION_KEYS,
    "participant_code": _c("oTree participant code"),
    "participant_label": _c("participant label (room seat or panel id), if any"),
    "quiz_attempts": _c("quiz submissions until passed", "integer"),
    **QUESTIONNAIRE,
    **{key: PAYMENT_FIELDS[key] for game in protocol.GAMES for key in (f"norm_true_{game}", f"norm_correct_{game}")},
    **{f"points_{game}": PAYMENT_FIELDS[f"points_{game}"] for game in protocol.GAMES},
    "payout": PAYMENT_FIELDS["payout"],
    # online sessions (docs/online.md); empty in lab sessions
    "prolific_pid": _c("online: the participant's PROLIFIC_PID from the study link (also the participant label)"),
    "study_id": _c("online: Prolific's STUDY_ID from the study link"),
    "prolific_session_id": _c("online: Prolific's SESSION_ID from the study link (one per submission)"),
    "url_params": _c("online: the study link's other parameters that the session config's online_url_params names, "
                     "as JSON {name: value} (only those the link carried)"),
    "online_outcome": _c("online: how the participant left", enum=("completed", "screened_out", "lobby_timeout",
                                                                   "partner_dropped", "timed_out")),
    "completion_code": _c("online: the Prolific completion code the exit page showed"),
    "dropped_reason": _c("online: why the participant was dropped", enum=("timeouts", "closed_tab", "experimenter")),
    "dropped_at": _c("online sessions: when the participant was dropped", "number", EPOCH),
}

CALL_STATUSES = ("ok", "parse_error", "length", "refusal", "rate_limited", "provider_error", "timeout", "budget",
                 "cancelled", "config_error", "interrupted", "abandoned", "context_overflow")
LLM_CALLS = {
    **SESSION_KEYS,
    "game": GAME,
    "participant_code": _c("the human the agent was matched with (empty in simulations)"),
    "call_id": _c("unique id of the call"),
    "agent_id": _c("the agent, e.g. agent-3"),
    "round_number": ROUND,
    "turn": _c("which turn the call was for", enum=("message_1", "message_2", "decision")),
    "attempt": _c("1 = first ask, 2 and on = the re-asks after a malformed reply (llm_reasks; under a grammar each "
                  "is a new draw of the same prompt, its messages show what was sent)", "integer"),
    "provider": _c("model provider", enum=("openai", "anthropic", "openai_compatible", "gemini", "simulated")),
    "model": _c("model name as the provider spells it"),
    "parameters": _c("sampling parameters as sent (temperature, max_tokens, seed, ...)", "object"),
    "prompt_version": _c("content hash of the prompt templates that rendered the prompt"),
    "messages": _c("the full messages sent (role, content)", "array"),
    "raw_reply": _c("the model's reply as received"),
    "parsed": _c("what the lab took from the reply: the message text, or A/B"),
    "status": _c("how the call ended (docs/agents.md)", enum=CALL_STATUSES),
    "error": _c("short error text (never a key)"),
    "input_tokens": _c("input tokens as the provider counted them", "integer", "tokens"),
    "output_tokens": _c("output tokens as the provider counted them", "integer", "tokens"),
    "cost": _c("cost of the call; estimated (prompt + max_tokens) when flagged cost_estimated", "number", "USD"),
    "time_sent": _c("request sent", "number", EPOCH),
    "time_first_byte": _c("first byte of the reply", "number", EPOCH),
    "time_done": _c("reply complete", "number", EPOCH),
    "retries": _c("HTTP-level retries inside this call", "integer"),
    "prompt_tokens": _c("our count of the request before sending", "integer", "tokens"),
    "trimmed": _c("earlier rounds' transcripts dropped to fit the context window", "integer"),
    "reasoning": _c("the model's <think> text or reasoning field (never parsed as the answer)"),
    "flags": _c("comma-separated: message_too_long, message_cut, interrupted, abandoned, cost_estimated, not_sent, ..."),
    "simulated": _c("True for the offline simulated model", "boolean"),
}

QUIZ_ATTEMPTS = {
    "session_code": SESSION_KEYS["session_code"],
    "participant_code": _c("oTree participant code"),
    "attempt": _c("1 for the first submission", "integer"),
    "passed": _c("every answer right (1) or not (0)", "boolean"),
    "answers": _c("the submitted answers, {field: value}", "object"),
    "submitted_at": _c("time of the submission", "number", EPOCH),
}

MANIFEST_KEYS = {
    "manifest_version": "2 (1: computed at export, before the freeze)",
    "provenance": "'frozen at session creation', or 'not frozen: computed at export' for sessions created "
                  "before the freeze existed",
    "session_code": "oTree session code", "treatment": "`H-H`, `H-C`, `H-F` or `H-S` (another experiment's agent treatments: `H-` and its persona's code)",
    "num_participants": "participants at creation",
    "project_version": "git commit of the project (`+dirty` if files differed from it); `LAB_VERSION` or "
                       "`unknown` without git",
    "packages": "versions of `otree`, `openai`, `anthropic`, `pydantic`, `jinja2`, and `python`",
    "session_config": "the session config as run (oTree's config dictionary, with every override; "
                      "secrets' values redacted)",
    "experiment": "the experiment file the session was created from (docs/experiment-file.md): `name`, `file`, "
                  "`text_sha256` (SHA-256 of the file's bytes), `design_sha256` (of its values as data: the "
                  "analysis groups sessions by it) and `text`, the file as it was",
    "prompts": "`{file name under prompts/: SHA-256}` of every prompt template",
    "prompts_sha256": "one SHA-256 over `prompts`",
    "model_settings": "agent sessions: the model config as resolved at session creation "
                      "(`agents.config.ModelConfig`; the API key's variable *name* only, never a key); empty in H-H",
    "model_check": "agent sessions: what the model check found (lab/base/session_settings.py): its status, whether "
                   "the grammar is on and why (`grammar`), and for a local server its capacity for the session "
                   "(`capacity`: the verdict fits / narrow, the measured prompt evaluation, generation and slots, "
                   "per stage a turn's seconds and the turns that fit; agents/capacity.py); empty in H-H",
    "session_budget": "USD, agent sessions",
    "stage_limits": "seconds per stage",
    "rounds_per_game": "rounds played in each game", "message_max_chars": "longest chat message, characters",
    "payoff_table": '`{"AA": [own, associate], "AB": …, "BA": …, "BB": …}` (own choice first): the payoffs the '
                    "session ran with, its experiment's (the pages computed its points from this record)",
    "choices": "the choices' ids as the data record them, `[\"A\", \"B\"]` (how each was shown: the experiment's "
               "`game.choices` labels, in `experiment`'s text)",
    "cooperative_choice": "the choice counted as cooperation (the paper: `A`); empty: the game names none",
    "answer_scales": "the questionnaires' scales: `norm_intervals` (Q1, percent: the experiment's; `[]` when it asks no "
                     "norm estimate), `likert` (Q2-Q4, lowest and highest), "
                     "`llm_familiarity_levels` (Q5), `svo_steps` (Q6); the data package's allowed values come from "
                     "these, `payoff_table` and `choices`",
    "payment": "`participation_fee`, `currency_per_point`, `norm_bonus`, `currency`",
    "created_at": "epoch seconds: the session's creation (when its record was frozen)",
    "started_at": "epoch seconds: first page completed (oTree's page-time records)",
    "ended_at": "epoch seconds: last page completed",
    "exported_at": "epoch seconds: the export was written",
    "differs_at_export": "JSON form only (the CSV has the column `value_at_export`): `{key: today's value}` for "
                         "every frozen key that today's code and environment would record differently",
}
MANIFEST = {
    "session_code": SESSION_KEYS["session_code"],
    "key": _c("manifest entry (docs/DATA.md 'manifest')", enum=tuple(k for k in MANIFEST_KEYS if k != "differs_at_export")),
    "value": _c("the entry's value as frozen at session creation, JSON-encoded"),
    "value_at_export": _c("empty, or (JSON) what today's code and environment would record instead"),
}

INTERVENTIONS = {
    "session_code": SESSION_KEYS["session_code"],
    "at": _c("when the experimenter's action was carried out", "number", EPOCH),
    "who": _c("oTree's admin user name of the experimenter (`anonymous` only on a server without oTree's admin "
              "login, OTREE_AUTH_LEVEL unset)"),
    "action": _c("advance: the participant's page submitted as a timeout (oTree's own advance); mark_dropped: "
                 "the participant marked dropped (the stand-in takes over); message: a text popped up on their "
                 "page; pause / resume: the session", enum=("advance", "mark_dropped", "message", "pause", "resume")),
    "participant_code": _c("the participant acted on; empty for pause and resume"),
    "detail": _c("what, as JSON: advance `{page_before, page_after}` (each `{app, page, round, index, finished}`); "
                 "mark_dropped `{page, reason}`; message `{text, page}`; pause `{paused_at}`; resume "
                 "`{paused_at, seconds, page_deadlines, worker_tasks, turns_postponed, turns_redone}` (the pause's "
                 "length and the deadlines moved by it)", "object"),
    "dismissed_at": _c("message: when the participant closed it (empty: not yet); empty for other actions",
                       "number", EPOCH),
}

TABLES = {
    "decisions": Table("decisions", "One row per decision of a human participant (and of an agent).", DECISIONS),
    "messages": Table("messages", "One row per chat message (WC game only).", MESSAGES),
    "participants": Table("participants", "One row per human participant: quiz, questionnaires, norms and payment.",
                          PARTICIPANTS),
    "llm_calls": Table("llm_calls", "One row per model call (agent treatments).", LLM_CALLS),
    "quiz_attempts": Table("quiz_attempts", "One row per quiz submission, right or wrong.", QUIZ_ATTEMPTS, DIGITS),
    "manifest": Table("manifest", "How the session was run and by what software, one row per entry.", MANIFEST),
    "interventions": Table("interventions", "One row per action of the experimenter on the dashboard.",
                           INTERVENTIONS),
}
# Custom export functions (app, function) -> table.
CUSTOM_EXPORTS = {
    ("payment", "custom_export"): "participants",
    ("payment", "custom_export_decisions"): "decisions",
    ("payment", "custom_export_messages"): "messages",
    ("payment", "custom_export_llm_calls"): "llm_calls",
    ("payment", "custom_export_manifest"): "manifest",
    ("payment", "custom_export_interventions"): "interventions",
    ("instructions", "custom_export"): "quiz_attempts",
}
