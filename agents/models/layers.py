"""The layers around an adapter that keep a call inside its limits and its deadline.

``RateLimitedModel`` (a requests-per-minute window and a concurrency limit), ``RetryingModel``
(retries what may pass, while the deadline leaves room) and ``DeadlineGuard`` (the outermost:
returns a ``ModelReply`` by the deadline and never raises). The budget's layer is in
agents/models/budget.py; how they are stacked, in agents/models/build.py.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import heapq
import itertools
import math
import random
import statistics
import threading
import time
from typing import Any, Optional

from ..types import CallStatus, ChatMessage, LanguageModel, ModelReply
from .calls import MIN_ATTEMPT_SECONDS, _PerLoop, _remaining, current_call_options, redact

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


class _DeadlineSlots:
    """``slots`` requests in flight; a freed slot goes to the waiting call whose deadline comes
    first (earliest deadline first; equal deadlines in arrival order). With one slot (a local
    server answers one request at a time) a call due sooner, a decision with its 40 s stage,
    goes before calls due later, the messages of their 60 s stages, instead of behind them."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: list = []  # heap of (deadline, arrival, future)
        self._arrivals = itertools.count()

    async def acquire(self, deadline: float, latest_start: float) -> bool:
        """True with a slot; False if none came before ``latest_start``."""
        if _remaining(latest_start) < 0:
            return False
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return True
        granted = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (deadline, next(self._arrivals), granted))
        try:
            async with asyncio.timeout(None if math.isinf(latest_start) else max(0.0, _remaining(latest_start))):
                await asyncio.shield(granted)
            return True
        except TimeoutError:
            self._give_up(granted)
            return False
        except BaseException:  # the call itself cancelled
            self._give_up(granted)
            raise

    def _give_up(self, granted: asyncio.Future) -> None:
        if granted.done() and not granted.cancelled():
            self.release()  # the slot came as the wait ended: pass it on
        else:
            granted.cancel()  # release() skips it

    def release(self) -> None:
        while self._waiting:
            granted = heapq.heappop(self._waiting)[2]
            if not granted.done():
                granted.set_result(True)
                return
        self._free += 1


# Replies timed for the estimate of a call's length (below): the last this many of the model.
RECENT_REPLIES = 20
MIN_RECENT_REPLIES = 5


def _call_kind() -> Any:
    """What a call's length is estimated by: the shape of the reply the agent asks for (a
    decision, a message after n reasoning steps), None for a call that names none."""
    shape = current_call_options().shape
    return None if shape is None else (shape.kind, shape.steps)


class RateLimitedModel:
    """At most ``concurrency`` requests in flight (per event loop), the earliest deadline first,
    and ``requests_per_minute``. A call is not sent when its deadline leaves less time than the
    model's median reply of late to calls of its kind (the last RECENT_REPLIES answered of the same
    reply shape: a decision's long prompt takes a local server 2-3x a message's; before
    MIN_RECENT_REPLIES of its kind, all calls'): its stage would end before the reply, and a
    local server, which goes on computing a request its client gave up, would spend that time in
    vain while the next call waits."""

    def __init__(self, inner: LanguageModel, *, concurrency: int, requests_per_minute: Optional[int]) -> None:
        self.inner = inner
        self.settings = inner.settings
        self._slots = _PerLoop(lambda: _DeadlineSlots(concurrency))
        self._window = _RequestsPerMinute(requests_per_minute) if requests_per_minute else None
        # Seconds of the last replies, of all calls (key None) and per kind of call (_call_kind).
        self._recent_seconds: dict[Any, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=RECENT_REPLIES))

    def expected_seconds(self, kind: Any = None) -> float:
        for key in (kind, None):
            recent = self._recent_seconds.get(key)
            if recent is not None and len(recent) >= MIN_RECENT_REPLIES:
                return max(MIN_ATTEMPT_SECONDS, statistics.median(recent))
        return MIN_ATTEMPT_SECONDS

    async def complete(self, messages: list[ChatMessage], *, deadline: float) -> ModelReply:
        kind = _call_kind()
        expected = self.expected_seconds(kind)
        latest_start = deadline - expected
        if latest_start < time.monotonic():  # too late already: not the window's doing
            return ModelReply(CallStatus.TIMEOUT.value, retryable=False, time_sent=time.time(),
                              error=f"not sent: the deadline left less than {expected:.1f} s "
                                    f"(the model's median reply of late to such calls)")
        if self._window is not None:
            send_at = self._window.reserve(latest_start)
            if send_at is None:
                return ModelReply(CallStatus.RATE_LIMITED.value, retryable=False, time_sent=time.time(),
                                  error="requests_per_minute limit: no slot before the deadline")
            await asyncio.sleep(max(0.0, send_at - time.monotonic()))
        slots = self._slots.get()
        if not await slots.acquire(deadline, latest_start):
            return ModelReply(CallStatus.TIMEOUT.value, retryable=False, time_sent=time.time(),
                              error=f"not sent: no free slot while the deadline left {expected:.1f} s "
                                    f"(the model's median reply of late to such calls)")
        try:
            started = time.monotonic()
            reply = await self.inner.complete(messages, deadline=deadline)
            if reply.status == CallStatus.OK.value:
                for key in {kind, None}:
                    self._recent_seconds[key].append(time.monotonic() - started)
            return reply
        finally:
            slots.release()


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
