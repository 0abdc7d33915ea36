"""Whether a model server can serve a session's agents in time: measured before anyone sits down.

The model check (lab/base/session_settings.py, and bench/local_model.py) builds the prompts the session
will send with the agents' own prompt builder (``PersonaAgent``: two agents with a synthetic
history of ``rounds - 1`` rounds, replies of ``max_tokens`` tokens, a participant's typical
messages), sends the longest of them (the decision at the last round) to the server and measures:

- prompt evaluation: agent B's decision prompt right after agent A's, so that the server's cache
  holds what a session's calls share (the system prompt and the round's first prompt) and no
  more; timed by the server's own ``timings`` when it reports them (llama-server), else by the
  first streamed token (llama-cpp-python, vLLM, Ollama), else by the wall time of a one-token reply;
- generation: tokens per second of a reply of the decision's shape (under its grammar when the
  session has one), timed the same ways;
- slots: how many requests the server computes at once (llama-server's ``/props``), else one.

Per stage it then computes a turn's seconds on one slot (its prompt's evaluation, scaled from the
measured one by the tokens it does not share with another agent's prompt of the stage, plus a
reply of ``max_tokens``: the only bound known before the session, so the figure is an upper
bound), the turns a slot finishes in the stage's limit (less the agents' margin), and whether the
session's agents (one per participant, each taking every stage's turn) fit: ``fits``, ``narrow``
(the stage's limit is less than ``NARROW_MARGIN`` x the time its turns need) or ``refused``, with
what to change (``unmeasured`` when the server answered a measuring call with an error). Re-asks
of malformed replies are not counted.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Optional

from . import grammars
from .agent import MAX_TURN_MARGIN_SECONDS, TURN_MARGIN_SECONDS, PersonaAgent
from .config import ModelConfig
from .models import CallOptions, build_model, model_settings
from .tokens import count_message_tokens, count_text_tokens
from .types import NO_OPTIONS, CallStatus, ChatMessage, ModelReply, TurnKind

NARROW_MARGIN = 1.5  # below this ratio of time available to time needed, a session is warned about
VERDICTS = ("fits", "narrow", "refused", "unmeasured")
GENERATION_TOKENS = 64  # the measured reply's limit (at most max_tokens)
MIN_GENERATION_TOKENS = 8  # fewer, and the rate is measured again on a reply that runs longer
COUNTING_PROMPT = "Count from 1 to 200 in words, separated by commas. Write nothing else."
# A participant's messages in the synthetic history: what people typically write (a lab's
# messages are a sentence or two; the chat allows 300 characters).
TYPICAL_MESSAGES = {
    "zh": ["咱们这一轮都选A吧，这样我们各得70分，比互相背叛强。", "好的，我也选A，说话算数。", "我考虑一下，上一轮对方选了B。"],
    "en": ["Let's both choose A this round, we each get 70 points.", "OK, I'll choose A too, deal.",
           "Not sure yet, my last associate chose B."],
    "de": ["Lass uns diese Runde beide A nehmen, dann kriegt jeder 70 Punkte.", "Okay, ich nehme auch A, abgemacht.",
           "Weiß noch nicht, mein letztes Gegenüber hat B gewählt."],
}
_FILLER = {"zh": "我想 对方 可能 会 选 合作 收益 这 一轮 信任 考虑 历史 记录 分数 结果".split(),
           "en": "I think my associate may choose cooperation payoff this round trust history points result".split(),
           "de": "ich glaube mein Gegenüber wählt vielleicht Zusammenarbeit Auszahlung diese Runde Vertrauen Verlauf "
                 "Punkte Ergebnis".split()}
STAGES = (TurnKind.MESSAGE_1.value, TurnKind.MESSAGE_2.value, TurnKind.DECISION.value)


@dataclass(frozen=True)
class SessionDemand:
    """What a session will ask of the model."""

    agents: int  # turns in each stage of a round: one agent per participant
    rounds: int
    language: str  # the agents' prompts: "zh", "en", "de" (another language is measured with English text)
    persona: str
    stage_seconds: dict[str, float]  # message_1, message_2, decision
    games: tuple[str, ...] = ("WC", "WoC")
    message_max_chars: int = 300
    experiment: object = None  # the session's (its persona's prompts); None: the paper's


@dataclass
class StagePrompt:
    """A stage's prompt at the last round, as agents A and B send it."""

    game: str
    stage: str
    prompt_a: list[ChatMessage]
    prompt_b: list[ChatMessage]
    tokens: int  # B's prompt (our count, agents/tokens.py)
    new_tokens: int  # of those, what A's prompt does not share (evaluated after A's)
    shape: grammars.OutputShape


