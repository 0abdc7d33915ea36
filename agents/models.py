"""Language models on real providers, behind one small interface, that never overrun a deadline.

``build_model(cfg)`` returns a ``LanguageModel`` made of layers that each take and return a
``LanguageModel`` (Concordia style)::

    DeadlineGuard(RetryingModel(RateLimitedModel(BudgetedModel(adapter))))

- the adapter sends ONE request through the provider's official async SDK (``openai``,
  ``anthropic``; Gemini and OpenAI-compatible servers through ``openai`` with a base URL), with
  the SDK's own retries off and a per-attempt timeout no later than the deadline;
- ``RateLimitedModel``: a requests-per-minute window (shared by every loop and thread) and a
  concurrency limit (per event loop); waiting for either counts against the deadline;
- ``RetryingModel``: retries 429 / 5xx / dropped connections / per-attempt timeouts with jittered
  exponential backoff, honouring Retry-After, but only while the deadline leaves room;
- ``BudgetedModel``: refuses to send once a shared ``Budget`` is spent. It sits innermost, so
  the budget is checked when a request is actually sent (after the rate and concurrency queues,
  and before each retry), and each attempt's cost is charged as its reply arrives;
- ``DeadlineGuard``: ``asyncio.timeout`` at the deadline and a catch-all, so ``complete`` returns
  a ``ModelReply`` by the deadline and never raises (cancellation by the caller excepted).

SDK clients are created lazily inside the running event loop, one per loop (an async client
belongs to one loop). Error texts are scrubbed of keys before they are recorded.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import contextvars
import itertools
import math
import random
import re
import threading
import time
import weakref
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterator, Optional

from .config import ConfigError, ModelConfig
from .types import CallStatus, ChatMessage, LanguageModel, ModelReply, ModelSettings

# An attempt needs at least this long to be worth sending; less, and the turn gives up instead.
MIN_ATTEMPT_SECONDS = 0.25
# Inner layers stop this much before the deadline so that the outer guard never has to cut them
# off (which would lose the record of retries and errors).
INNER_DEADLINE_MARGIN = 0.02
RPM_WINDOW_SECONDS = 60.0
MAX_ERROR_CHARS = 300
_RETRYABLE_STATUSES = {CallStatus.RATE_LIMITED.value, CallStatus.PROVIDER_ERROR.value, CallStatus.TIMEOUT.value}
_SECRET_PATTERN = re.compile(r"(sk-[A-Za-z0-9_\-]{3,}|sk_[A-Za-z0-9_\-]{3,}|AIza[0-9A-Za-z_\-]{8,}|"
                             r"(?i:bearer)\s+\S+|(?i:x-api-key)[\"':\s]+\S+)")

# How providers and servers say a request does not fit the model's window (OpenAI, vLLM,
# llama.cpp, Ollama, Anthropic).
_CONTEXT_OVERFLOW = re.compile(r"context length|context window|context_length|maximum context|exceeds? the context|"
                               r"too many tokens|prompt is too long|n_ctx|exceed_context_size", re.IGNORECASE)

# What the current call is, set by the caller (the agent): lets the simulated model draw its
# randomness per agent, round and turn, independent of the order concurrent calls are served.
_call_scope: contextvars.ContextVar[str] = contextvars.ContextVar("agents_call_scope", default="")
# Per-request timing filled by the HTTP client's response hook (first byte = headers received).
_request_timing: contextvars.ContextVar[Optional[dict]] = contextvars.ContextVar("agents_request_timing",
                                                                                 default=None)


# --- shared pieces -------------------------------------------------------------------------
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


@contextlib.contextmanager
def call_scope(name: str) -> Iterator[None]:
    """Name the logical call made inside this block (e.g. ``agent-3|seed|r2|decision|1``)."""
    token = _call_scope.set(name)
    try:
        yield
    finally:
        _call_scope.reset(token)


def current_call_scope() -> str:
    return _call_scope.get()


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


def redact(text: str, *secrets: Optional[str]) -> str:
    """Remove keys (the configured one and anything shaped like one) from an error text."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _SECRET_PATTERN.sub("[redacted]", text)[:MAX_ERROR_CHARS]


def _remaining(deadline: float) -> float:
    return deadline - time.monotonic()


