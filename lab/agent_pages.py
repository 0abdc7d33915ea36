"""The pages, exports and admin report that put agents into a game app.

``wait_page`` builds an app's AgentWait pages: the human waits there only while the agent's
turn runs, never past the turn's deadline. The page asks every ~0.7 s whether the turn has an
answer (a plain live method: a dictionary lookup, and the turn's rows once it has one) and
moves on at once when it does; the page settles the turn when it is submitted (by the
browser, or by oTree's timeout worker when the tab is closed).

Not an ``async`` live method that awaits the turn: oTree runs those outside its global lock on
the one database connection every request shares, and their commits raced the page requests'
(measured with 36 participants: "cannot commit - no transaction is active", then a round's
payoffs lost in the partial commit).
"""

from __future__ import annotations

import re
import time

from otree.api import Page

import protocol
from agents.types import TurnKind, TurnStatus
from lab import agent_runtime as agents
from lab import game as lab_game
from lab.pages import TranslatedTimer, texts_for
from lab.session_settings import GAME_APPS, params

# An agent must never say it is a machine (SI Note 5); these betray it in either language.
AI_REVEAL = re.compile(
    r"\b(AI|A\.I\.|artificial intelligence|language model|LLM|chatbot|assistant|GPT|bot)\b"
    r"|人工智能|语言模型|聊天机器人|机器人|我是AI|作为AI|助手",
    re.IGNORECASE,
)
WORD = re.compile(r"[A-Za-z0-9'’-]+|[\u3400-\u9fff]{1,2}")  # Chinese: two characters ~ one word


def word_count(text: str) -> int:
    return len(WORD.findall(text or ""))


def message_warnings(text: str | None) -> list[str]:
    if not text:
        return []
    warnings = []
    if AI_REVEAL.search(text):
        warnings.append("reveals it is an AI")
    if word_count(text) > protocol.AGENT_MESSAGE_MAX_WORDS:
        warnings.append(f"over {protocol.AGENT_MESSAGE_MAX_WORDS} words ({word_count(text)})")
    return warnings


# --- The wait page -------------------------------------------------------------------------------
def wait_page(tables: agents.GameTables, kind: str, *, then, name: str):
    """A page that waits for the agent's ``kind`` turn, then starts ``then`` (a turn kind) or
    calls it (a function of the player)."""

    class AgentWait(TranslatedTimer, Page):
        template_name = "lab/AgentWait.html"

        @staticmethod
        def is_displayed(player):
            return lab_game.is_played(player) and player.associate_kind == "agent"

        @staticmethod
        def get_timeout_seconds(player):
            return agents.wait_timeout_seconds(player, tables, kind)

        @staticmethod
        def vars_for_template(player):
            variables = lab_game.round_vars(player, tables.game)
            variables["answered"] = not agents.is_running(player, tables, kind)
            return variables

        @staticmethod
        def live_method(player, data):
            return {player.id_in_group: {"ready": not agents.is_running(player, tables, kind)}}

        @staticmethod
        def error_message(player, values):
            if agents.is_running(player, tables, kind):
                return texts_for(player)["game_agent_wait"]

        @staticmethod
        def before_next_page(player, timeout_happened):
            agents.settle_or_fallback(player, tables, kind)
            if callable(then):
                then(player)
            else:
                agents.ensure_turn(player, tables, then)

    AgentWait.__name__ = AgentWait.__qualname__ = name
    AgentWait.__module__ = tables.AgentSeat.__module__  # oTree finds a page's app by its module
    return AgentWait


# --- Exports -----------------------------------------------------------------------------------
def decision_rows(player, tables: agents.GameTables):
    """The human's decision row, and the agent's when the associate was one (docs/DATA.md)."""
    if not player.field_maybe_none("choice"):
        return
    yield lab_game.decision_row(player, tables.game)
    if player.associate_kind != "agent":
        return
    turn = agents.find_turn(player, tables, TurnKind.DECISION.value)
    if turn is None or getattr(turn, "choice") is None:
        return
    p = params(player.session)
    agent_points, human_points = protocol.PAYOFFS[(turn.choice, player.choice)]
    yield [
        *lab_game.session_keys(player.session), tables.game, p.game_index(tables.game), player.round_number,
        turn.agent_id, "agent", p.associate_type, player.participant.code, "human",
        lab_game.conversation_id(player, tables.game), turn.choice,
        lab_game.csv_bool(turn.status == TurnStatus.FALLBACK.value), player.choice, agent_points, human_points,
        turn.finished_at,
    ]


