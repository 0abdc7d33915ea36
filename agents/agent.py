"""The persona agent of SI Note 5: one object per agent seat, three turns per round.

The agent holds its persona, its model and its own conversation across rounds (told it meets a
new human each round); its decision prompt lists its past rounds and running total as the
paper's does. Each turn takes an absolute deadline (``time.monotonic()``, the stage limit) and
returns a ``TurnResult`` by then, never raising: a malformed reply is re-asked once if time
remains; otherwise the turn falls back as a late human's would (no message / a seeded random
choice), flagged, and the agent remembers the fallback so its memory matches what the lab used.

State (conversation, rounds, turn summaries) is plain data: ``to_state`` / ``from_state``. The
full call records are in each ``TurnResult.calls`` for the caller to store; they are not kept in
the state, which would otherwise grow with every prompt re-sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
import random
import time
import uuid
from typing import Any, Optional

import protocol

from . import prompts
from .models import call_scope, redact
from .parsing import parse_choice, parse_message
from .types import CallRecord, CallStatus, ChatMessage, LanguageModel, TurnKind, TurnResult, TurnStatus

STATE_VERSION = 1
# The turn hands its result back this long before the deadline (bookkeeping, the caller's await).
TURN_MARGIN_SECONDS = 0.05
# A re-ask is only worth sending with this much time left.
MIN_REASK_SECONDS = 1.0
REASKABLE = {CallStatus.PARSE_ERROR.value, CallStatus.LENGTH.value, CallStatus.REFUSAL.value}
MEMORY_SCOPES = ("game", "round")
EMPTY_REPLY = "(no reply)"


def _fallback_note(kind: str, choice: Optional[str]) -> str:
    """What the agent remembers of a turn it did not answer in time (its history needs a reply)."""
    if kind == TurnKind.DECISION.value:
        return f"(I made no choice in time; the system chose {choice} for me at random.) I DECIDE TO CHOOSE [{choice}]"
    return "(I sent no message in time.)"


class PersonaAgent:
    """An LLM agent with a cooperative, fair or selfish persona (see the module doc)."""

    def __init__(self, agent_id: str, persona: str, model: LanguageModel, *, language: str = "zh",
                 with_communication: bool = True, seed: Optional[int] = None, memory: str = "game") -> None:
        if persona not in prompts.PERSONA_NAMES:
            raise ValueError(f"persona must be one of {tuple(prompts.PERSONA_NAMES)}, not {persona!r}")
        if language not in prompts.LANGUAGES:
            raise ValueError(f"language must be one of {prompts.LANGUAGES}, not {language!r}")
        if memory not in MEMORY_SCOPES:
            raise ValueError(f"memory must be one of {MEMORY_SCOPES}, not {memory!r}")
        self.agent_id = agent_id
        self.persona = persona
        self.model = model
        self.language = language
        self.with_communication = with_communication
        self.seed = seed
        # "game": every earlier turn is re-sent (a chat across rounds); "round": only this round's
        # turns, past rounds reaching the model through the decision prompt's history lines.
        self.memory = memory
        self.conversation: list[dict[str, Any]] = []  # {"round", "role", "content"}
        self.rounds: dict[int, dict[str, Any]] = {}
        self.turns: list[dict[str, Any]] = []  # TurnResult summaries, without the call records

    # --- the three turns -----------------------------------------------------------------------
    async def message_1(self, round_number: int, *, deadline: Optional[float]) -> TurnResult:
        if not self.with_communication:
            return self._misuse(round_number, TurnKind.MESSAGE_1)
        prompt = prompts.message_1_prompt(round_number, self.persona, self.language)
        result = await self._turn(round_number, TurnKind.MESSAGE_1.value, prompt, deadline)
        self._round(round_number)["message_1"] = result.text
        return result

    async def message_2(self, round_number: int, *, associate_message_1: Optional[str],
                        deadline: Optional[float]) -> TurnResult:
        if not self.with_communication:
            return self._misuse(round_number, TurnKind.MESSAGE_2)
        state = self._round(round_number)
        state["associate_message_1"] = associate_message_1
        prompt = prompts.message_2_prompt(state.get("message_1"), associate_message_1, self.language)
        result = await self._turn(round_number, TurnKind.MESSAGE_2.value, prompt, deadline)
        state["message_2"] = result.text
        return result

    async def decide(self, round_number: int, *, associate_message_2: Optional[str] = None,
                     deadline: Optional[float]) -> TurnResult:
        state = self._round(round_number)
        past = self.past_rounds(before=round_number)
        if self.with_communication:
            state["associate_message_2"] = associate_message_2
            prompt = prompts.decision_prompt(
                round_number, self.persona, history=past, total_payoff=sum(p.own_payoff for p in past),
                own_message_1=state.get("message_1"), associate_message_1=state.get("associate_message_1"),
                own_message_2=state.get("message_2"), associate_message_2=associate_message_2)
        else:
            prompt = prompts.decision_prompt(round_number, self.persona, history=past,
                                             total_payoff=sum(p.own_payoff for p in past), with_communication=False)
        result = await self._turn(round_number, TurnKind.DECISION.value, prompt, deadline)
        state["choice"] = result.choice
        return result

    def record_outcome(self, round_number: int, own_choice: str, associate_choice: str) -> None:
        """The round's result as the lab settled it; shown in later decision prompts."""
        if own_choice not in protocol.CHOICES or associate_choice not in protocol.CHOICES:
            raise ValueError(f"choices must be in {protocol.CHOICES}")
        own_payoff, associate_payoff = protocol.PAYOFFS[(own_choice, associate_choice)]
        self._round(round_number).update(choice=own_choice, associate_choice=associate_choice,
                                         payoff=own_payoff, associate_payoff=associate_payoff)

    def past_rounds(self, *, before: Optional[int] = None) -> list[prompts.PastRound]:
        return [
            prompts.PastRound(number, r["choice"], r["associate_choice"], r["payoff"], r["associate_payoff"])
            for number, r in sorted(self.rounds.items())
            if "payoff" in r and (before is None or number < before)
        ]

    @property
    def total_payoff(self) -> int:
        return sum(p.own_payoff for p in self.past_rounds())

    # --- one turn ------------------------------------------------------------------------------
    async def _turn(self, round_number: int, kind: str, prompt: str, deadline: Optional[float]) -> TurnResult:
        started = time.time()
        model_deadline = math.inf if deadline is None else deadline - TURN_MARGIN_SECONDS
        is_decision = kind == TurnKind.DECISION.value
        sent = [ChatMessage("system", self._system_prompt()), *self._context(round_number), ChatMessage("user", prompt)]
        exchange = [{"role": "user", "content": prompt}]  # what joins the conversation
        calls: list[CallRecord] = []
        status, parsed = TurnStatus.FALLBACK.value, None
        try:
            record = await self._call(sent, round_number, kind, 1, model_deadline)
            calls.append(record)
            if record.status == CallStatus.OK.value:
                status, parsed = TurnStatus.OK.value, record.parsed
                exchange.append({"role": "assistant", "content": record.raw_reply})
            elif record.status in REASKABLE and model_deadline - time.monotonic() >= MIN_REASK_SECONDS:
                reask = prompts.reask_prompt(is_decision)
                bad_reply = record.raw_reply or EMPTY_REPLY
                exchange += [{"role": "assistant", "content": bad_reply}, {"role": "user", "content": reask}]
                sent += [ChatMessage("assistant", bad_reply), ChatMessage("user", reask)]
                record = await self._call(sent, round_number, kind, 2, model_deadline)
                calls.append(record)
                if record.status == CallStatus.OK.value:
                    status, parsed = TurnStatus.REASKED.value, record.parsed
                    exchange.append({"role": "assistant", "content": record.raw_reply})
        except asyncio.CancelledError:
            # The caller gave up (e.g. shutdown): remember the turn as a fallback, then let go.
            self._finish(round_number, kind, started, calls, exchange, None, CallStatus.CANCELLED.value)
            raise
        except Exception as error:  # never raise out of a turn: a bug below is a fallback, on record
            calls.append(self._record(sent, round_number, kind, len(calls) + 1, None, None,
                                      CallStatus.PROVIDER_ERROR.value, redact(f"{type(error).__name__}: {error}")))
        if status == TurnStatus.FALLBACK.value:
            reason = calls[-1].status if calls else CallStatus.TIMEOUT.value
            return self._finish(round_number, kind, started, calls, exchange, None, reason)
        return self._finish(round_number, kind, started, calls, exchange, parsed, None, status)

    async def _call(self, sent: list[ChatMessage], round_number: int, kind: str, attempt: int,
                    deadline: float) -> CallRecord:
        with call_scope(f"{self.agent_id}|{self.seed}|r{round_number}|{kind}|{attempt}"):
            reply = await self.model.complete(list(sent), deadline=deadline)
        status, parsed = reply.status, None
        if reply.status == CallStatus.OK.value:
            parsed = parse_choice(reply.text) if kind == TurnKind.DECISION.value else parse_message(reply.text)
            if parsed is None:
                status = CallStatus.PARSE_ERROR.value
        record = self._record(sent, round_number, kind, attempt, reply.text, parsed, status, reply.error)
        record.input_tokens, record.output_tokens, record.cost = reply.input_tokens, reply.output_tokens, reply.cost
        record.time_sent, record.time_first_byte, record.time_done = reply.time_sent, reply.time_first_byte, reply.time_done
        record.retries = reply.retries
        return record

    def _record(self, sent: list[ChatMessage], round_number: int, kind: str, attempt: int, raw: Optional[str],
                parsed: Optional[str], status: str, error: Optional[str]) -> CallRecord:
        settings = self.model.settings
        return CallRecord(
            call_id=uuid.uuid4().hex, agent_id=self.agent_id, round_number=round_number, turn=kind,
            attempt=attempt, provider=settings.provider, model=settings.model,
            parameters={"temperature": settings.temperature, "max_tokens": settings.max_tokens,
                        "seed": settings.seed, "persona": self.persona, "language": self.language,
                        "with_communication": self.with_communication, "memory": self.memory},
            prompt_version=prompts.prompt_version(),
            messages=[{"role": m.role, "content": m.content} for m in sent],
            raw_reply=raw, parsed=parsed, status=status, error=error,
            simulated=settings.provider == "simulated",
        )

    def _finish(self, round_number: int, kind: str, started: float, calls: list[CallRecord],
                exchange: list[dict[str, str]], parsed: Optional[str], fallback_reason: Optional[str],
                status: str = TurnStatus.FALLBACK.value) -> TurnResult:
        is_decision = kind == TurnKind.DECISION.value
        if fallback_reason is not None:
            parsed = self._random_choice(round_number) if is_decision else None
            exchange.append({"role": "assistant", "content": _fallback_note(kind, parsed)})
        self.conversation += [{"round": round_number, **entry} for entry in exchange]
        result = TurnResult(
            agent_id=self.agent_id, round_number=round_number, turn=kind, status=status,
            text=None if is_decision else parsed, choice=parsed if is_decision else None,
            fallback_reason=fallback_reason, calls=calls, started_at=started, finished_at=time.time(),
        )
        self.turns.append({f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "calls"})
        return result

    def _random_choice(self, round_number: int) -> str:
        """A late human gets a random choice; ours is seeded per agent and round when a seed is set."""
        if self.seed is None:
            return random.SystemRandom().choice(protocol.CHOICES)
        digest = hashlib.sha256(f"{self.seed}|{self.agent_id}|{round_number}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big")).choice(protocol.CHOICES)

    def _misuse(self, round_number: int, kind: TurnKind) -> TurnResult:
        """A message turn asked of an agent in a game without communication: a flagged no-op."""
        now = time.time()
        return TurnResult(agent_id=self.agent_id, round_number=round_number, turn=kind.value,
                          status=TurnStatus.FALLBACK.value, fallback_reason=CallStatus.CONFIG_ERROR.value,
                          started_at=now, finished_at=now)

    def _system_prompt(self) -> str:
        return prompts.system_prompt(self.persona, self.language, with_communication=self.with_communication)

    def _context(self, round_number: int) -> list[ChatMessage]:
        return [ChatMessage(entry["role"], entry["content"]) for entry in self.conversation
                if self.memory == "game" or entry["round"] == round_number]

    def _round(self, round_number: int) -> dict[str, Any]:
        return self.rounds.setdefault(round_number, {})

    # --- state ---------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Plain, JSON-serialisable data; ``from_state`` with a model resumes the agent exactly."""
        return {
            "version": STATE_VERSION,
            "agent_id": self.agent_id, "persona": self.persona, "language": self.language,
            "with_communication": self.with_communication, "seed": self.seed, "memory": self.memory,
            "conversation": [dict(entry) for entry in self.conversation],
            "rounds": {str(number): dict(r) for number, r in self.rounds.items()},
            "turns": [dict(t) for t in self.turns],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], model: LanguageModel) -> "PersonaAgent":
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"agent state version {state.get('version')!r} is not {STATE_VERSION}")
        agent = cls(state["agent_id"], state["persona"], model, language=state["language"],
                    with_communication=state["with_communication"], seed=state["seed"], memory=state["memory"])
        agent.conversation = [dict(entry) for entry in state["conversation"]]
        agent.rounds = {int(number): dict(r) for number, r in state["rounds"].items()}
        agent.turns = [dict(t) for t in state["turns"]]
        return agent