class _PerLoop:
    """One object per running event loop (SDK clients, semaphores), created on first use."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._objects: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            if loop not in self._objects:
                self._objects[loop] = self._factory()
            return self._objects[loop]

    def pop_current(self) -> Any:
        with self._lock:
            return self._objects.pop(asyncio.get_running_loop(), None)


class _ClientShards:
    """A few SDK clients used in turn, each with its own connection pool.

    The SDKs' HTTP pool (httpcore) checks every idle connection it holds, with a system call
    each, whenever it hands out or takes back a connection. A lab's 72 agents calling at once
    leave 72 connections in one pool, so each request then paid for 72 checks, twice: with 5 s
    replies that was 22 % of the engine thread's samples (py-spy under bench/lab_load.py), on
    the thread all agents share, which also shares the GIL with oTree's pages. Spread over
    ``CLIENT_SHARDS`` clients, each pool holds a few (the checks per call fell from 73 to 10 in
    a profile of 432 turns); connections are kept alive as before."""

    def __init__(self, factory: Callable[[], Any], count: int) -> None:
        self.clients = [factory() for _ in range(count)]
        self._turn = itertools.cycle(self.clients)

    def next(self) -> Any:
        return next(self._turn)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


# SDK clients per event loop: about eight concurrent requests per pool at a lab's 72.
CLIENT_SHARDS = 8


# --- provider adapters: one attempt each ---------------------------------------------------------
class _SDKAdapter:
    """What the OpenAI and Anthropic adapters share: the clients per loop and error handling."""

    def __init__(self, cfg: ModelConfig, settings: ModelSettings) -> None:
        self.cfg = cfg
        self.settings = settings
        self._clients = _PerLoop(lambda: _ClientShards(self._new_client, CLIENT_SHARDS))
        # Import the SDK now (seconds, at session creation), not on the first turn inside the loop.
        self._sdk = self._import_sdk()
        _warm_up_once(self)

    def _import_sdk(self) -> Any:
        raise NotImplementedError

    def _new_client(self, transport: Any = None) -> Any:
        raise NotImplementedError

    def _warm_up_body(self) -> dict:
        """A minimal successful response body of the provider's API."""
        raise NotImplementedError

    async def _send(self, client: Any, messages: list[ChatMessage], timeout: float) -> ModelReply:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the current loop's clients (optional; clients also die with their loop)."""
        shards = self._clients.pop_current()
        if shards is not None:
            await shards.close()

    async def complete(self, messages: list[ChatMessage], *, deadline: float) -> ModelReply:
        time_sent = time.time()
        budget_seconds = min(self.cfg.request_timeout, _remaining(deadline) - INNER_DEADLINE_MARGIN)
        if budget_seconds < MIN_ATTEMPT_SECONDS / 2:
            return ModelReply(CallStatus.TIMEOUT.value, error="no time left to send", time_sent=time_sent,
                              time_done=time.time(), retryable=False)
        timing: dict[str, float] = {}
        _request_timing.set(timing)
        try:
            async with asyncio.timeout(budget_seconds):
                reply = await self._send(self._clients.get().next(), messages, budget_seconds)
        except TimeoutError:
            reply = ModelReply(CallStatus.TIMEOUT.value, error=f"no reply within {budget_seconds:.1f} s",
                               retryable=True)
        except Exception as error:  # every SDK/HTTP/JSON failure becomes a status, never an exception
            reply = self._classify(error)
        reply.time_sent = time_sent
        reply.time_first_byte = timing.get("first_byte")
        reply.time_done = time.time()
        if reply.status in (CallStatus.OK.value, CallStatus.LENGTH.value, CallStatus.REFUSAL.value):
            reply.cost = self.cfg.cost(reply.input_tokens, reply.output_tokens)
        return reply

    def _http_client(self, sdk_default_client: type, transport: Any = None) -> Any:
        async def on_response(response: Any) -> None:
            timing = _request_timing.get()
            if timing is not None and "first_byte" not in timing:
                timing["first_byte"] = time.time()

        extra = {"transport": transport} if transport is not None else {}
        return sdk_default_client(event_hooks={"response": [on_response]}, **extra)

    def _classify(self, error: Exception) -> ModelReply:
        status_code = getattr(error, "status_code", None)
        name = type(error).__name__
        text = redact(f"{name}{f' HTTP {status_code}' if status_code else ''}: {error}", self.cfg.api_key())
        if "Timeout" in name:  # APITimeoutError of either SDK
            return ModelReply(CallStatus.TIMEOUT.value, error=text, retryable=True)
        if status_code is None:  # connection dropped, malformed JSON, protocol errors
            return ModelReply(CallStatus.PROVIDER_ERROR.value, error=text, retryable=True)
        retry_after = _retry_after_seconds(getattr(error, "response", None))
        if status_code == 429:
            return ModelReply(CallStatus.RATE_LIMITED.value, error=text, retry_after=retry_after, retryable=True)
        if status_code in (401, 403, 404):
            return ModelReply(CallStatus.CONFIG_ERROR.value, error=text, retryable=False)
        if status_code in (400, 413, 422) and _CONTEXT_OVERFLOW.search(str(error)):
            return ModelReply(CallStatus.CONTEXT_OVERFLOW.value, error=text, retryable=False)
        if status_code in (408, 409) or status_code >= 500:
            return ModelReply(CallStatus.PROVIDER_ERROR.value, error=text, retry_after=retry_after, retryable=True)
        return ModelReply(CallStatus.PROVIDER_ERROR.value, error=text, retryable=False)  # 400, 422: our request