@dataclass
class ServerSpeed:
    """What the server did with the measured prompts."""

    eval_seconds: float  # the decision prompt's evaluation after another agent's
    eval_new_tokens: int  # our count of what it evaluated (StagePrompt.new_tokens)
    eval_method: str
    eval_cut_off: bool  # no answer within the check's bound: eval_seconds is a lower bound
    tokens_per_second: Optional[float]  # generation
    generation_method: str
    slots: int
    slots_source: str
    prompt_tokens: Optional[int] = None  # the server's own count of the measured prompt, if it said
    error: Optional[str] = None  # a measuring call the server answered with an error: nothing measured


@dataclass
class StageCapacity:
    game: str
    stage: str
    limit_seconds: float
    turns: int  # the session's: one per participant
    eval_seconds: float
    reply_seconds: float
    turn_seconds: float  # on one slot
    turns_per_slot: int  # finished within the stage's limit
    capacity: int  # turns_per_slot x slots
    margin: float  # time available / time the session's turns need

    @property
    def name(self) -> str:
        return self.stage if self.game == "WC" else f"{self.stage} ({self.game})"


@dataclass
class Capacity:
    verdict: str  # fits | narrow | refused
    demand: SessionDemand
    speed: ServerSpeed
    reply_tokens: int
    prompt_tokens: int  # the measured decision prompt's (our count)
    stages: list[StageCapacity] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    @property
    def binding(self) -> StageCapacity:
        return min(self.stages, key=lambda s: s.margin)

    @property
    def max_agents(self) -> int:
        return min(s.capacity for s in self.stages)

    def summary(self) -> str:
        """One paragraph with the numbers: what a turn takes, what fits, what the session asks."""
        if self.verdict == "unmeasured":
            return f"capacity: not measured: {self.speed.error}"
        s, speed = self.binding, self.speed
        evaluated = (f"more than {speed.eval_seconds:.1f} s (cut off)" if speed.eval_cut_off
                     else f"{speed.eval_seconds:.1f} s")
        rate = "unknown" if not speed.tokens_per_second else f"{speed.tokens_per_second:.1f} tokens/s"
        verdict = {"fits": "fits", "narrow": f"fits narrowly (margin {s.margin:.2f}x, less than {NARROW_MARGIN:g}x)",
                   "refused": "does not fit"}[self.verdict]
        tokens = (f"{speed.prompt_tokens} tokens by the server's count" if speed.prompt_tokens
                  else f"~{self.prompt_tokens} tokens by our estimate")
        return (f"capacity: the session {verdict}. Measured at the model check: a decision prompt of the last round "
                f"({tokens}; ~{speed.eval_new_tokens} by our estimate not shared with another agent's) was "
                f"evaluated in {evaluated} ({speed.eval_method}); replies are generated at {rate} "
                f"({speed.generation_method}); {speed.slots} slot(s) ({speed.slots_source}). So a {s.name} turn takes "
                f"{s.turn_seconds:.1f} s on one slot ({s.eval_seconds:.1f} s prompt, {s.reply_seconds:.1f} s for a "
                f"reply of llm_max_tokens = {self.reply_tokens}), and {s.turns_per_slot} turn(s) per slot fit its "
                f"{s.limit_seconds:g} s: {s.capacity} in all, for the session's {s.turns} agents (one per participant)"
                + (f". To fit: {'; or '.join(self.advice)}" if self.advice else "") + ".")

    def as_record(self) -> dict:
        """For the session's model check record (session vars, the manifest, the pages)."""
        measured = bool(self.stages)
        return dict(verdict=self.verdict, margin=round(self.binding.margin, 2) if measured else None,
                    max_agents=self.max_agents if measured else None,
                    agents=self.demand.agents, slots=self.speed.slots, slots_source=self.speed.slots_source,
                    reply_tokens=self.reply_tokens,
                    speed={k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self.speed).items()},
                    stages=[dict(stage=s.name, limit_seconds=s.limit_seconds, turns=s.turns,
                                 turn_seconds=round(s.turn_seconds, 2), eval_seconds=round(s.eval_seconds, 2),
                                 reply_seconds=round(s.reply_seconds, 2), turns_per_slot=s.turns_per_slot,
                                 capacity=s.capacity, margin=round(s.margin, 2)) for s in self.stages],
                    advice=list(self.advice), summary=self.summary())


