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
- any other persona (an experiment's own) by the words of its name as its prompts give it ("Remember
  that you are a STEADFASTLY COOPERATIVE human"): RECIPROC or TIT FOR TAT plays as reciprocating;
  COOPERAT, ALTRUIS or GENEROUS as cooperative; UNCOOPERAT, SELFISH, INDIVIDUALIS, COMPETITI or
  GREEDY as selfish; any other as fair, the paper's middle persona.

The points its replies quote are the game's as the system prompt states them (the session's
experiment's payoffs); the paper's when the prompt states none. It names the choices as the system
prompt does (the labels of the session's language: "Stag" and "Hare" for A and B), in its messages,
its reasoning and its decision; "A" above is the first of them, "B" the second.

Seeded: a call's randomness comes from ``simulated_seed``, the call scope the agent sets
(agent, seed, round, turn, attempt) and the prompt, so replies do not depend on the order
concurrent calls are served. ``responders`` is a hook for other prompts (e.g. a similarity-score
prompt): a list of ``(matches(messages) -> bool, respond(messages, rng) -> str)`` tried first.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import random
import re
import threading
import time
from typing import Callable, NamedTuple, Optional

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
# Words of an experiment's own persona name -> the behaviour it gets (first match; none: fair).
PERSONA_WORDS = (("RECIPROC", "reciprocating"), ("TIT FOR TAT", "reciprocating"), ("TIT-FOR-TAT", "reciprocating"),
                 ("UNCOOPERAT", "selfish"), ("COOPERAT", "cooperative"), ("ALTRUIS", "cooperative"),
                 ("GENEROUS", "cooperative"), ("SELFISH", "selfish"), ("INDIVIDUALIS", "selfish"),
                 ("COMPETITI", "selfish"), ("GREEDY", "selfish"))
# "Remember that you are a FAIR-MINDED human" (the turns' prompts), "You are a FAIR-MINDED human" (role-play)
_PERSONA_NAME = re.compile(r"(?:Remember that you|You) are an? ([A-Z][A-Z '-]*?) human")
# prompts/_game_rules.j2: the choices as the prompts name them, then the payoffs.
_OPTIONS = re.compile(r"each has two options: playing (.+?) or playing (.+?)\. The payoff")
PAPER_LABELS = ("A", "B")


def choice_labels(system: str) -> tuple[str, str]:
    """The two choices as the system prompt's rules name them (the paper's A and B when it names none)."""
    found = _OPTIONS.search(system)
    return (found.group(1), found.group(2)) if found else PAPER_LABELS


@functools.lru_cache(maxsize=16)
def _both_choose(first: str, second: str) -> re.Pattern:
    a, b = re.escape(first), re.escape(second)
    return re.compile(rf"If both you and your associate choose {a}, both will receive (-?[\d.]+)\..*?"
                      rf"If both you and your associate choose {b}, both will receive (-?[\d.]+)\..*?"
                      rf"If you choose {a} and your associate chooses {b}, you will receive (-?[\d.]+) and your "
                      rf"associate will receive (-?[\d.]+)\..*?"
                      rf"If you choose {b} and your associate chooses {a}, you will receive (-?[\d.]+)", re.S)


class Points(NamedTuple):
    """The points the replies quote: both A, both B, B against A (own), A against B (own)."""

    both_a: str
    both_b: str
    exploiting: str
    exploited: str


# The paper's game, for a prompt that states no payoffs.
PAPER_POINTS = Points(*(str(protocol.payoff(own, other)) for own, other in (("A", "A"), ("B", "B"), ("B", "A"),
                                                                            ("A", "B"))))


def game_points(system: str) -> Points:
    """The payoffs as the system prompt's rules state them (prompts/_game_rules.j2)."""
    found = _both_choose(*choice_labels(system)).search(system)
    if not found:
        return PAPER_POINTS
    both_a, both_b, exploited, _, exploiting = found.groups()
    return Points(both_a, both_b, exploiting, exploited)


def persona_kind(messages: list[ChatMessage]) -> str:
    """The behaviour to play: by the words of the persona's name as the turn's prompt gives it
    (PERSONA_WORDS), else by the paper's role-play sentences in the system prompt, else fair."""
    name = next((found.group(1) for m in messages for found in [_PERSONA_NAME.search(m.content)] if found), "")
    by_name = next((kind for word, kind in PERSONA_WORDS if word in name.upper()), None)
    if by_name is not None:
        return by_name
    system = next((m.content for m in messages if m.role == "system"), "")
    return next((kind for marker, kind in PERSONA_MARKERS.items() if marker in system), "fair")


# Canned messages: (persona kind, language) -> options, with the game's points and its choices ({a}: the first,
# {b}: the second, as the prompts name them). "promise" proposes A/A.
MESSAGE_TEMPLATES = {
    ("promise", "zh"): ["咱们都选{a}吧，各拿{both_a}，双赢！", "一起选{a}呗，大家都不亏～", "选{a}吧，合作最划算，我肯定选{a}。",
                        "我选{a}，你也选{a}，咱俩都拿{both_a}，咋样？"],
    ("promise", "en"): ["Let's both pick {a}, {both_a} each, win-win!", "How about we both go {a}? Nobody loses.",
                        "I'm going {a}, you go {a} too and we both get {both_a}.",
                        "{a} for both of us? Best deal around."],
    ("agree", "zh"): ["好嘞，说定了，都选{a}！", "行，一言为定，选{a}～", "没问题，咱俩都选{a}！"],
    ("agree", "en"): ["Deal, {a} it is!", "Cool, we both go {a} then.", "Sounds good, {a} for both!"],
    ("persuade", "zh"): ["还是选{a}吧，都选{b}只有{both_b}，太亏了。", "别选{b}嘛，一起选{a}各拿{both_a}多好。"],
    ("persuade", "en"): ["Come on, let's do {a}, both {b} only gets us {both_b}.",
                         "Don't go {b}, {a}/{a} gives us {both_a} each."],
    ("vague", "zh"): ["看情况吧，我再想想。", "嗯，这局我自己有数。"],
    ("vague", "en"): ["We'll see, let me think.", "I've got my own plan this round."],
    ("promise", "de"): ["Lass uns beide A nehmen, {both_a} für jeden!", "Wie wär's, wir nehmen beide A? Keiner verliert.",
                        "Ich nehme A, nimm du auch A, dann kriegen wir beide {both_a}.", "Beide A? Besser geht's nicht."],
    ("agree", "de"): ["Abgemacht, A!", "Passt, dann nehmen wir beide A.", "Klingt gut, A für uns beide!"],
    ("persuade", "de"): ["Komm, nimm A, mit beide B kriegen wir nur {both_b}.",
                         "Nimm nicht B, mit A/A bekommt jeder {both_a}."],
    ("vague", "de"): ["Mal sehen, ich überleg noch.", "Ich hab diese Runde meinen eigenen Plan."],
}
# The chat language as the system prompt names it ("you converse in Chinese") -> the canned messages'
# language; any other language is answered in English.
CHAT_LANGUAGES = {"Chinese": "zh", "German": "de"}
_CONVERSE_IN = re.compile(r"converse in ([A-Z][a-z]+)")
# The canned messages with the paper's points (what a prompt stating no payoffs gets).
MESSAGES = {key: [option.format(a="A", b="B", **PAPER_POINTS._asdict()) for option in options]
            for key, options in MESSAGE_TEMPLATES.items()}
_ASSOCIATE_LINE = re.compile(r"^Your associate: (.*)$", re.M)


@functools.lru_cache(maxsize=16)
def _past_round(first: str, second: str) -> re.Pattern:
    either = f"({re.escape(first)}|{re.escape(second)})"
    return re.compile(rf"In round (\d+): you choose {either}, your associate chooses {either}")


@functools.lru_cache(maxsize=16)
def _says(label: str) -> re.Pattern:
    return re.compile(rf"(?<![A-Za-z]){re.escape(label)}(?![A-Za-z])")

Matcher = Callable[[list[ChatMessage]], bool]
Responder = Callable[[list[ChatMessage], random.Random], str]


def _stable_random(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _associate_proposes_a(text: Optional[str], labels: tuple[str, str] = PAPER_LABELS) -> bool:
    """Crude reading of a chat line: mentions A and not B (the paper's agents are no cleverer)."""
    return bool(text) and bool(_says(labels[0]).search(text)) and not _says(labels[1]).search(text)


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
        persona = persona_kind(messages)
        named = _CONVERSE_IN.search(system)
        language = CHAT_LANGUAGES.get(named.group(1), "en") if named else "en"
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
        labels = choice_labels(system)
        if "I DECIDE TO CHOOSE" in prompt:
            return self._decision(persona, messages, prompt, rng, game_points(system), labels)
        if "<The message you want to send>" in prompt:
            return self._message(persona, language, prompt, rng, game_points(system), labels)
        return "I'm not sure what you mean."

    def _message(self, persona: str, language: str, prompt: str, rng: random.Random, points: Points,
                 labels: tuple[str, str] = PAPER_LABELS) -> str:
        associate_lines = _ASSOCIATE_LINE.findall(prompt)
        replying = bool(associate_lines)  # the second message shows the associate's first
        if persona == "selfish" and rng.random() >= SELFISH_PROMISE_RATE:
            kind = "vague"
        elif replying:
            kind = "agree" if _associate_proposes_a(associate_lines[-1], labels) else "persuade"
        else:
            kind = "promise"
        a, b = labels
        message = rng.choice(MESSAGE_TEMPLATES[(kind, language)]).format(a=a, b=b, **points._asdict())
        both_a, both_b, exploiting, exploited = points
        return (
            f"STEP 1: If I choose {b} and my associate chooses {a}, I get {exploiting} and they get {exploited}; "
            f"if we both choose {b}, {both_b} each.\n"
            f"STEP 2: If I choose {a} and my associate chooses {a}, we both get {both_a}; "
            f"if they choose {b}, I get {exploited} and they get {exploiting}.\n"
            f"STEP 3: As a {persona} person, the ideal strategy pair for this round is {a}/{a}.\n"
            f"STEP 4: <{message}>"
        )

    def _decision(self, persona: str, messages: list[ChatMessage], prompt: str, rng: random.Random,
                  points: Points, labels: tuple[str, str] = PAPER_LABELS) -> str:
        both_a, both_b, exploiting, exploited = points
        a, b = labels
        decision_prompt = next((m.content for m in reversed(messages)
                                if m.role == "user" and "Now this is the" in m.content), prompt)
        past = _past_round(a, b).findall(decision_prompt)
        exploited_last = bool(past) and past[-1][1:] == (a, b)
        associate_lines = _ASSOCIATE_LINE.findall(decision_prompt)
        with_communication = bool(associate_lines)
        associate_promised = any(_associate_proposes_a(line, labels) for line in associate_lines)
        if persona == "cooperative":
            defect, reason = False, f"I care about my associate and we agreed on {a}."
        elif persona == "reciprocating":
            defect = bool(past) and past[-1][2] == b
            reason = f"My associate chose {b} last round." if defect else "I return my associate's goodwill."
        elif persona == "selfish":
            defect = rng.random() < SELFISH_DEFECT_RATE
            reason = f"{b} pays me more whatever my associate does." if defect else f"{a} could pay {both_a} this time."
        else:
            if exploited_last:
                rate = FAIR_BREAK_RATE_AFTER_EXPLOITED
            elif with_communication and not associate_promised:
                rate = FAIR_DEFECT_RATE_WITHOUT_PROMISE
            else:
                rate = self.cfg.simulated_fair_break_rate
            defect = rng.random() < rate
            reason = (f"I cannot risk getting only {exploited}." if defect
                      else f"{a}/{a} is fair and my associate seems honest.")
        choice = b if defect else a
        talked = f"We talked about {a}/{a}." if associate_promised else f"No clear promise of {a} from my associate."
        return (
            f"STEP 1: Choosing {b} gives me {exploiting} if my associate chooses {a}, {both_b} if {b}.\n"
            f"STEP 2: Choosing {a} gives me {both_a} if my associate chooses {a}, {exploited} if {b}.\n"
            f"STEP 3: I have played {len(past)} rounds so far, each with a new associate.\n"
            f"STEP 4: {talked}\n"
            f"STEP 5: {reason}\n"
            f"I DECIDE TO CHOOSE [{choice}]"
        )