class OpenAIChatModel(_SDKAdapter):
    """OpenAI Chat Completions: OpenAI itself, Gemini's OpenAI endpoint, vLLM/llama.cpp/Ollama/OpenRouter."""

    def _import_sdk(self) -> Any:
        import openai

        return openai

    def _new_client(self, transport: Any = None) -> Any:
        return self._sdk.AsyncOpenAI(
            api_key=self.cfg.api_key() or "not-needed",  # local servers ignore the key
            base_url=self.cfg.base_url,
            max_retries=0,  # retries are ours, bounded by the deadline
            timeout=self.cfg.request_timeout,
            http_client=self._http_client(self._sdk.DefaultAsyncHttpxClient, transport),
        )

    def _warm_up_body(self) -> dict:
        return {"id": "warm-up", "object": "chat.completion", "created": 0, "model": self.settings.model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "."}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    def request_parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.settings.temperature is not None:
            params["temperature"] = self.settings.temperature
        # OpenAI's current models take max_completion_tokens; compatible servers know max_tokens.
        params["max_completion_tokens" if self.cfg.provider == "openai" else "max_tokens"] = self.settings.max_tokens
        if self.settings.seed is not None:
            params["seed"] = self.settings.seed
        return params

    async def _send(self, client: Any, messages: list[ChatMessage], timeout: float) -> ModelReply:
        body = {"model": self.settings.model,
                "messages": [{"role": m.role, "content": m.content} for m in messages],
                **self.request_parameters()}
        # The SDK's own POST (auth, HTTP, error types as with .create()), without .create()'s
        # walk over the typed request body: that walk costs ~14 ms of CPU for a 30-message
        # conversation, on the thread that 72 agents share (measured by bench/simulate.py).
        response = await client.post("/chat/completions", body=body, options={"timeout": timeout},
                                     cast_to=self._sdk.types.chat.ChatCompletion)
        usage = getattr(response, "usage", None)
        tokens = dict(input_tokens=getattr(usage, "prompt_tokens", None),
                      output_tokens=getattr(usage, "completion_tokens", None))
        if not response.choices:
            return ModelReply(CallStatus.PROVIDER_ERROR.value, error="reply without choices", retryable=True,
                              **tokens)
        choice = response.choices[0]
        text = choice.message.content or ""
        # Reasoning models behind OpenAI-compatible servers (vLLM, llama.cpp, DeepSeek, OpenRouter)
        # return their thinking apart; it goes on the record, never into the reply that is parsed.
        extra = getattr(choice.message, "model_extra", None) or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning") or None
        tokens["reasoning"] = reasoning if isinstance(reasoning, str) else None
        if getattr(choice.message, "refusal", None) or choice.finish_reason == "content_filter":
            return ModelReply(CallStatus.REFUSAL.value, text=text or choice.message.refusal,
                              error=f"refused (finish_reason {choice.finish_reason})", **tokens)
        if choice.finish_reason == "length":
            return ModelReply(CallStatus.LENGTH.value, text=text, error="truncated at max_tokens", **tokens)
        return ModelReply(CallStatus.OK.value, text=text, **tokens)