# --- the session's prompts --------------------------------------------------------------------
class _Recorder:
    """A stand-in model: keeps the messages of every call and answers in the paper's format with
    a reply of ``reply_tokens`` tokens whose words are the agent's own (two agents' prompts then
    share what a session's share, no more)."""

    def __init__(self, cfg: ModelConfig, language: str, seed: int) -> None:
        self.settings = model_settings(cfg)
        self.calls: list[list[ChatMessage]] = []
        self._rng = random.Random(seed)
        self._language = language if language in TYPICAL_MESSAGES else "en"
        self._reply_tokens = cfg.max_tokens

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        self.calls.append(list(messages))
        shape = options.shape
        ending = (" I DECIDE TO CHOOSE [A]" if shape is not None and shape.kind == "decision"
                  else f" <{self._rng.choice(TYPICAL_MESSAGES[self._language])}>")
        words: list[str] = []
        separator = "" if self._language == "zh" else " "
        while count_text_tokens(separator.join(words) + ending, self.settings.provider) < self._reply_tokens - 4:
            words.append(self._rng.choice(_FILLER[self._language]))
        return ModelReply(CallStatus.OK.value, text=separator.join(words) + ending)


def _on_private_loop(make_coroutine):
    """``make_coroutine()`` run to its end on a private thread with its own event loop: callable
    from a synchronous hook or from inside a running loop (oTree's, at session creation)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(make_coroutine()))
        except BaseException as error:  # raised again on the caller's thread
            outcome.append(error)

    worker = threading.Thread(target=run, name="agents-capacity")
    worker.start()
    worker.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _new_tokens(shared_with: list[ChatMessage], prompt: list[ChatMessage], provider: str) -> int:
    """Tokens of ``prompt`` beyond its common start with ``shared_with`` (what a server's cache of
    the one leaves to evaluate of the other)."""
    common: list[ChatMessage] = []
    for a, b in zip(shared_with, prompt):
        if (a.role, a.content) == (b.role, b.content):
            common.append(b)
            continue
        common.append(ChatMessage(b.role, os.path.commonprefix([a.content, b.content])))
        break
    return max(1, count_message_tokens(prompt, provider) - count_message_tokens(common, provider))


def stage_prompts(cfg: ModelConfig, demand: SessionDemand) -> list[StagePrompt]:
    """Each game's stages at the last round, as two agents with a synthetic history send them."""

    async def play(game: str, index: int) -> list[list[ChatMessage]]:
        model = _Recorder(cfg, demand.language, seed=index)
        agent = PersonaAgent(f"capacity-{index}", demand.persona, model, language=demand.language,
                             with_communication=game == "WC", seed=index, message_max_chars=demand.message_max_chars,
                             experiment=demand.experiment)
        messages = TYPICAL_MESSAGES[demand.language][index % 2:] + TYPICAL_MESSAGES[demand.language][: index % 2]
        for round_number in range(1, demand.rounds + 1):
            model.calls.clear()
            if game == "WC":
                await agent.message_1(round_number, deadline=None)
            if game == "WC" and exchanges == 2:
                await agent.message_2(round_number, associate_message_1=messages[0], deadline=None)
                decision = await agent.decide(round_number, associate_message_2=messages[1], deadline=None)
            elif game == "WC":  # one exchange: the decision follows the first messages
                decision = await agent.decide(round_number, associate_message_1=messages[0], deadline=None)
            else:
                decision = await agent.decide(round_number, deadline=None)
            agent.record_outcome(round_number, decision.choice or "A", "AB"[(round_number + index) % 2])
        return model.calls

    experiment = demand.experiment
    exchanges = (experiment.chat_exchanges("WC")
                 if experiment is not None and "WC" in {game.game_id for game in experiment.design.games} else 2)
    prompts = []
    for game in demand.games:
        calls_a, calls_b = _on_private_loop(lambda: play(game, 0)), _on_private_loop(lambda: play(game, 1))
        stages = (TurnKind.DECISION.value,) if game != "WC" else STAGES if exchanges == 2 else (
            TurnKind.MESSAGE_1.value, TurnKind.DECISION.value)
        for stage, prompt_a, prompt_b in zip(stages, calls_a, calls_b):
            steps = sum(1 for line in prompt_b[-1].content.splitlines() if line.startswith("STEP "))
            shape = grammars.OutputShape("decision" if stage == TurnKind.DECISION.value else "message", steps,
                                         demand.message_max_chars)
            prompts.append(StagePrompt(game, stage, prompt_a, prompt_b,
                                       count_message_tokens(prompt_b, cfg.provider),
                                       _new_tokens(prompt_a, prompt_b, cfg.provider), shape))
    return prompts


