"""Money: a ``Budget`` shared by many models, and the layer that charges every attempt to it.

``BudgetedModel`` refuses to send once the budget is spent and charges each attempt's cost as
its reply arrives (or, asked to, an estimate for an attempt sent and never answered:
``unanswered_cost``); what it charged for one call is also told to the caller
(``call_charges``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from typing import Callable, Iterator, Optional

from ..config import ModelConfig
from ..types import NO_OPTIONS, CallOptions, CallStatus, ChatMessage, LanguageModel, ModelReply


class Budget:
    """Money shared by many models; once ``spent >= limit`` calls return status ``budget`` unsent.

    Thread-safe and asyncio-safe (a lock around two floats, never awaited while held). The check
    happens when a request is sent (``BudgetedModel`` is the innermost layer), so only requests
    already in flight when the limit is reached can overshoot it: at most the models'
    ``concurrency`` x the dearest call. ``limit=None`` only counts.
    """

    def __init__(self, limit: Optional[float]) -> None:
        self.limit = limit
        self._spent = 0.0
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent

    @property
    def exhausted(self) -> bool:
        with self._lock:
            return self.limit is not None and self._spent >= self.limit

    def charge(self, cost: Optional[float]) -> None:
        if cost:
            with self._lock:
                self._spent += cost


class CallCharges:
    """What ``BudgetedModel`` charged for one logical call (all its attempts): ``cost`` in USD,
    ``estimated`` when part of it is an estimate (an attempt sent and never answered)."""

    def __init__(self) -> None:
        self.cost = 0.0
        self.estimated = False


_call_charges: contextvars.ContextVar[Optional[CallCharges]] = contextvars.ContextVar("agents_call_charges",
                                                                                       default=None)


@contextlib.contextmanager
def call_charges() -> Iterator[CallCharges]:
    """Collect, in this block, what the budget is charged for the call made in it."""
    charges = CallCharges()
    token = _call_charges.set(charges)
    try:
        yield charges
    finally:
        _call_charges.reset(token)


def estimate_cost(cfg: ModelConfig, input_tokens: int, output_tokens: int) -> Optional[float]:
    """USD for a call of this size under ``cfg``'s prices; None when a price is unknown."""
    return cfg.cost(input_tokens, output_tokens)


def unanswered_cost(cfg: ModelConfig) -> Callable[[list[ChatMessage]], Optional[float]]:
    """An upper bound of what a sent request may be billed: its prompt plus a full reply."""
    from ..tokens import count_message_tokens

    def estimate(messages: list[ChatMessage]) -> Optional[float]:
        return cfg.cost(count_message_tokens(messages, cfg.provider), cfg.max_tokens)

    return estimate


class BudgetedModel:
    """Charges each attempt's cost to a shared ``Budget``; sends nothing once it is spent.

    Wraps the adapter directly (see ``build_model``): the check is made at the moment of sending.
    With ``estimate`` (messages -> USD, an upper bound such as prompt + ``max_tokens``), an
    attempt that was sent and never answered (timed out, or cut off by the deadline or the
    caller) is charged that estimate, as the provider may bill it. What is charged for a call is
    also added to the caller's ``call_charges()``, if any.
    """

    def __init__(self, inner: LanguageModel, budget: Budget,
                 estimate: Optional[Callable[[list[ChatMessage]], Optional[float]]] = None) -> None:
        self.inner = inner
        self.settings = inner.settings
        self.budget = budget
        self.estimate = estimate

    def _charge(self, cost: Optional[float], estimated: bool = False) -> None:
        self.budget.charge(cost)
        charges = _call_charges.get()
        if charges is not None and cost:
            charges.cost += cost
            charges.estimated = charges.estimated or estimated

    def _charge_unanswered(self, messages: list[ChatMessage]) -> None:
        if self.estimate is not None:
            self._charge(self.estimate(messages), estimated=True)

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        if self.budget.exhausted:
            now = time.time()
            return ModelReply(CallStatus.BUDGET.value, error=f"budget of {self.budget.limit} USD spent",
                              time_sent=now, time_done=now, retryable=False)
        try:
            reply = await self.inner.complete(messages, deadline=deadline, options=options)
        except asyncio.CancelledError:  # cut off in flight (the deadline guard, or the caller)
            self._charge_unanswered(messages)
            raise
        # A timeout the adapter reports as retryable was sent (not "no time left to send").
        if (reply.status == CallStatus.TIMEOUT.value and reply.retryable is not False and reply.cost is None
                and reply.input_tokens is None and reply.output_tokens is None):
            self._charge_unanswered(messages)
        else:
            self._charge(reply.cost)
        return reply