class AnthropicModel(_SDKAdapter):
    """Anthropic Messages: the system prompt goes apart, the rest must alternate user/assistant."""

    def _import_sdk(self) -> Any:
        import anthropic

        return anthropic

    def _new_client(self, transport: Any = None) -> Any:
        return self._sdk.AsyncAnthropic(
            api_key=self.cfg.api_key() or "not-needed",
            base_url=self.cfg.base_url,
            max_retries=0,
            timeout=self.cfg.request_timeout,
            http_client=self._http_client(self._sdk.DefaultAsyncHttpxClient, transport),
        )

    def _warm_up_body(self) -> dict:
        return {"id": "warm-up", "type": "message", "role": "assistant", "model": self.settings.model,
                "content": [{"type": "text", "text": "."}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1}}

    def request_parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {"max_tokens": self.settings.max_tokens}
        if self.settings.temperature is not None:
            params["temperature"] = self.settings.temperature
        return params  # the Messages API has no seed

    async def _send(self, client: Any, messages: list[ChatMessage], timeout: float) -> ModelReply:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        turns = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        extra: dict[str, Any] = {"system": system} if system else {}
        parameters = self.request_parameters()
        if "temperature" in parameters:
            # anthropic 2.x dropped the sampling keywords from messages.create; the API still takes it.
            extra["extra_body"] = {"temperature": parameters.pop("temperature")}
        response = await client.messages.create(model=self.settings.model, messages=turns, timeout=timeout,
                                                **extra, **parameters)
        text = "".join(getattr(block, "text", "") for block in response.content or [])
        # Extended thinking comes as "thinking" blocks: on the record, never in the parsed reply.
        thinking = "\n".join(getattr(block, "thinking", "") or "" for block in response.content or []
                             if getattr(block, "type", "") == "thinking")
        usage = getattr(response, "usage", None)
        tokens = dict(input_tokens=getattr(usage, "input_tokens", None),
                      output_tokens=getattr(usage, "output_tokens", None), reasoning=thinking or None)
        if response.stop_reason == "refusal":
            return ModelReply(CallStatus.REFUSAL.value, text=text, error="refused (stop_reason refusal)", **tokens)
        if response.stop_reason == "max_tokens":
            return ModelReply(CallStatus.LENGTH.value, text=text, error="truncated at max_tokens", **tokens)
        return ModelReply(CallStatus.OK.value, text=text, **tokens)


_warmed_up: set[str] = set()
_warm_up_lock = threading.Lock()


def _warm_up_once(adapter: _SDKAdapter) -> None:
    """Pay an SDK's first-request cost (lazy imports, building its models: ~0.6 s) at build time.

    One request through an in-memory transport, on a private loop in a private thread (build_model
    may be called from inside a running loop). Once per SDK per process; a failure only costs the
    first real turn that time.
    """
    with _warm_up_lock:
        if adapter._sdk.__name__ in _warmed_up:
            return
        _warmed_up.add(adapter._sdk.__name__)
    import httpx2

    body = adapter._warm_up_body()

    async def one_request() -> None:
        client = adapter._new_client(httpx2.MockTransport(lambda request: httpx2.Response(200, json=body)))
        try:
            await adapter._send(client, [ChatMessage("user", "warm-up")], adapter.cfg.request_timeout)
        finally:
            await client.close()

    def run() -> None:
        with contextlib.suppress(Exception):
            asyncio.run(one_request())

    worker = threading.Thread(target=run, name="agents-sdk-warm-up")
    worker.start()
    worker.join()


def _retry_after_seconds(response: Any) -> Optional[float]:
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    if headers.get("retry-after-ms"):
        with contextlib.suppress(ValueError):
            return float(headers["retry-after-ms"]) / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        with contextlib.suppress(TypeError, ValueError):
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    return None


# --- layers ---------------------------------------------------------------------------------------
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

    async def complete(self, messages: list[ChatMessage], *, deadline: float) -> ModelReply:
        if self.budget.exhausted:
            now = time.time()
            return ModelReply(CallStatus.BUDGET.value, error=f"budget of {self.budget.limit} USD spent",
                              time_sent=now, time_done=now, retryable=False)
        try:
            reply = await self.inner.complete(messages, deadline=deadline)
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


# --- building --------------------------------------------------------------------------------------
def model_settings(cfg: ModelConfig) -> ModelSettings:
    """What is sent: Anthropic has no seed, so none is recorded for it."""
    return ModelSettings(provider=cfg.provider, model=cfg.model, temperature=cfg.temperature,
                         max_tokens=cfg.max_tokens, seed=None if cfg.provider == "anthropic" else cfg.seed,
                         context_window=cfg.resolved_context_window(), memory=cfg.memory)


def build_adapter(cfg: ModelConfig) -> LanguageModel:
    """The bare provider adapter (one attempt per call, no limits). Prefer ``build_model``."""
    settings = model_settings(cfg)
    if cfg.provider == "simulated":
        from .simulated import SimulatedModel

        return SimulatedModel(cfg)
    if cfg.api_key_env and not cfg.api_key():  # openai_compatible names none unless its server needs one
        raise ConfigError(f"api_key_env: the environment variable {cfg.api_key_env} is not set "
                          f"(provider {cfg.provider!r} needs an API key)")
    if cfg.provider == "anthropic":
        return AnthropicModel(cfg, settings)
    return OpenAIChatModel(cfg, settings)


