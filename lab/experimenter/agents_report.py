"""The experimenter's agents page (oTree's admin report of a game app): per agent what it is
doing, its latest message and calls; the session's spending and recent fallbacks; the model
check's grammar and capacity; the "Test model" button."""

from __future__ import annotations

import re
import time

import protocol
from agents.types import TurnKind, TurnStatus
from lab import agent_runtime as agents
from lab.agent_runtime import model_probe
from lab.experimenter.dashboard import model_check_details
from lab.base.session_game import frozen_experiment
from lab.base.session_settings import params

# An agent must never say it is a machine (SI Note 5); these betray it in English, Chinese or German.
AI_REVEAL = re.compile(
    r"\b(AI|A\.I\.|artificial intelligence|language model|LLM|chatbot|assistant|GPT|bot)\b"
    r"|人工智能|语言模型|聊天机器人|机器人|我是AI|作为AI|助手"
    r"|\b(KI|künstliche[nrs]? Intelligenz|Sprachmodell\w*|Assistent\w*|Roboter)\b",
    re.IGNORECASE,
)
# Chinese: two characters ~ one word; a Latin word may have accented letters (German "Schöne" is one)
WORD = re.compile(r"[A-Za-z0-9'’À-ÖØ-öø-ÿ-]+|[\u3400-\u9fff]{1,2}")


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


# The agents page warns when more than this share of the session's last turns fell back.
FALLBACK_WARNING_SHARE = 0.2
FALLBACK_WARNING_TURNS = 20


def admin_report(subsession, tables: agents.GameTables) -> dict:
    """Per agent: what it is doing, its latest message, its calls; the session's spending; the
    share of recent fallbacks; the "Test model" button and its last results."""
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
    model_probe.TEST_TARGETS[session.code] = dict(config=config, language=agents.agent_language(p.language),
                                                  with_chat=tables.with_chat, experiment=frozen_experiment(session))
    settled = sorted((t for ts in turns_by_agent.values() for t in ts if t.status != agents.RUNNING),
                     key=lambda t: getattr(t, "finished_at") or 0)[-FALLBACK_WARNING_TURNS:]
    recent_fallbacks = [t for t in settled if t.status == TurnStatus.FALLBACK.value]
    share = len(recent_fallbacks) / len(settled) if settled else 0.0
    reasons: dict[str, int] = {}
    for t in recent_fallbacks:
        reason = getattr(t, "fallback_reason") or "unknown"
        reasons[reason] = reasons.get(reason, 0) + 1
    check = model_check_details(session)  # the grammar and the server's capacity, as the check found them
    return dict(
        fallback_warning=share > FALLBACK_WARNING_SHARE,
        fallback_share=f"{share:.0%}",
        fallback_recent=len(settled),
        fallback_reasons=", ".join(f"{reason} ({n})" for reason, n in sorted(reasons.items(), key=lambda x: -x[1])),
        fallback_threshold=f"{FALLBACK_WARNING_SHARE:.0%}",
        model_test=model_probe.MODEL_TESTS.get(session.code),
        test_model_url=model_probe.TEST_MODEL_PATH + session.code,
        simulated=config.provider == "simulated",
        memory=config.memory,
        context_window=config.resolved_context_window() or "unknown",
        with_agents=True,
        treatment=p.treatment,
        persona=p.associate_type,
        persona_prompt_name=frozen_experiment(session).persona_prompt_name(p.associate_type),
        agents=agents_rows,
        model=f"{config.provider} / {config.model}",
        spent=f"{spent:.4f}",
        budget="none" if limit is None else f"{limit:.2f}",
        budget_exhausted=limit is not None and spent >= limit,
        warnings_total=sum(bool(row["warnings"]) for row in agents_rows),
        **{f"model_{key}": value for key, value in check.items()},
        model_capacity_class="text-muted" if check["capacity_verdict"] == "fits" else "text-danger",
    )

