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
import dataclasses
import heapq
import itertools
import math
import random
import threading
import time
from typing import Any, Optional

from ..types import NO_OPTIONS, CallOptions, CallStatus, ChatMessage, LanguageModel, ModelReply
from .calls import MIN_ATTEMPT_SECONDS, _PerLoop, _remaining, redact

RPM_WINDOW_SECONDS = 60.0
_RETRYABLE_STATUSES = {CallStatus.RATE_LIMITED.value, CallStatus.PROVIDER_ERROR.value, CallStatus.TIMEOUT.value}
# Statuses of a call the server answered in full: its duration is the server's time for it.
_ANSWERED = {CallStatus.OK.value, CallStatus.LENGTH.value, CallStatus.REFUSAL.value}


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


# What a call's duration is estimated from (below): the model's last calls of the same kind, at
# most this many and this old (so that a server that was slow for a while is tried again).
RECENT_CALLS = 20
RECENT_SECONDS = 600.0
# Beyond every answer: a call with no answer counts as at least as long as it ran; when most
# recent calls ran that long unanswered, the estimate is the longest of them times this.
UNANSWERED_GROWTH = 1.5


def _call_kind(options: CallOptions) -> Any:
    """What a call's length is estimated by: the shape of the reply the agent asks for (a
    decision, a message after n reasoning steps), None for a call that names none."""
    shape = options.shape
    return None if shape is None else (shape.kind, shape.steps)


def _kind_name(kind: Any) -> str:
    return "calls" if kind is None else f"{kind[0]} calls ({kind[1]} steps)"


@dataclasses.dataclass(frozen=True)
class DurationEstimate:
    """How long a call of a kind takes, from the model's recent calls of that kind."""

    seconds: float
    answered: int  # calls that came back, timed from the send to the reply
    unanswered: int  # calls cut off (deadline, a page's fallback), each after ``longest_unanswered`` s at most
    longest_unanswered: float
    beyond_answers: bool  # more than half were cut off after running longer than any answer took

    def describe(self) -> str:
        if self.beyond_answers:
            return (f"{self.unanswered} of the last {self.answered + self.unanswered} were cut off unanswered "
                    f"after up to {self.longest_unanswered:.1f} s: {UNANSWERED_GROWTH:g} x that")
        if not self.unanswered:
            return f"the median of the last {self.answered} answered"
        return (f"the median of the last {self.answered} answered and {self.unanswered} cut off unanswered, "
                f"each of those counted as at least as long as it ran")


class _Durations:
    """The durations of a model's recent calls per kind, answered ones exact, cut-off ones as
    lower bounds (right-censored): the estimate is their Kaplan-Meier median, which grows with
    every call cut off after running longer than it; above every answer, the longest cut-off
    call times UNANSWERED_GROWTH."""

    def __init__(self) -> None:
        self._by_kind: dict[Any, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=RECENT_CALLS))
        self._lock = threading.Lock()

    def add(self, kind: Any, seconds: float, answered: bool) -> None:
        with self._lock:
            self._by_kind[kind].append((time.monotonic(), seconds, answered))

    def forget_unanswered(self) -> int:
        """Drop the calls cut off unanswered (the answered ones stay); returns how many."""
        with self._lock:
            dropped = 0
            for kind, calls in self._by_kind.items():
                kept = [call for call in calls if call[2]]
                dropped += len(calls) - len(kept)
                self._by_kind[kind] = collections.deque(kept, maxlen=RECENT_CALLS)
            return dropped

    def estimate(self, kind: Any) -> Optional[DurationEstimate]:
        """None when no call of this kind was measured of late."""
        with self._lock:
            since = time.monotonic() - RECENT_SECONDS
            recent = [(seconds, answered) for at, seconds, answered in self._by_kind.get(kind, ()) if at >= since]
        if not recent:
            return None
        answered = sum(1 for _, ok in recent if ok)
        cut = [seconds for seconds, ok in recent if not ok]
        longest = max(cut, default=0.0)
        survival, at_risk = 1.0, len(recent)
        for seconds, ok in sorted(recent, key=lambda item: (item[0], not item[1])):  # answers first at ties
            if ok:
                survival *= (at_risk - 1) / at_risk
                if survival <= 0.5:
                    return DurationEstimate(seconds, answered, len(cut), longest, beyond_answers=False)
            at_risk -= 1
        return DurationEstimate(longest * UNANSWERED_GROWTH, answered, len(cut), longest, beyond_answers=True)


