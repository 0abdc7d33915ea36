"""The persona agent of SI Note 5: one object per agent seat, three turns per round.

The agent holds its persona, its model and its own conversation across rounds (told it meets a
new human each round); its decision prompt lists its past rounds and running total as the
paper's does. Each turn takes an absolute deadline (``time.monotonic()``, the stage limit) and
returns a ``TurnResult`` by then, never raising: a malformed reply is re-asked (``reasks`` times,
once by default) while time remains; otherwise the turn falls back as a late human's would (no
message / a seeded random choice), flagged, and the agent remembers the fallback so its memory
matches what the lab used.

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
import re
import time
import uuid
from typing import Any, Optional

import experiment_design as ed
import protocol

from . import grammars, prompts
from .models import CallOptions, call_charges, call_scope, redact
from .parsing import (choice_problem, cut_message, grammar_choice, grammar_message, has_han, is_refusal,
                      message_problem, parse_choice, parse_message, split_reasoning)
from .tokens import count_message_tokens
from .types import CallRecord, CallStatus, ChatMessage, LanguageModel, TurnKind, TurnResult, TurnStatus

STATE_VERSION = 1
# The turn hands its result back this long before the deadline (bookkeeping, the caller's
# await, a loaded machine: a 5 s decision once came back at 5.56 s with a 0.05 s margin): a tenth
# of the time the turn has, between these bounds.
TURN_MARGIN_SECONDS = 0.05
MAX_TURN_MARGIN_SECONDS = 0.5
# A re-ask is only worth sending with this much time left.
MIN_REASK_SECONDS = 1.0
# The re-ask samples a little hotter than the first ask (when the session sets a temperature) and
# with the next seed (when it sets one): with the problem line appended, never the same request.
REASK_TEMPERATURE_STEP = 0.2
MAX_TEMPERATURE = 2.0
REASKABLE = {CallStatus.PARSE_ERROR.value, CallStatus.LENGTH.value, CallStatus.REFUSAL.value}
MEMORY_SCOPES = ("round", "game")
PENDING = "pending"  # a call record written before sending (CallJournal.started), not yet answered
EMPTY_REPLY = "(no reply)"

_STEP_LINE = re.compile(r"^STEP \d+:", re.MULTILINE)


def _steps_asked(prompt: str) -> int:
    """How many reasoning steps the prompt asks for (its ``STEP n:`` lines)."""
    return len(_STEP_LINE.findall(prompt))


def _complete_under_grammar(settings, options: CallOptions, text: Optional[str]) -> bool:
    """A reply sent with the paper's format as its grammar that reached the grammar's end."""
    if getattr(settings, "grammar", None) is None or options.shape is None or not text:
        return False
    return text.rstrip().endswith(">" if options.shape.kind == "message"
                                  else tuple(f"[{label}]" for label in options.shape.choices))


def _fallback_note(kind: str, choice: Optional[str]) -> str:
    """What the agent remembers of a turn it did not answer in time (its history needs a reply)."""
    if kind == TurnKind.DECISION.value:
        return f"(I made no choice in time; the system chose {choice} for me at random.) I DECIDE TO CHOOSE [{choice}]"
    return "(I sent no message in time.)"


def _journal(method, record: CallRecord) -> None:
    try:
        method(record)
    except Exception:  # the journal is a safety net; a turn never fails on it
        pass


class CallJournal:
    """Where a call's record goes before it is sent and again once it is complete (crash safety).

    ``started`` gets the record with status ``pending`` (messages, prompt tokens, time sent);
    ``finished`` the same ``call_id`` complete. The default does nothing; the lab's writes to disk.
    Both must be quick and must not raise (an error is swallowed: a turn never fails on its journal).
    """

    def started(self, record: CallRecord) -> None:
        pass

    def finished(self, record: CallRecord) -> None:
        pass


class PersonaAgent:
    """An LLM agent with a cooperative, fair or selfish persona (see the module doc)."""

    def __init__(self, agent_id: str, persona: str, model: LanguageModel, *, language: str = "zh",
                 with_communication: bool = True, seed: Optional[int] = None, memory: Optional[str] = None,
                 message_max_chars: int = protocol.MESSAGE_MAX_CHARS, journal: Optional[CallJournal] = None,
                 experiment: Optional[ed.Experiment] = None) -> None:
        if memory is None:  # the model config's (ModelConfig.memory), else the paper's "round"
            memory = getattr(getattr(model, "settings", None), "memory", None) or "round"
        # The experiment its prompts, payoffs and choices come from (None: the paper's).
        self.experiment = prompts.check(persona, language, experiment)
        # The choices as its prompts name them and it answers with them (id -> label in its language).
        self.choice_labels = prompts.choice_labels(self.experiment, language)
        if memory not in MEMORY_SCOPES:
            raise ValueError(f"memory must be one of {MEMORY_SCOPES}, not {memory!r}")
        self.agent_id = agent_id
        self.persona = persona
        self.model = model
        self.language = language
        self.with_communication = with_communication
        self.chat_exchanges = prompts.game_variables(self.experiment)["chat_exchanges"] if with_communication else 0
        self.seed = seed
        # "game": every earlier turn is re-sent (a chat across rounds); "round": only this round's
        # turns, past rounds reaching the model through the decision prompt's history lines.
        self.memory = memory
        self.message_max_chars = message_max_chars
        self.journal = journal or CallJournal()
        self.conversation: list[dict[str, Any]] = []  # {"round", "role", "content"}
        self.rounds: dict[int, dict[str, Any]] = {}
        self.turns: list[dict[str, Any]] = []  # TurnResult summaries, without the call records

    # --- the three turns -----------------------------------------------------------------------
    async def message_1(self, round_number: int, *, deadline: Optional[float]) -> TurnResult:
        if not self.with_communication:
            return self._misuse(round_number, TurnKind.MESSAGE_1)
        prompt = prompts.message_1_prompt(round_number, self.persona, self.language, experiment=self.experiment)
        result = await self._turn(round_number, TurnKind.MESSAGE_1.value, prompt, deadline)
        self._round(round_number)["message_1"] = result.text
        return result

    async def message_2(self, round_number: int, *, associate_message_1: Optional[str],
                        deadline: Optional[float]) -> TurnResult:
        if self.chat_exchanges < 2:
            return self._misuse(round_number, TurnKind.MESSAGE_2)
        state = self._round(round_number)
        state["associate_message_1"] = associate_message_1
        prompt = prompts.message_2_prompt(state.get("message_1"), associate_message_1, self.language,
                                          experiment=self.experiment)
        result = await self._turn(round_number, TurnKind.MESSAGE_2.value, prompt, deadline)
        state["message_2"] = result.text
        return result

    async def decide(self, round_number: int, *, associate_message_2: Optional[str] = None,
                     deadline: Optional[float], associate_message_1: Optional[str] = None) -> TurnResult:
        """``associate_message_1``: the associate's message where one exchange is the whole chat."""
        state = self._round(round_number)
        past = self.past_rounds(before=round_number)
        if self.with_communication:
            if self.chat_exchanges == 1:
                state["associate_message_1"] = associate_message_1
            state["associate_message_2"] = associate_message_2
            prompt = prompts.decision_prompt(
                round_number, self.persona, history=past, total_payoff=sum(p.own_payoff for p in past),
                own_message_1=state.get("message_1"), associate_message_1=state.get("associate_message_1"),
                own_message_2=state.get("message_2"), associate_message_2=associate_message_2,
                experiment=self.experiment, language=self.language)
        else:
            prompt = prompts.decision_prompt(round_number, self.persona, history=past, experiment=self.experiment,
                                             total_payoff=sum(p.own_payoff for p in past), with_communication=False,
                                             language=self.language)
        result = await self._turn(round_number, TurnKind.DECISION.value, prompt, deadline)
        state["choice"] = result.choice
        return result

    def record_outcome(self, round_number: int, own_choice: str, associate_choice: str) -> None:
        """The round's result as the lab settled it; shown in later decision prompts."""
        if own_choice not in self.experiment.choice_ids or associate_choice not in self.experiment.choice_ids:
            raise ValueError(f"choices must be in {self.experiment.choice_ids}")
        own_payoff, associate_payoff = (prompts.points(p) for p in
                                        self.experiment.payoff_matrix[(own_choice, associate_choice)])
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
        if deadline is None:
            model_deadline = math.inf
        else:
            margin = min(MAX_TURN_MARGIN_SECONDS, max(TURN_MARGIN_SECONDS, 0.1 * (deadline - time.monotonic())))
            model_deadline = deadline - margin
        is_decision = kind == TurnKind.DECISION.value
        exchange = [{"role": "user", "content": prompt}]  # what joins the conversation
        calls: list[CallRecord] = []
        status, parsed = TurnStatus.FALLBACK.value, None
        turn_flags: list[str] = []
        try:
            fitted = self._fit([ChatMessage("user", prompt)], round_number)
            if isinstance(fitted, CallRecord):  # nothing could make it fit: refused, not sent
                fitted.round_number, fitted.turn = round_number, kind
                calls.append(fitted)
                return self._finish(round_number, kind, started, calls, exchange, None, fitted.status)
            sent, trimmed = fitted
            shape = grammars.OutputShape("decision" if is_decision else "message", _steps_asked(prompt),
                                         self.message_max_chars, chinese=self._writes_chinese() and not is_decision,
                                         choices=tuple(self.choice_labels.values()))
            record = await self._call(sent, round_number, kind, 1, model_deadline, trimmed,
                                      CallOptions(shape=shape))
            calls.append(record)
            if record.status == CallStatus.OK.value:
                status, parsed = TurnStatus.OK.value, record.parsed
                exchange.append({"role": "assistant", "content": record.raw_reply})
            reasks = getattr(self.model.settings, "reasks", 1)
            first_sent, first_trimmed = sent, trimmed
            while (status == TurnStatus.FALLBACK.value and record.status in REASKABLE and len(calls) <= reasks
                   and model_deadline - time.monotonic() >= MIN_REASK_SECONDS):
                too_long = "message_too_long" in record.flags
                if getattr(self.model.settings, "grammar", None) and not too_long:
                    # Under a grammar the server gives the reply its shape, so what was wrong is what
                    # the model chose to write, and a small model shown it writes it again (SmolLM2:
                    # the same echo three times). The re-ask is a new draw of the same prompt.
                    sent, trimmed = first_sent, first_trimmed
                    del exchange[1:]
                else:
                    # The re-ask shows the model its latest reply and what was wrong with it (not
                    # every earlier one: a small model copies its own mistakes back).
                    reask = prompts.reask_prompt(is_decision, too_long=too_long, max_chars=self.message_max_chars,
                                                 problem=self._problem(kind, record.status, record.raw_reply),
                                                 experiment=self.experiment, language=self.language)
                    bad_reply = record.raw_reply or EMPTY_REPLY
                    refit = self._fit([ChatMessage("user", prompt), ChatMessage("assistant", bad_reply),
                                       ChatMessage("user", reask)], round_number)
                    if isinstance(refit, CallRecord):
                        break
                    exchange[1:] = [{"role": "assistant", "content": bad_reply}, {"role": "user", "content": reask}]
                    sent, trimmed = refit
                record = await self._call(sent, round_number, kind, len(calls) + 1, model_deadline, trimmed,
                                          self._reask_options(shape, len(calls)))
                calls.append(record)
                if record.status == CallStatus.OK.value:
                    status, parsed = TurnStatus.REASKED.value, record.parsed
                    exchange.append({"role": "assistant", "content": record.raw_reply})
            if status == TurnStatus.FALLBACK.value and not is_decision:
                # An over-long message, not shortened by the re-ask: sent cut at a boundary, flagged.
                long_ones = [c for c in calls if "message_too_long" in c.flags and c.parsed]
                if long_ones:
                    status, parsed = TurnStatus.REASKED.value, cut_message(long_ones[-1].parsed,
                                                                             self.message_max_chars)
                    turn_flags.append("message_cut")
                    exchange.append({"role": "assistant", "content": f"<{parsed}>"})
            if parsed is not None and any("message_too_long" in c.flags for c in calls):
                turn_flags.insert(0, "message_too_long")
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
        return self._finish(round_number, kind, started, calls, exchange, parsed, None, status, ",".join(turn_flags))

    def _fit(self, turn_messages: list[ChatMessage], round_number: int):
        """(messages to send, earlier rounds dropped) within the model's window, or a refusal record.

        The window holds the prompt and ``max_tokens`` of reply. Earlier rounds' transcripts
        (memory "game") are dropped oldest first; what is left (system prompt, this round) must fit.
        """
        settings = self.model.settings
        window = getattr(settings, "context_window", None)
        system = ChatMessage("system", self._system_prompt())
        context = self._context(round_number)
        earlier_rounds = sorted({entry["round"] for entry in self.conversation if entry["round"] != round_number
                                 and self.memory == "game"})
        trimmed = 0
        while True:
            sent = [system, *context, *turn_messages]
            if window is None:
                return sent, trimmed
            tokens = count_message_tokens(sent, settings.provider)
            if tokens + settings.max_tokens <= window:
                return sent, trimmed
            if trimmed >= len(earlier_rounds):
                record = self._record(sent, round_number, "", 1, None, None, CallStatus.CONTEXT_OVERFLOW.value,
                                      f"the prompt ({tokens} tokens) and the reply limit (max_tokens "
                                      f"{settings.max_tokens}) do not fit the context window of {window} tokens "
                                      f"of {settings.model}; not sent")
                record.prompt_tokens, record.trimmed = tokens, trimmed
                now = time.time()
                record.time_sent = record.time_done = now
                return record
            trimmed += 1  # drop the oldest earlier round still sent
            kept = {round_number, *earlier_rounds[trimmed:]}
            context = [ChatMessage(e["role"], e["content"]) for e in self.conversation if e["round"] in kept]

    def _problem(self, kind: str, status: str, reply: Optional[str]) -> Optional[str]:
        """In a few words, why a reply could not be used (None: not a problem of the reply's text)."""
        if status == CallStatus.LENGTH.value:
            return f"it was cut off at the limit of {self.model.settings.max_tokens} tokens before it ended"
        if status not in (CallStatus.PARSE_ERROR.value, CallStatus.REFUSAL.value):
            return None
        if kind == TurnKind.DECISION.value:
            return choice_problem(reply, self._label_ids())
        return message_problem(reply, self.message_max_chars, chinese=self._writes_chinese())

    def _label_ids(self) -> dict[str, str]:
        """The choices' labels it answers with -> their ids (what the lab records)."""
        return {label: choice for choice, label in self.choice_labels.items()}

    def _writes_chinese(self) -> bool:
        """Its messages must be Chinese: it chats in Chinese and its model says so (llm_chinese_messages)."""
        return self.language == "zh" and getattr(self.model.settings, "chinese_messages", False)

    def _reask_options(self, shape: grammars.OutputShape, reask_number: int) -> CallOptions:
        settings = self.model.settings
        temperature = settings.temperature
        if temperature is not None:
            temperature = round(min(MAX_TEMPERATURE, temperature + REASK_TEMPERATURE_STEP * reask_number), 3)
        seed = None if settings.seed is None else settings.seed + reask_number
        return CallOptions(shape=shape, temperature=temperature, seed=seed)

    async def _call(self, sent: list[ChatMessage], round_number: int, kind: str, attempt: int,
                    deadline: float, trimmed: int = 0, options: CallOptions = CallOptions()) -> CallRecord:
        record = self._record(sent, round_number, kind, attempt, None, None, PENDING, None, options)
        record.prompt_tokens = count_message_tokens(sent, self.model.settings.provider)
        record.trimmed = trimmed
        record.time_sent = time.time()
        _journal(self.journal.started, record)
        try:
            with call_scope(f"{self.agent_id}|{self.seed}|r{round_number}|{kind}|{attempt}"), \
                    call_charges() as charges:
                reply = await self.model.complete(list(sent), deadline=deadline, options=options)
        except asyncio.CancelledError:
            record.status, record.time_done = CallStatus.CANCELLED.value, time.time()
            self._charged(record, charges)
            _journal(self.journal.finished, record)
            raise
        status, parsed, flags, error = reply.status, None, ["not_sent"] if reply.not_sent else [], reply.error
        shaped = _complete_under_grammar(self.model.settings, options, reply.text)
        if status == CallStatus.LENGTH.value and shaped:
            # The grammar's last character came with the last token allowed: the reply is whole.
            status, error = CallStatus.OK.value, None
            flags.append("complete_at_limit")
        answer, reasoning = split_reasoning(reply.text)
        reasoning = "\n".join(part for part in (reply.reasoning, reasoning) if part) or None
        if status == CallStatus.OK.value:
            if kind == TurnKind.DECISION.value:
                parsed = (grammar_choice(reply.text, self._label_ids()) if shaped
                          else parse_choice(reply.text, self._label_ids()))
            else:
                parsed = parse_message(reply.text, max_chars=None) or (grammar_message(reply.text) if shaped else None)
                if parsed is not None and len(parsed) > self.message_max_chars:
                    flags.append("message_too_long")
                    status = CallStatus.PARSE_ERROR.value  # re-asked for a shorter one
                elif parsed is not None and options.shape is not None and options.shape.chinese \
                        and not has_han(parsed):
                    parsed, status = None, CallStatus.PARSE_ERROR.value  # the chat is in Chinese: re-asked
            if parsed is None:
                status = CallStatus.REFUSAL.value if is_refusal(reply.text) else CallStatus.PARSE_ERROR.value
        if status != CallStatus.OK.value and reply.status in (CallStatus.OK.value, CallStatus.LENGTH.value):
            # what was wrong with the reply: on the record, and a re-ask without a grammar says it
            error = "; ".join(filter(None, [error, self._problem(kind, status, reply.text)]))
        record.raw_reply, record.parsed, record.status, record.error = reply.text, parsed, status, error
        record.reasoning, record.flags = reasoning, ",".join(flags)
        record.input_tokens, record.output_tokens, record.cost = reply.input_tokens, reply.output_tokens, reply.cost
        record.time_sent = reply.time_sent or record.time_sent
        record.time_first_byte, record.time_done = reply.time_first_byte, reply.time_done
        record.retries = reply.retries
        self._charged(record, charges)
        _journal(self.journal.finished, record)
        return record

    @staticmethod
    def _charged(record: CallRecord, charges) -> None:
        """When the budget was charged an estimate for an attempt sent and never answered, the
        record's cost is what the budget was charged for the call, flagged ``cost_estimated``."""
        if charges.estimated:
            record.cost = charges.cost
            record.flags = ",".join(filter(None, [record.flags, "cost_estimated"]))

    def _record(self, sent: list[ChatMessage], round_number: int, kind: str, attempt: int, raw: Optional[str],
                parsed: Optional[str], status: str, error: Optional[str],
                options: CallOptions = CallOptions()) -> CallRecord:
        settings = self.model.settings
        grammar = getattr(settings, "grammar", None)
        return CallRecord(
            call_id=uuid.uuid4().hex, agent_id=self.agent_id, round_number=round_number, turn=kind,
            attempt=attempt, provider=settings.provider, model=settings.model,
            parameters={"temperature": settings.temperature if options.temperature is None else options.temperature,
                        "max_tokens": settings.max_tokens,
                        "seed": settings.seed if options.seed is None else options.seed,
                        "persona": self.persona, "language": self.language,
                        "with_communication": self.with_communication, "memory": self.memory,
                        # llm_constrained_output as this call had it, and the grammar it carried
                        "constrained_output": "on" if grammar else "off", "grammar_format": grammar,
                        "chinese_messages": self._writes_chinese(),
                        "grammar": grammars.describe(grammar, options.shape, settings.max_tokens),
                        # another experiment than the paper's: its name and design hash (the paper's records as before)
                        **({"experiment": self.experiment.name, "experiment_hash": self.experiment.canonical_hash}
                           if self._prompt_experiment() else {})},
            prompt_version=prompts.prompt_version(self._prompt_experiment()),
            messages=[{"role": m.role, "content": m.content} for m in sent],
            raw_reply=raw, parsed=parsed, status=status, error=error,
            simulated=settings.provider == "simulated",
        )

    def _finish(self, round_number: int, kind: str, started: float, calls: list[CallRecord],
                exchange: list[dict[str, str]], parsed: Optional[str], fallback_reason: Optional[str],
                status: str = TurnStatus.FALLBACK.value, flags: str = "") -> TurnResult:
        is_decision = kind == TurnKind.DECISION.value
        if fallback_reason is not None:
            parsed = self._random_choice(round_number) if is_decision else None
            exchange.append({"role": "assistant", "content": _fallback_note(kind, self.choice_labels.get(parsed))})
        self.conversation += [{"round": round_number, **entry} for entry in exchange]
        result = TurnResult(
            agent_id=self.agent_id, round_number=round_number, turn=kind, status=status,
            text=None if is_decision else parsed, choice=parsed if is_decision else None,
            fallback_reason=fallback_reason, calls=calls, started_at=started, finished_at=time.time(), flags=flags,
        )
        self.turns.append({f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "calls"})
        return result

    def _random_choice(self, round_number: int) -> str:
        """A late human gets a random choice; ours is seeded per agent and round when a seed is set."""
        if self.seed is None:
            return random.SystemRandom().choice(self.experiment.choice_ids)
        digest = hashlib.sha256(f"{self.seed}|{self.agent_id}|{round_number}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big")).choice(self.experiment.choice_ids)

    def _misuse(self, round_number: int, kind: TurnKind) -> TurnResult:
        """A message turn asked of an agent in a game without communication: a flagged no-op."""
        now = time.time()
        return TurnResult(agent_id=self.agent_id, round_number=round_number, turn=kind.value,
                          status=TurnStatus.FALLBACK.value, fallback_reason=CallStatus.CONFIG_ERROR.value,
                          started_at=now, finished_at=now)

    def _system_prompt(self) -> str:
        return prompts.system_prompt(self.persona, self.language, with_communication=self.with_communication,
                                     experiment=self._prompt_experiment())

    def _prompt_experiment(self) -> Optional[ed.Experiment]:
        """None for the paper's (the prompt functions' default, cached once), else the experiment."""
        return None if self.experiment is prompts.paper_experiment() else self.experiment

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
            "message_max_chars": self.message_max_chars,
            "conversation": [dict(entry) for entry in self.conversation],
            "rounds": {str(number): dict(r) for number, r in self.rounds.items()},
            "turns": [dict(t) for t in self.turns],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], model: LanguageModel, *,
                   experiment: Optional[ed.Experiment] = None) -> "PersonaAgent":
        """``experiment``: the one the agent was made with (the session's; None: the paper's)."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"agent state version {state.get('version')!r} is not {STATE_VERSION}")
        agent = cls(state["agent_id"], state["persona"], model, language=state["language"],
                    with_communication=state["with_communication"], seed=state["seed"], memory=state["memory"],
                    message_max_chars=state.get("message_max_chars", protocol.MESSAGE_MAX_CHARS), experiment=experiment)
        agent.conversation = [dict(entry) for entry in state["conversation"]]
        agent.rounds = {int(number): dict(r) for number, r in state["rounds"].items()}
        agent.turns = [dict(t) for t in state["turns"]]
        return agent
