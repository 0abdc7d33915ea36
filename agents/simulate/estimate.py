"""The cost estimate: the remaining games played dry, with the real agents, prompts and cache.

Nothing is sent. Every agent is the one the run would use (the backend's ``new_agent`` /
``restore_agent``, so its memory setting and prompt builder are the run's), and it talks to a
stand-in model that counts the tokens of each prompt as it will be rendered and answers with a
reply of the stated length (``estimated_output_tokens``), in the paper's format: a message and
a choice of A. Under a memory that re-sends earlier turns the prompts grow round by round, and
the estimate grows with them. The run's response cache is consulted (read only): a call the
cache will serve is free and not counted.

Tokens are counted by ``agents/tokens.py``, the counter the agents use for every call's
``prompt_tokens`` and context window, for each model's provider: tiktoken's cl100k for OpenAI
models, for the others its documented estimate that errs high. So a prompt of the estimate and the
same prompt in the run's ``llm_calls`` have the same count. The canned reply is built to the stated
length by the same counter.

Units (one repeat of one matchup) that have no finished game and nothing in the cache play
identically (the canned replies make every pair alike), so one unit per model and matchup is
played and counted for all of them.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, Optional

from agents.tokens import count_message_tokens, count_text_tokens
from agents.types import NO_OPTIONS, CallOptions, CallStatus, ChatMessage, ModelReply

FILLER = "I weigh the payoffs of both choices and what my associate said. "
CANNED_ENDING = " <Let's both choose A.> I DECIDE TO CHOOSE [A]"


def canned_reply(tokens: int, provider: str) -> str:
    """A reply that parses both as a message and as a choice of A, of ``tokens`` tokens as
    ``agents.tokens`` counts them for ``provider`` (fewer only when no filler fits exactly; never
    more, except the bare ending when ``tokens`` is below it)."""

    def reply(body: str) -> str:
        return (body.rstrip() + CANNED_ENDING).lstrip()

    def fits(body: str) -> bool:
        return count_text_tokens(reply(body), provider) <= tokens

    # Whole fillers first (long replies), then word by word, then the longest start of a word.
    spare = max(0, tokens - count_text_tokens(CANNED_ENDING, provider))
    body = FILLER * (spare // count_text_tokens(FILLER, provider))
    while body and not fits(body):
        body = body[: -len(FILLER)]
    for word in itertools.cycle(re.findall(r"\S+\s*", FILLER)):
        if fits(body + word):
            body += word
            continue
        body += next((word[:end] for end in range(len(word) - 1, 0, -1) if fits(body + word[:end])), "")
        break
    return reply(body)


@dataclass
class Tally:
    """Calls a part of the run will make and their tokens (cache hits cost nothing)."""

    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    max_input_tokens: int = 0
    cost: Optional[float] = 0.0  # None once a price is unknown

    def add(self, input_tokens: int, output_tokens: int, cost: Optional[float]) -> None:
        self.calls += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.max_input_tokens = max(self.max_input_tokens, input_tokens)
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    def merge(self, other: "Tally", times: int = 1) -> None:
        self.calls += other.calls * times
        self.cache_hits += other.cache_hits * times
        self.input_tokens += other.input_tokens * times
        self.output_tokens += other.output_tokens * times
        if other.calls:
            self.max_input_tokens = max(self.max_input_tokens, other.max_input_tokens)
        self.cost = None if other.cost is None or self.cost is None else self.cost + other.cost * times


# The tally of the unit being played dry (each unit's task sets its own).
current_tally: contextvars.ContextVar[Optional[Tally]] = contextvars.ContextVar("estimate_tally", default=None)


class EstimatingModel:
    """A ``LanguageModel`` stand-in: counts each prompt and answers with the canned reply."""

    def __init__(self, settings: Any, reply_tokens: int, cost_of: Any) -> None:
        self.settings = settings
        self.provider = settings.provider  # the agents count a call's prompt_tokens by it, so do we
        self.reply = canned_reply(reply_tokens, self.provider)
        self.reply_tokens = count_text_tokens(self.reply, self.provider)
        self.cost_of = cost_of  # (input_tokens, output_tokens) -> USD or None

    async def complete(self, messages: list[ChatMessage], *, deadline: Optional[float],
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        input_tokens = count_message_tokens(messages, self.provider)
        tally = current_tally.get()
        if tally is not None:
            tally.add(input_tokens, self.reply_tokens, self.cost_of(input_tokens, self.reply_tokens))
        return ModelReply(CallStatus.OK.value, text=self.reply, input_tokens=input_tokens,
                          output_tokens=self.reply_tokens)


@dataclass
class ModelEstimate:
    """One model's part of the estimate."""

    label: str
    tally: Tally = field(default_factory=Tally)
    price_source: str = ""
    dearest_call: Optional[float] = None  # USD: the largest prompt and a reply of max_tokens
    concurrency: int = 1

    @property
    def cost(self) -> Optional[float]:
        return self.tally.cost


def price_source(cfg: Any) -> str:
    """Where a model's prices come from: its config, or the price table's source and date."""
    if getattr(cfg, "provider", None) == "simulated":
        return "offline model, free"
    if getattr(cfg, "price_input_per_mtok", None) is not None and getattr(cfg, "price_output_per_mtok", None) is not None:
        return "config"
    from agents.config import price_table

    model = getattr(cfg, "model", "")
    if "input" not in price_table().get(model, {}):
        return "no price known"
    source = next((s for s in price_sources().values()
                   if any(model.startswith(prefix) for prefix in s.get("model_prefixes", []))), {})
    return f"agents/prices.toml: {source.get('page', 'source not given')}, read {source.get('read', '?')}"


@functools.lru_cache(maxsize=1)
def price_sources() -> dict[str, dict[str, Any]]:
    """``[sources]`` of agents/prices.toml: per provider, its pricing page and when it was read."""
    from agents.config import PRICES_PATH

    with PRICES_PATH.open("rb") as handle:
        return tomllib.load(handle).get("sources", {})


def unpriced(cfg: Any) -> bool:
    """True when a call's cost cannot be computed (the config and the price table lack a price)."""
    prices = getattr(cfg, "prices", None)
    return prices is not None and None in prices()


def describe_overshoot(estimates: list[ModelEstimate]) -> Optional[str]:
    """How far the calls in flight when a budget is reached can take the spending past it."""
    parts, total = [], 0.0
    for e in estimates:
        if e.dearest_call is None:
            return None
        parts.append(f"{e.label} {e.concurrency} x ${e.dearest_call:.4f}")
        total += e.concurrency * e.dearest_call
    return (f"calls already in flight when the budget is reached may add up to ${total:.2f} "
            f"(concurrency x dearest call: {', '.join(parts)})")