class RateLimitedModel:
    """At most ``concurrency`` requests in flight (per event loop), the earliest deadline first,
    and ``requests_per_minute``. A call is not sent when its deadline leaves less time than a call
    of its kind takes (``_Durations``: the model's recent calls of the same reply shape, a
    decision's long prompt takes a local server 2-3x a message's; those cut off unanswered count
    as at least as long as they ran): its stage would end before the reply, and the server would
    spend that time in vain while the next call waits. It is checked again when a slot frees up,
    with what was learnt meanwhile. The first call of a kind is sent: nothing was measured."""

    def __init__(self, inner: LanguageModel, *, concurrency: int, requests_per_minute: Optional[int]) -> None:
        self.inner = inner
        self.settings = inner.settings
        self._slots = _PerLoop(lambda: _DeadlineSlots(concurrency))
        self._window = _RequestsPerMinute(requests_per_minute) if requests_per_minute else None
        self.durations = _Durations()

    def forget_cut_off_calls(self) -> int:
        """Forget the calls cut off unanswered: after an experimenter's pause, in which the
        model's server may have been restarted or replaced, they would keep every turn from being
        sent until RECENT_SECONDS passed. Returns how many were forgotten."""
        return self.durations.forget_unanswered()

    def expected_seconds(self, kind: Any = None) -> Optional[float]:
        """How long a call of ``kind`` takes (None: not measured of late)."""
        estimate = self.durations.estimate(kind)
        return None if estimate is None else estimate.seconds

    def _too_late(self, kind: Any, deadline: float, waited: bool) -> Optional[ModelReply]:
        """A refusal when the time left is shorter than a call of this kind takes."""
        estimate = self.durations.estimate(kind)
        left = _remaining(deadline)
        if estimate is None or left >= estimate.seconds:
            return None
        where = "when a slot came free" if waited else "before sending"
        return ModelReply(CallStatus.TIMEOUT.value, retryable=False, time_sent=time.time(), not_sent=True,
                          error=f"not sent: {max(0.0, left):.1f} s were left {where}, and {_kind_name(kind)} of "
                                f"this model take about {estimate.seconds:.1f} s ({estimate.describe()})")

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        kind = _call_kind(options)
        refused = self._too_late(kind, deadline, waited=False)
        if refused is not None:  # too late already: not the window's doing
            return refused
        expected = self.expected_seconds(kind) or MIN_ATTEMPT_SECONDS
        latest_start = deadline - max(MIN_ATTEMPT_SECONDS, expected)
        if self._window is not None:
            send_at = self._window.reserve(latest_start)
            if send_at is None:
                return ModelReply(CallStatus.RATE_LIMITED.value, retryable=False, time_sent=time.time(),
                                  error="requests_per_minute limit: no slot before the deadline")
            await asyncio.sleep(max(0.0, send_at - time.monotonic()))
        slots = self._slots.get()
        if not await slots.acquire(deadline, latest_start):
            estimate = self.durations.estimate(kind)
            return ModelReply(CallStatus.TIMEOUT.value, retryable=False, time_sent=time.time(), not_sent=True, error=(
                "not sent: no slot came free before the deadline; no reply of this kind has been measured yet"
                if estimate is None else
                f"not sent: no slot came free while {estimate.seconds:.1f} s were still left, and "
                f"{_kind_name(kind)} of this model take about that ({estimate.describe()})"))
        started = None
        try:
            refused = self._too_late(kind, deadline, waited=True)  # learnt while it waited
            if refused is not None:
                return refused
            started = time.monotonic()
            reply = await self.inner.complete(messages, deadline=deadline, options=options)
            if reply.status in _ANSWERED:
                self.durations.add(kind, time.monotonic() - started, answered=True)
            elif reply.status == CallStatus.TIMEOUT.value and reply.retryable is not False:
                self.durations.add(kind, time.monotonic() - started, answered=False)  # cut off: at least this long
            return reply
        except BaseException:  # the deadline guard or the caller (a page's fallback) cut it off
            if started is not None:
                self.durations.add(kind, time.monotonic() - started, answered=False)
            raise
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

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        errors: list[str] = []
        first_sent: Optional[float] = None
        attempt = 0
        while True:
            attempt += 1
            reply = await self.inner.complete(messages, deadline=deadline, options=options)
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

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        time_sent = time.time()
        remaining = _remaining(deadline)
        if remaining <= 0:
            return ModelReply(CallStatus.TIMEOUT.value, error="deadline passed before sending", not_sent=True,
                              time_sent=time_sent, time_done=time_sent)
        try:
            async with asyncio.timeout(None if math.isinf(remaining) else remaining):
                return await self.inner.complete(messages, deadline=deadline, options=options)
        except TimeoutError:
            return ModelReply(CallStatus.TIMEOUT.value, error="deadline reached", time_sent=time_sent,
                              time_done=time.time())
        except Exception as error:  # a bug below must not take the turn down
            return ModelReply(CallStatus.PROVIDER_ERROR.value, error=redact(f"{type(error).__name__}: {error}"),
                              time_sent=time_sent, time_done=time.time())