def unanswered_cost(cfg: ModelConfig) -> Callable[[list[ChatMessage]], Optional[float]]:
    """An upper bound of what a sent request may be billed: its prompt plus a full reply."""
    from .tokens import count_message_tokens

    def estimate(messages: list[ChatMessage]) -> Optional[float]:
        return cfg.cost(count_message_tokens(messages, cfg.provider), cfg.max_tokens)

    return estimate


def build_model(cfg: ModelConfig, *, budget: Optional[Budget] = None,
                charge_unanswered: bool = False) -> LanguageModel:
    """The provider adapter with retries, rate limits, the budget and the deadline guard.

    ``charge_unanswered``: a request sent and never answered is charged to ``budget`` as its
    prompt plus a full reply (``unanswered_cost``) instead of nothing.
    Raises ``ConfigError`` now (at session creation) for a missing API key; everything that can
    go wrong later is a status in a ``ModelReply``.
    """
    model: LanguageModel = build_adapter(cfg)
    if budget is not None:
        # Innermost: checked when the request is sent, not when it joins the queue (a queued call
        # passing a check made before the wait would overshoot the budget by the whole queue).
        model = BudgetedModel(model, budget, estimate=unanswered_cost(cfg) if charge_unanswered else None)
    if cfg.provider != "simulated":  # no provider to protect, nothing that could pass on a retry
        model = RateLimitedModel(model, concurrency=cfg.concurrency, requests_per_minute=cfg.requests_per_minute)
        model = RetryingModel(model, max_retries=cfg.max_retries, base_delay=cfg.retry_base_delay,
                              max_delay=cfg.retry_max_delay)
    return DeadlineGuard(model)



# --- the model check -------------------------------------------------------------------------------
CHECK_PROMPT = "This is a connection test. Reply with the single word OK."
CHECK_SECONDS = 30.0
_PLAIN_STATUS = {
    CallStatus.CONFIG_ERROR.value: "the provider refused the key or does not know the model",
    CallStatus.PROVIDER_ERROR.value: "the provider could not be reached or answered with an error",
    CallStatus.TIMEOUT.value: "no answer in time",
    CallStatus.RATE_LIMITED.value: "the provider is rate-limiting this key",
    CallStatus.CONTEXT_OVERFLOW.value: "the model's context window is too small even for a test prompt",
    CallStatus.BUDGET.value: "the budget is spent",
}


def check_model(cfg: ModelConfig, *, seconds: float = CHECK_SECONDS,
                model: Optional[LanguageModel] = None) -> tuple[Optional[str], ModelReply]:
    """One real call with ``cfg``'s settings: (None, reply) when the model answered, else
    (a plain sentence naming the problem and the provider's own error, reply).

    Runs on a private thread with its own loop, so it may be called from a synchronous hook or
    from inside a running event loop (session creation). The simulated model passes trivially.
    """
    if cfg.provider == "simulated":
        return None, ModelReply(CallStatus.OK.value, text="OK")
    model = model or build_model(cfg)
    outcome: list[ModelReply] = []

    def run() -> None:
        async def one_call() -> ModelReply:
            return await model.complete([ChatMessage("user", CHECK_PROMPT)],
                                        deadline=time.monotonic() + min(seconds, cfg.request_timeout))

        try:
            outcome.append(asyncio.run(one_call()))
        except Exception as error:  # pragma: no cover - DeadlineGuard already turns errors into replies
            outcome.append(ModelReply(CallStatus.PROVIDER_ERROR.value, error=redact(repr(error))))

    worker = threading.Thread(target=run, name="agents-model-check")
    worker.start()
    worker.join()
    reply = outcome[0]
    if reply.status in (CallStatus.OK.value, CallStatus.LENGTH.value, CallStatus.REFUSAL.value):
        return None, reply  # the model answered: reachable, key and name accepted
    where = f" at {cfg.base_url}" if cfg.base_url else ""
    problem = _PLAIN_STATUS.get(reply.status, reply.status)
    error = re.sub(r"attempt \d+: \w+: ", "", reply.error or reply.status)  # the retry layer's bookkeeping
    return (f"the model check (one call to {cfg.provider} model {cfg.model!r}{where}) failed: {problem}. "
            f"Provider's error: {error}"), reply
