"""The offline persona model (provider ``simulated``): reads the paper's prompts, answers like one.

No network. It finds the persona in the system prompt, the turn in the last user prompt, the
associate's messages and the agent's past rounds in the prompts, and replies in the paper's
format (STEP lines, then ``<message>`` or ``I DECIDE TO CHOOSE [X]``), so parsing and records are
exercised exactly as with a real model:

- cooperative: always proposes A/A and plays A;
- fair: proposes A/A and mostly keeps its word, breaking it with ``simulated_fair_break_rate``
  (the paper saw ~10 %), more often right after being exploited, and plays B when the associate
  announced B or said nothing;
- selfish: often promises A (``SELFISH_PROMISE_RATE``) and mostly plays B (``SELFISH_DEFECT_RATE``);
- reciprocating (an experiment's "RECIPROCATING" persona): proposes A/A, plays A first and then what
  its associate played in the last round (tit for tat);
- any other persona plays as fair.

Seeded: a call's randomness comes from ``simulated_seed``, the call scope the agent sets
(agent, seed, round, turn, attempt) and the prompt, so replies do not depend on the order
concurrent calls are served. ``responders`` is a hook for other prompts (e.g. a similarity-score
prompt): a list of ``(matches(messages) -> bool, respond(messages, rng) -> str)`` tried first.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import threading
import time
from typing import Callable, Optional

import protocol

from .config import ModelConfig
from .models.calls import current_call_scope
from .types import NO_OPTIONS, CallOptions, CallStatus, ChatMessage, ModelReply, ModelSettings

FAIR_BREAK_RATE_AFTER_EXPLOITED = 0.5
FAIR_DEFECT_RATE_WITHOUT_PROMISE = 0.7  # the associate announced B or said nothing
SELFISH_PROMISE_RATE = 0.7
SELFISH_DEFECT_RATE = 0.9
PERSONA_MARKERS = {"COOPERATIVE human": "cooperative", "FAIR-MINDED human": "fair",
                   "INDIVIDUALISTIC human": "selfish", "RECIPROCATING human": "reciprocating"}
# The points the replies quote, as the paper's game pays them.
BOTH_A, BOTH_B = protocol.payoff("A", "A"), protocol.payoff("B", "B")
EXPLOITING, EXPLOITED = protocol.payoff("B", "A"), protocol.payoff("A", "B")

# Canned messages: (persona kind, language) -> options. "promise" proposes A/A, "threat" is B.
MESSAGES = {
    ("promise", "zh"): [f"咱们都选A吧，各拿{BOTH_A}，双赢！", "一起选A呗，大家都不亏～", "选A吧，合作最划算，我肯定选A。",
                        f"我选A，你也选A，咱俩都拿{BOTH_A}，咋样？"],
    ("promise", "en"): [f"Let's both pick A, {BOTH_A} each, win-win!", "How about we both go A? Nobody loses.",
                        f"I'm going A, you go A too and we both get {BOTH_A}.", "A for both of us? Best deal around."],
    ("agree", "zh"): ["好嘞，说定了，都选A！", "行，一言为定，选A～", "没问题，咱俩都选A！"],
    ("agree", "en"): ["Deal, A it is!", "Cool, we both go A then.", "Sounds good, A for both!"],
    ("persuade", "zh"): [f"还是选A吧，都选B只有{BOTH_B}，太亏了。", f"别选B嘛，一起选A各拿{BOTH_A}多好。"],
    ("persuade", "en"): [f"Come on, let's do A, both B only gets us {BOTH_B}.",
                         f"Don't go B, A/A gives us {BOTH_A} each."],
    ("vague", "zh"): ["看情况吧，我再想想。", "嗯，这局我自己有数。"],
    ("vague", "en"): ["We'll see, let me think.", "I've got my own plan this round."],
}
_PAST_ROUND = re.compile(r"In round (\d+): you choose ([AB]), your associate chooses ([AB])")
_ASSOCIATE_LINE = re.compile(r"^Your associate: (.*)$", re.M)
_SAYS_A = re.compile(r"(?<![A-Za-z])A(?![A-Za-z])")
_SAYS_B = re.compile(r"(?<![A-Za-z])B(?![A-Za-z])")

Matcher = Callable[[list[ChatMessage]], bool]
Responder = Callable[[list[ChatMessage], random.Random], str]


def _stable_random(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _associate_proposes_a(text: Optional[str]) -> bool:
    """Crude reading of a chat line: mentions A and not B (the paper's agents are no cleverer)."""
    return bool(text) and bool(_SAYS_A.search(text)) and not _SAYS_B.search(text)


class SimulatedModel:
    """A ``LanguageModel`` with provider ``simulated``; every reply is labelled simulated by the agent."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg
        self.settings = ModelSettings(provider="simulated", model=cfg.model, temperature=cfg.temperature,
                                      max_tokens=cfg.max_tokens, seed=cfg.simulated_seed, memory=cfg.memory,
                                      context_window=cfg.context_window)
        self.responders: list[tuple[Matcher, Responder]] = []
        self._unscoped_calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def add_responder(self, matches: Matcher, respond: Responder) -> None:
        """Answer prompts that ``matches`` with ``respond`` (tried before the persona behaviour)."""
        self.responders.append((matches, respond))

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        time_sent = time.time()
        latency = self.cfg.simulated_latency
        remaining = deadline - time.monotonic()
        if latency >= remaining:
            await asyncio.sleep(max(0.0, remaining))
            return ModelReply(CallStatus.TIMEOUT.value, error="simulated latency beyond the deadline",
                              time_sent=time_sent, time_done=time.time(), retryable=False)
        if latency:
            await asyncio.sleep(latency)
        text = self.reply_text(messages, self._rng(messages))
        prompt_chars = sum(len(m.content) for m in messages)
        now = time.time()
        return ModelReply(CallStatus.OK.value, text=text, input_tokens=prompt_chars // 4 + 1,
                          output_tokens=len(text) // 4 + 1, time_sent=time_sent, time_first_byte=now,
                          time_done=now, cost=0.0)

    def _rng(self, messages: list[ChatMessage]) -> random.Random:
        scope = current_call_scope()
        # In a scope (agent, seed, round, turn, attempt) the last prompt is all that can differ.
        hashed = messages[-1:] if scope else messages
        prompt_hash = hashlib.sha256("\x1e".join(m.content for m in hashed).encode("utf-8")).hexdigest()
        if not scope:  # called outside an agent: repeated identical prompts still differ
            with self._lock:
                count = self._unscoped_calls.get(prompt_hash, 0)
                self._unscoped_calls[prompt_hash] = count + 1
            scope = f"unscoped#{count}"
        return _stable_random(self.cfg.simulated_seed, scope, prompt_hash)

    # --- reading the prompt and answering -----------------------------------------------------------
    def reply_text(self, messages: list[ChatMessage], rng: random.Random) -> str:
        for matches, respond in self.responders:
            if matches(messages):
                return respond(messages, rng)
        system = next((m.content for m in messages if m.role == "system"), "")
        persona = next((p for marker, p in PERSONA_MARKERS.items() if marker in system), "fair")
        language = "zh" if "converse in Chinese" in system else "en"
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if "I DECIDE TO CHOOSE" in prompt:
            return self._decision(persona, messages, prompt, rng)
        if "<The message you want to send>" in prompt:
            return self._message(persona, language, prompt, rng)
        return "I'm not sure what you mean."

    def _message(self, persona: str, language: str, prompt: str, rng: random.Random) -> str:
        associate_lines = _ASSOCIATE_LINE.findall(prompt)
        replying = bool(associate_lines)  # the second message shows the associate's first
        if persona == "selfish" and rng.random() >= SELFISH_PROMISE_RATE:
            kind = "vague"
        elif replying:
            kind = "agree" if _associate_proposes_a(associate_lines[-1]) else "persuade"
        else:
            kind = "promise"
        message = rng.choice(MESSAGES[(kind, language)])
        return (
            f"STEP 1: If I choose B and my associate chooses A, I get {EXPLOITING} and they get {EXPLOITED}; "
            f"if we both choose B, {BOTH_B} each.\n"
            f"STEP 2: If I choose A and my associate chooses A, we both get {BOTH_A}; "
            f"if they choose B, I get {EXPLOITED} and they get {EXPLOITING}.\n"
            f"STEP 3: As a {persona} person, the ideal strategy pair for this round is A/A.\n"
            f"STEP 4: <{message}>"
        )

    def _decision(self, persona: str, messages: list[ChatMessage], prompt: str, rng: random.Random) -> str:
        decision_prompt = next((m.content for m in reversed(messages)
                                if m.role == "user" and "Now this is the" in m.content), prompt)
        past = _PAST_ROUND.findall(decision_prompt)
        exploited_last = bool(past) and past[-1][1:] == ("A", "B")
        associate_lines = _ASSOCIATE_LINE.findall(decision_prompt)
        with_communication = bool(associate_lines)
        associate_promised = any(_associate_proposes_a(line) for line in associate_lines)
        if persona == "cooperative":
            defect, reason = False, "I care about my associate and we agreed on A."
        elif persona == "reciprocating":
            defect = bool(past) and past[-1][2] == "B"
            reason = "My associate chose B last round." if defect else "I return my associate's goodwill."
        elif persona == "selfish":
            defect = rng.random() < SELFISH_DEFECT_RATE
            reason = "B pays me more whatever my associate does." if defect else f"A could pay {BOTH_A} this time."
        else:
            if exploited_last:
                rate = FAIR_BREAK_RATE_AFTER_EXPLOITED
            elif with_communication and not associate_promised:
                rate = FAIR_DEFECT_RATE_WITHOUT_PROMISE
            else:
                rate = self.cfg.simulated_fair_break_rate
            defect = rng.random() < rate
            reason = (f"I cannot risk getting only {EXPLOITED}." if defect
                      else "A/A is fair and my associate seems honest.")
        choice = "B" if defect else "A"
        return (
            f"STEP 1: Choosing B gives me {EXPLOITING} if my associate chooses A, {BOTH_B} if B.\n"
            f"STEP 2: Choosing A gives me {BOTH_A} if my associate chooses A, {EXPLOITED} if B.\n"
            f"STEP 3: I have played {len(past)} rounds so far, each with a new associate.\n"
            f"STEP 4: {'We talked about A/A.' if associate_promised else 'No clear promise of A from my associate.'}\n"
            f"STEP 5: {reason}\n"
            f"I DECIDE TO CHOOSE [{choice}]"
        )