LLM_CALL_COLUMNS = [
    "session_code", "treatment", "associate_type", "label_setting", "game_order", "source", "game",
    "participant_code", *[name for name in ("call_id", "agent_id", "round_number", "turn", "attempt", "provider",
                                            "model", "parameters", "prompt_version", "messages", "raw_reply",
                                            "parsed", "status", "error", "input_tokens", "output_tokens", "cost",
                                            "time_sent", "time_first_byte", "time_done", "retries", "simulated")],
]


def llm_call_rows(players):
    """One row per model call of the sessions of ``players`` (docs/DATA.md 'llm_calls')."""
    from otree.common import get_models_module

    yield LLM_CALL_COLUMNS
    sessions = {player.session.code: player.session for player in players}
    for code, session in sessions.items():
        for game, app in GAME_APPS.items():
            module = get_models_module(app)
            for call in module.LlmCall.objects_filter(session_code=code).order_by("id"):
                values = [getattr(call, column) for column in LLM_CALL_COLUMNS[8:]]
                values[-1] = lab_game.csv_bool(values[-1])
                yield [*lab_game.session_keys(session), game, call.player.participant.code, *values]


# --- The experimenter's view -----------------------------------------------------------------
def admin_report(subsession, tables: agents.GameTables) -> dict:
    """Per agent: what it is doing, its latest message, its calls; the session's spending."""
    session = subsession.session
    p = params(session)
    if not p.with_agents:
        return dict(with_agents=False)
    first_round = subsession.in_round(1)
    seats = sorted(tables.AgentSeat.filter(subsession=first_round), key=lambda s: s.seat)
    rounds = subsession.in_rounds(1, p.rounds_per_game)
    players = [player for round_subsession in rounds for player in round_subsession.get_players()]
    turns_by_agent: dict[str, list] = {}
    calls_by_agent: dict[str, list] = {}
    for player in players:
        for turn in tables.AgentTurn.filter(player=player):
            turns_by_agent.setdefault(turn.agent_id, []).append(turn)
        for call in tables.LlmCall.filter(player=player):
            calls_by_agent.setdefault(call.agent_id, []).append(call)
    agents_rows = []
    now = time.time()
    for seat in seats:
        turns = sorted(turns_by_agent.get(seat.agent_id, []), key=lambda t: t.started_at)
        calls = sorted(calls_by_agent.get(seat.agent_id, []), key=lambda c: c.time_sent or 0)
        latest = turns[-1] if turns else None
        messages = [t for t in turns if t.kind != TurnKind.DECISION.value and getattr(t, "text")]
        latest_message = messages[-1].text if messages else ""
        if latest is None:
            state = "idle"
        elif latest.status == agents.RUNNING:
            state = f"thinking ({latest.kind}, {max(0, latest.deadline_at - now):.0f} s left)"
        elif latest.status == TurnStatus.FALLBACK.value:
            state = f"fallback ({latest.kind}: {getattr(latest, 'fallback_reason')})"
        else:
            state = f"answered ({latest.kind})"
        agents_rows.append(dict(
            agent_id=seat.agent_id,
            state=state,
            latest_message=latest_message,
            warnings=", ".join(w for t in messages for w in message_warnings(t.text)),
            calls=[dict(
                round=c.round_number, turn=c.turn, status=c.status,
                latency="" if getattr(c, "time_done") is None or getattr(c, "time_sent") is None
                else f"{c.time_done - c.time_sent:.2f} s",
                tokens=f"{getattr(c, 'input_tokens') or 0}/{getattr(c, 'output_tokens') or 0}",
            ) for c in calls[-6:]],
            cost=sum(getattr(c, "cost") or 0.0 for c in calls),
            fallbacks=sum(t.status == TurnStatus.FALLBACK.value for t in turns),
        ))
    limit = agents.budget_limit(session)
    spent = agents.session_spent(session)
    config = agents.model_config(session)
    return dict(
        with_agents=True,
        agents=agents_rows,
        model=f"{config.provider} / {config.model}",
        spent=f"{spent:.4f}",
        budget="none" if limit is None else f"{limit:.2f}",
        budget_exhausted=limit is not None and spent >= limit,
        warnings_total=sum(bool(row["warnings"]) for row in agents_rows),
    )

