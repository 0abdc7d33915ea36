"""Provider adapters: ONE request each, through the provider's official async SDK.

``OpenAIChatModel`` (OpenAI, Gemini's OpenAI endpoint and OpenAI-compatible servers, by base
URL) and ``AnthropicModel``, with the SDK's own retries off and a per-attempt timeout no later
than the deadline. SDK clients are created lazily inside the running event loop, a few per loop
(``_ClientShards``); every failure becomes a status in the ``ModelReply`` (``_classify``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import re
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Optional

from ..config import ModelConfig
from ..types import NO_OPTIONS, CallOptions, CallStatus, ChatMessage, ModelReply, ModelSettings
from .. import grammars
from .calls import MIN_ATTEMPT_SECONDS, _PerLoop, _remaining, redact

# Inner layers stop this much before the deadline so that the outer guard never has to cut them
# off (which would lose the record of retries and errors).
INNER_DEADLINE_MARGIN = 0.02

# How providers and servers say a request does not fit the model's window (OpenAI, vLLM,
# llama.cpp, Ollama, Anthropic).
_CONTEXT_OVERFLOW = re.compile(r"context length|context window|context_length|maximum context|exceeds? the context|"
                               r"too many tokens|prompt is too long|n_ctx|exceed_context_size", re.IGNORECASE)

# Per-request timing filled by the HTTP client's response hook (first byte = headers received).
_request_timing: contextvars.ContextVar[Optional[dict]] = contextvars.ContextVar("agents_request_timing",
                                                                                 default=None)


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

    async def _send(self, client: Any, messages: list[ChatMessage], timeout: float,
                    options: CallOptions) -> ModelReply:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the current loop's clients (optional; clients also die with their loop)."""
        shards = self._clients.pop_current()
        if shards is not None:
            await shards.close()

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        time_sent = time.time()
        budget_seconds = min(self.cfg.request_timeout, _remaining(deadline) - INNER_DEADLINE_MARGIN)
        if budget_seconds < MIN_ATTEMPT_SECONDS / 2:
            return ModelReply(CallStatus.TIMEOUT.value, error="no time left to send", time_sent=time_sent,
                              time_done=time.time(), retryable=False, not_sent=True)
        timing: dict[str, float] = {}
        _request_timing.set(timing)
        try:
            async with asyncio.timeout(budget_seconds):
                reply = await self._send(self._clients.get().next(), messages, budget_seconds, options)
        except TimeoutError:
            reply = ModelReply(CallStatus.TIMEOUT.value, error=f"no reply within {budget_seconds:.1f} s",
                               retryable=True)
        except Exception as error:  # every SDK/HTTP/JSON failure becomes a status, never an exception
            reply = self._classify(error)
        reply.time_sent = time_sent
        # A streamed reply's first token, else the response's headers.
        reply.time_first_byte = timing.get("first_token") or timing.get("first_byte")
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

    def request_parameters(self, options: CallOptions = NO_OPTIONS) -> dict[str, Any]:
        params: dict[str, Any] = {}
        temperature = options.temperature if options.temperature is not None else self.settings.temperature
        if temperature is not None:
            params["temperature"] = temperature
        # OpenAI's current models take max_completion_tokens; compatible servers know max_tokens.
        params["max_completion_tokens" if self.cfg.provider == "openai" else "max_tokens"] = \
            options.max_tokens or self.settings.max_tokens
        seed = options.seed if options.seed is not None else self.settings.seed
        if seed is not None:
            params["seed"] = seed
        # The paper's format as the server's grammar (agents/grammars.py), when the config says so:
        # what the OpenAI SDK would send as extra_body, in the server's own field.
        if self.settings.grammar is not None and options.shape is not None:
            params.update(grammars.request_fields(self.settings.grammar, options.shape, self.settings.max_tokens))
        params.update(options.fields or {})
        return params

    async def _send(self, client: Any, messages: list[ChatMessage], timeout: float,
                    options: CallOptions) -> ModelReply:
        body = {"model": self.settings.model,
                "messages": [{"role": m.role, "content": m.content} for m in messages],
                **self.request_parameters(options)}
        if self.cfg.provider == "openai_compatible":
            return await self._send_streamed(client, body, timeout)
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

    async def _send_streamed(self, client: Any, body: dict, timeout: float) -> ModelReply:
        """A local server's reply as a stream. When the lab gives up on a call (its deadline, a
        page's fallback) the stream is closed and the server stops: llama-cpp-python computes a
        request whose client left to the end unless it streams (measured: a quick call after an
        abandoned 600-token reply waited 6.8 s unstreamed, 0.1 s streamed). The first token's
        arrival (``first_token``) times the prompt's evaluation."""
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        stream = await client.post("/chat/completions", body=body, options={"timeout": timeout},
                                   cast_to=self._sdk.types.chat.ChatCompletion, stream=True,
                                   stream_cls=self._sdk.AsyncStream[object])  # chunks as plain dicts
        parts: list[str] = []
        reasoning: list[str] = []
        finish_reason, usage, timings, pieces = None, None, None, 0
        async with stream:
            async for chunk in stream:
                usage = chunk.get("usage") or usage
                timings = chunk.get("timings") or timings  # llama-server: prompt_n, prompt_ms, ...
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    timing = _request_timing.get()
                    if (delta.get("content") or choice.get("finish_reason")) and timing is not None \
                            and "first_token" not in timing:  # the prompt is evaluated (a token may be "")
                        timing["first_token"] = time.time()
                    if delta.get("content"):
                        parts.append(delta["content"])
                        pieces += 1
                    thinking = delta.get("reasoning_content") or delta.get("reasoning")
                    if isinstance(thinking, str):
                        reasoning.append(thinking)
                    finish_reason = choice.get("finish_reason") or finish_reason
        text = "".join(parts)
        # Without usage (llama-cpp-python streams none) a piece of the stream is a token.
        tokens = dict(input_tokens=(usage or {}).get("prompt_tokens"),
                      output_tokens=(usage or {}).get("completion_tokens", pieces),
                      reasoning="".join(reasoning) or None, timings=timings)
        if finish_reason is None:
            return ModelReply(CallStatus.PROVIDER_ERROR.value, text=text or None, retryable=True, **tokens,
                              error="the server ended the reply without a finish reason (llama-cpp-python cuts "
                                    "a streamed reply when another request arrives: start it with "
                                    "--interrupt_requests false, or set llm_concurrency to 1)")
        if finish_reason == "content_filter":
            return ModelReply(CallStatus.REFUSAL.value, text=text, error="refused (finish_reason content_filter)",
                              **tokens)
        if finish_reason == "length":
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

    def request_parameters(self, options: CallOptions = NO_OPTIONS) -> dict[str, Any]:
        params: dict[str, Any] = {"max_tokens": options.max_tokens or self.settings.max_tokens}
        temperature = options.temperature if options.temperature is not None else self.settings.temperature
        if temperature is not None:
            params["temperature"] = temperature
        return params  # the Messages API has no seed

    async def _send(self, client: Any, messages: list[ChatMessage], timeout: float,
                    options: CallOptions) -> ModelReply:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        turns = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        extra: dict[str, Any] = {"system": system} if system else {}
        parameters = self.request_parameters(options)
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
_WARM_UP_STREAM = (b'data: {"choices": [{"index": 0, "delta": {"content": "."}, "finish_reason": "stop"}]}\n\n'
                   b'data: [DONE]\n\n')
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

    def respond(request: Any) -> Any:
        if b'"stream":true' in request.content.replace(b" ", b""):  # a local server's streamed reply
            return httpx2.Response(200, content=_WARM_UP_STREAM, headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, json=body)

    async def one_request() -> None:
        client = adapter._new_client(httpx2.MockTransport(respond))
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
