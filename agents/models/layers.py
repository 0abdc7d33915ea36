"""The layers around an adapter that keep a call inside its limits and its deadline.

``RateLimitedModel`` (a requests-per-minute window and a concurrency limit), ``RetryingModel``
(retries what may pass, while the deadline leaves room) and ``DeadlineGuard`` (the outermost:
returns a ``ModelReply`` by the deadline and never raises). The budget's layer is in
agents/models/budget.py; how they are stacked, in agents/models/build.py.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import random
import threading
import time
from typing import Optional

from ..types import CallStatus, ChatMessage, LanguageModel, ModelReply
from .calls import MIN_ATTEMPT_SECONDS, _PerLoop, _remaining, redact

RPM_WINDOW_SECONDS = 60.0
_RETRYABLE_STATUSES = {CallStatus.RATE_LIMITED.value, CallStatus.PROVIDER_ERROR.value, CallStatus.TIMEOUT.value}


class _RequestsPerMinute:
    """A sliding one-minute window of reserved send times, shared across threads and loops."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._sends: list[float] = []  # monotonic send times, sorted
        self._lock = threading.Lock()

    def reserve(self, latest: float) -> Optional[float]:
        """Reserve the earliest send time allowed, if it is <= ``latest``; return it or None.

        Reservations are first come, first served: the n-th send waits until a minute after the
        (n - per_minute)-th, so the list stays sorted by appending.
        """
        with self._lock:
            now = time.monotonic()
            del self._sends[: max(0, bisect.bisect_left(self._sends, now - RPM_WINDOW_SECONDS))]
            at = now
            if len(self._sends) >= self.per_minute:
                at = max(now, self._sends[-self.per_minute] + RPM_WINDOW_SECONDS)
            if at > latest:
                return None
            self._sends.append(at)
            return at


class RateLimitedModel:
    """At most ``concurrency`` requests in flight (per event loop) and ``requests_per_minute``."""

    def __init__(self, inner: LanguageModel, *, concurrency: int, requests_per_minute: Optional[int]) -> None:
        self.inner = inner
        self.settings = inner.settings
        self._semaphores = _PerLoop(lambda: asyncio.Semaphore(concurrency))
        self._window = _RequestsPerMinute(requests_per_minute) if requests_per_minute else None

    async def complete(self, messages: list[ChatMessage], *, deadline: float) -> ModelReply:
        latest_start = deadline - MIN_ATTEMPT_SECONDS
        if self._window is not None:
            send_at = self._window.reserve(latest_start)
            if send_at is None:
                return ModelReply(CallStatus.RATE_LIMITED.value, retryable=False, time_sent=time.time(),
                                  error="requests_per_minute limit: no slot before the deadline")
            await asyncio.sleep(max(0.0, send_at - time.monotonic()))
        semaphore = self._semaphores.get()
        try:
            async with asyncio.timeout(None if math.isinf(latest_start) else max(0.0, _remaining(latest_start))):
                await semaphore.acquire()
        except TimeoutError:
            return ModelReply(CallStatus.TIMEOUT.value, retryable=False, time_sent=time.time(),
                              error="concurrency limit: no slot before the deadline")
        try:
            return await self.inner.complete(messages, deadline=deadline)
        finally:
            semaphore.release()


class RetryingModel:
    """Retries what may pass (429, 5xx, dropped connections, attempt timeouts) inside the deadline."""

    def __init__(self, inner: LanguageModel, *, max_retries: int, base_delay: float, max_delay: float,
                 rng: Optional[random.Random] = None) -> None:
        self.inner = inner
        self.settings = inner.settings
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._rng = rng or random.Random()

    def _backoff(self, retry_number: int, retry_after: Optional[float]) -> float:
        delay = min(self.max_delay, self.base_delay * 2 ** (retry_number - 1))
        delay = self._rng.uniform(delay / 2, delay)  # jitter spreads the herd after a shared 429
        if retry_after is not None:
            delay = max(delay, retry_after + self._rng.uniform(0, 0.1))
        return delay

    async def complete(self, messages: list[ChatMessage], *, deadline: float) -> ModelReply:
        errors: list[str] = []
        first_sent: Optional[float] = None
        attempt = 0
        while True:
            attempt += 1
            reply = await self.inner.complete(messages, deadline=deadline)
            first_sent = first_sent or reply.time_sent
            if reply.error:
                errors.append(f"attempt {attempt}: {reply.status}: {reply.error}")
            retryable = reply.retryable if reply.retryable is not None else reply.status in _RETRYABLE_STATUSES
            if not retryable or reply.status not in _RETRYABLE_STATUSES or attempt > self.max_retries:
                break
            delay = self._backoff(attempt, reply.retry_after)
            if _remaining(deadline) - delay < MIN_ATTEMPT_SECONDS:
                errors.append(f"gave up: waiting {delay:.1f} s would pass the deadline")
                break
            await asyncio.sleep(delay)
        reply.retries = attempt - 1
        reply.time_sent = first_sent
        reply.error = "; ".join(errors) if errors else None
        return reply


class DeadlineGuard:
    """The outermost layer: returns by the deadline whatever happens below, and never raises."""

    def __init__(self, inner: LanguageModel) -> None:
        self.inner = inner
        self.settings = inner.settings

    async def complete(self, messages: list[ChatMessage], *, deadline: float) -> ModelReply:
        time_sent = time.time()
        remaining = _remaining(deadline)
        if remaining <= 0:
            return ModelReply(CallStatus.TIMEOUT.value, error="deadline passed before sending",
                              time_sent=time_sent, time_done=time_sent)
        try:
            async with asyncio.timeout(None if math.isinf(remaining) else remaining):
                return await self.inner.complete(messages, deadline=deadline)
        except TimeoutError:
            return ModelReply(CallStatus.TIMEOUT.value, error="deadline reached", time_sent=time_sent,
                              time_done=time.time())
        except Exception as error:  # a bug below must not take the turn down
            return ModelReply(CallStatus.PROVIDER_ERROR.value, error=redact(f"{type(error).__name__}: {error}"),
                              time_sent=time_sent, time_done=time.time())