# --- the server -------------------------------------------------------------------------------
def server_slots(cfg: ModelConfig) -> tuple[Optional[int], str]:
    """How many requests the server computes at once, and where that comes from (llama-server's
    ``/props`` says ``total_slots``; other servers say nothing)."""
    root = (cfg.base_url or "").rstrip("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(f"{root}/props", timeout=5) as response:
            slots = json.load(response).get("total_slots")
        if isinstance(slots, int) and slots >= 1:
            return slots, "the server's /props"
    except (OSError, ValueError):
        pass
    return None, "the server reports none"


def _timed(reply: ModelReply, measure: str) -> tuple[Optional[float], str]:
    """Seconds of the reply's ``measure`` ("prompt" or "generation") and how they were timed."""
    timings = reply.timings or {}
    if measure == "prompt":
        if timings.get("prompt_ms") is not None:
            return timings["prompt_ms"] / 1000, "the server's timings"
        if reply.time_first_byte and reply.time_sent:
            return reply.time_first_byte - reply.time_sent, "until the first streamed token"
        return (reply.time_done - reply.time_sent if reply.time_done and reply.time_sent else None,
                "wall time of a one-token reply")
    if timings.get("predicted_ms") and timings.get("predicted_n"):
        return timings["predicted_ms"] / 1000, "the server's timings"
    if reply.time_first_byte and reply.time_done:
        return reply.time_done - reply.time_first_byte, "after the first streamed token"
    return None, "not timed"


def measure_server(cfg: ModelConfig, decision: StagePrompt, *, model=None,
                   bound_seconds: float = 60.0) -> ServerSpeed:
    """Three calls: A's decision prompt (the cache as a session leaves it), B's for the prompt's
    evaluation, B's again for the generation's speed. On a private thread with its own loop."""
    model = model or build_model(cfg)
    shape = decision.shape if cfg.grammar() else None

    async def one(messages: list[ChatMessage], options: CallOptions) -> ModelReply:
        """One call, asked again once after an error of the server (not after a timeout)."""
        for _ in range(2):
            reply = await model.complete(messages, deadline=time.monotonic() + bound_seconds, options=options)
            if reply.status not in (CallStatus.PROVIDER_ERROR.value, CallStatus.RATE_LIMITED.value):
                break
        return reply

    def failed(reply: ModelReply) -> Optional[str]:
        if reply.status in (CallStatus.OK.value, CallStatus.LENGTH.value, CallStatus.TIMEOUT.value):
            return None
        return f"the server answered a measuring call with {reply.status}: {reply.error}"

    async def measure() -> ServerSpeed:
        slots, source = server_slots(cfg)
        await one(decision.prompt_a, CallOptions(max_tokens=1))
        evaluated = await one(decision.prompt_b, CallOptions(max_tokens=1))
        cut_off = evaluated.status == CallStatus.TIMEOUT.value
        eval_seconds, eval_method = _timed(evaluated, "prompt")
        if cut_off or eval_seconds is None:
            eval_seconds = (evaluated.time_done or time.time()) - (evaluated.time_sent or time.time())
        speed = ServerSpeed(eval_seconds, decision.new_tokens, eval_method, cut_off, None,
                            "not measured (the prompt was cut off)", slots or 1, source, evaluated.input_tokens,
                            error=failed(evaluated))
        if cut_off or speed.error:
            return speed
        limit = max(MIN_GENERATION_TOKENS, min(cfg.max_tokens, GENERATION_TOKENS))
        generated = await one(decision.prompt_b, CallOptions(max_tokens=limit, shape=shape))
        if not failed(generated) and (generated.output_tokens or 0) < MIN_GENERATION_TOKENS:  # it stopped at once
            generated = await one([ChatMessage("user", COUNTING_PROMPT)], CallOptions(max_tokens=limit))
        seconds, speed.generation_method = _timed(generated, "generation")
        tokens = (generated.timings or {}).get("predicted_n") or max(1, (generated.output_tokens or 1) - 1)
        speed.tokens_per_second = tokens / seconds if seconds and not failed(generated) else None
        speed.error = failed(generated)
        return speed

    return _on_private_loop(measure)


# --- the verdict ------------------------------------------------------------------------------
def usable_seconds(limit: float) -> float:
    """A stage's time for the model: the agent hands its turn back a tenth early (agents/agent.py)."""
    return limit - min(MAX_TURN_MARGIN_SECONDS, max(TURN_MARGIN_SECONDS, 0.1 * limit))


def assess(cfg: ModelConfig, demand: SessionDemand, prompts: list[StagePrompt], speed: ServerSpeed,
           concurrency: Optional[int] = None) -> Capacity:
    """Per stage: a turn's seconds on one slot and the turns that fit; the verdict and what to change."""
    measured = max((p.tokens for p in prompts if p.stage == TurnKind.DECISION.value), default=0)
    if speed.error:
        return Capacity("unmeasured", demand, speed, cfg.max_tokens, measured)
    slots = max(1, min(speed.slots, concurrency or speed.slots))
    rate = speed.tokens_per_second
    reply_seconds = cfg.max_tokens / rate if rate else math.inf
    stages = []
    for prompt in prompts:
        limit = demand.stage_seconds[prompt.stage]
        eval_seconds = speed.eval_seconds * prompt.new_tokens / max(1, speed.eval_new_tokens)
        turn = eval_seconds + reply_seconds
        usable = usable_seconds(limit)
        per_slot = int(usable // turn) if turn > 0 else demand.agents
        needed = math.ceil(demand.agents / slots) * turn
        stages.append(StageCapacity(prompt.game, prompt.stage, limit, demand.agents, eval_seconds, reply_seconds,
                                    turn, per_slot, per_slot * slots, usable / needed if needed else math.inf))
    capacity = Capacity("fits", demand, speed, cfg.max_tokens, measured, stages)
    binding = capacity.binding
    if speed.eval_cut_off or capacity.max_agents < demand.agents:
        capacity.verdict = "refused"
    elif binding.margin < NARROW_MARGIN:
        capacity.verdict = "narrow"
    if capacity.verdict != "fits":
        capacity.advice = advice(cfg, demand, capacity, slots, concurrency)
    return capacity


def advice(cfg: ModelConfig, demand: SessionDemand, capacity: Capacity, slots: int,
           concurrency: Optional[int]) -> list[str]:
    """What would make the session fit (NARROW_MARGIN included), each with its number."""
    binding, speed, rate = capacity.binding, capacity.speed, capacity.speed.tokens_per_second
    usable = usable_seconds(binding.limit_seconds)
    found = []
    fitting = [n for n in range(demand.agents, 0, -1)
               if all(usable_seconds(s.limit_seconds) >= NARROW_MARGIN * math.ceil(n / slots) * s.turn_seconds
                      for s in capacity.stages)]
    found.append(f"at most {fitting[0]} participants (agents)" if fitting else
                 "no number of participants (one turn alone is too slow)")
    if rate and not speed.eval_cut_off:
        tokens = int(rate * (usable / (NARROW_MARGIN * math.ceil(demand.agents / slots)) - binding.eval_seconds))
        if tokens >= grammars.MIN_STEP_CHARS:
            found.append(f"llm_max_tokens = {min(tokens, cfg.max_tokens - 1)} or less")
    speedup = NARROW_MARGIN * math.ceil(demand.agents / slots) * binding.turn_seconds / usable
    per_slot = int(usable // (NARROW_MARGIN * binding.turn_seconds))
    found.append(f"a server with {math.ceil(demand.agents / per_slot)} slots at this speed, or {speedup:.1f}x faster"
                 if per_slot else f"a server {speedup:.1f}x faster (one turn alone is too slow for more slots to help)")
    if concurrency is not None and speed.slots > concurrency:
        found.append(f"llm_concurrency = {speed.slots} (the server has {speed.slots} slots)")
    return found


def check_capacity(cfg: ModelConfig, demand: SessionDemand, *, model=None,
                   concurrency: Optional[int] = None) -> Capacity:
    """The session's prompts, the server's speed on them, the verdict (see the module doc)."""
    prompts = stage_prompts(cfg, demand)
    decision = max((p for p in prompts if p.stage == TurnKind.DECISION.value), key=lambda p: p.tokens)
    bound = 2 * max(demand.stage_seconds.values())
    speed = measure_server(cfg, decision, model=model, bound_seconds=min(bound, cfg.request_timeout))
    return assess(cfg, demand, prompts, speed, concurrency)
