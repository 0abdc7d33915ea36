"""A local fake LLM server speaking OpenAI Chat Completions and Anthropic Messages.

Tests and benches point the real SDKs at it (no internet, dummy API keys) and tell it how to
misbehave at runtime::

    from tests.fake_llm_server import FakeLLMServer

    with FakeLLMServer() as server:
        client = AsyncOpenAI(base_url=server.base_url_openai, api_key="dummy")
        client = AsyncAnthropic(base_url=server.base_url_anthropic, api_key="dummy")
        server.set(mode="429", retry_after=30)     # every request: 429 + Retry-After: 30
        server.set(mode="500", fail_every_nth=2)   # every second request fails, the others are ok
        server.set(latency=2.0, mode="ok")         # every reply takes 2 s
        server.set(reply="STEP 1: ... <hi>")       # a fixed reply text
        server.set(reply=lambda request, api: ...) # reply computed from the request JSON
        server.request_count, server.requests, server.peak_in_flight
        server.reset()                             # back to defaults, counters to zero

Endpoints: ``POST {base_url_openai}/chat/completions`` (``base_url_openai`` ends in ``/v1``) and
``POST {base_url_anthropic}/v1/messages``. It binds 127.0.0.1 on a free port and serves each
connection on its own thread (>= 100 concurrent slow requests). API keys are neither checked nor
stored.

Settings (``set(**kwargs)``, all changeable while requests are in flight):

- ``latency`` (s, default 0): delay before every response, whatever the mode.
- ``mode``: ``"ok"`` | ``"slow"`` (waits ``slow_seconds`` more, default 30, then answers ok) |
  ``"429"`` (with ``Retry-After: retry_after``, default 1) | ``"500"`` | ``"drop"`` (closes the
  connection without a response) | ``"malformed"`` (200 with a body that is not JSON) |
  ``"truncated"`` (half the reply text, ``finish_reason "length"`` / ``stop_reason "max_tokens"``).
- ``fail_every_nth`` (int or None): when set, ``mode`` applies only to every n-th request (by the
  server-wide request count); the others are answered ok.
- ``fail_rate`` (0..1 or None): when set, ``mode`` applies to each request with this probability
  (drawn from a generator seeded by ``fault_seed``, default 0, in the order requests arrive);
  with ``fail_every_nth`` too, a request must be picked by both. E.g.
  ``server.set(mode="500", fail_rate=0.3)``: about 30 % of requests get HTTP 500.
- ``latency_jitter`` (s, default 0): a uniform random extra delay in [0, latency_jitter] on top of
  ``latency`` (same generator).
- ``reply``: None (default: a reply in the paper's format, a ``<message>`` or ``I DECIDE TO CHOOSE
  [A]`` depending on whether the last user prompt asks for a decision), a string, or a callable
  ``(request_json: dict, api: "openai" | "anthropic") -> str``.

- ``reasoning`` (str or None): OpenAI API only, sent as the message's ``reasoning_content`` (as
  vLLM, llama.cpp and DeepSeek return a reasoning model's thinking), beside the reply.
- ``context_window`` (int or None): a request whose messages (counted as characters / 4) plus
  ``max_tokens`` exceed it gets HTTP 400 with llama.cpp's context-size error.
- ``models`` (set of names or None): a request for another model gets HTTP 404 "model not found".
- ``grammar_fields`` (set or None): the grammar fields the server obeys, of ``grammar`` (llama.cpp's
  GBNF), ``structured_outputs`` and ``guided_regex`` (vLLM). An obeyed grammar that allows one
  literal only (the model check's probe, ``root ::= "X"`` or a regex without metacharacters) is
  answered with that literal; any other obeyed grammar leaves the reply as set. None: every
  grammar field is ignored, like a server that does not know them.
- ``reject_unknown_fields`` (bool): a grammar field the server does not obey gets HTTP 400
  ("unrecognized request argument"), as OpenAI's API answers.
- Streaming (a request with ``"stream": true``, OpenAI API): server-sent events, one piece of
  about four characters per chunk, after ``latency`` (the prompt's evaluation); ``token_seconds``
  (default 0) between pieces (the generation), and a client that leaves stops the reply, as
  llama.cpp's servers stop a streamed request. ``stream_usage`` (default True): a last chunk with
  ``usage`` when ``stream_options.include_usage`` asks (llama-server, vLLM; False: none, as
  llama-cpp-python). ``timings`` (dict or None): llama-server's ``timings`` in the last chunk.
  ``cut_stream``: end the stream without a finish reason (llama-cpp-python's interrupted reply).
- ``slots`` (int or None): ``GET /props`` answers ``{"total_slots": slots}`` as llama-server does
  (None: 404, as llama-cpp-python).

Counters: ``request_count`` (all requests received), ``requests`` (list of ``(api, request_json)``),
``in_flight`` and ``peak_in_flight`` (concurrent requests being served), ``served`` (one dict per
request answered or given up: ``stream``, ``seconds`` it took the server, ``client_left``).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Union

MODES = ("ok", "slow", "429", "500", "drop", "malformed", "truncated")
DEFAULTS: dict[str, Any] = {
    "latency": 0.0,
    "mode": "ok",
    "slow_seconds": 30.0,
    "retry_after": 1,
    "fail_every_nth": None,
    "fail_rate": None,
    "fault_seed": 0,
    "latency_jitter": 0.0,
    "reply": None,
    "reasoning": None,
    "context_window": None,
    "models": None,
    "grammar_fields": None,
    "reject_unknown_fields": False,
    "token_seconds": 0.0,
    "stream_usage": True,
    "timings": None,
    "cut_stream": False,
    "slots": None,
}
DEFAULT_MESSAGE_REPLY = (
    "STEP 1: If I choose B and my associate chooses A, I get 80 and they get 10; if both choose B, 40 each.\n"
    "STEP 2: If I choose A and my associate chooses A, we both get 70; if they choose B, I get 10.\n"
    "STEP 3: The ideal strategy pair is A/A.\n"
    "STEP 4: <Let's both choose A, we each get 70!>"
)
DEFAULT_DECISION_REPLY = (
    "STEP 1: B gives me 80 or 40.\nSTEP 2: A gives me 70 or 10.\n"
    "STEP 3: Each round has a new associate.\nSTEP 4: My associate proposed A/A.\n"
    "STEP 5: I keep my word.\nI DECIDE TO CHOOSE [A]"
)

ReplySource = Union[None, str, Callable[[dict, str], str]]


def default_reply(request: dict) -> str:
    """The paper's format: a decision if the last user prompt asks for one, else a message."""
    user_texts = [m.get("content") for m in request.get("messages", []) if m.get("role") == "user"]
    last = user_texts[-1] if user_texts else ""
    if isinstance(last, list):  # Anthropic content blocks
        last = " ".join(block.get("text", "") for block in last if isinstance(block, dict))
    return DEFAULT_DECISION_REPLY if "I DECIDE TO CHOOSE" in (last or "") else DEFAULT_MESSAGE_REPLY


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # never wait for sleeping handler threads on close
    request_queue_size = 512  # the bench opens 72+ connections at once


class FakeLLMServer:
    """Context manager running the fake server on a background thread; see the module doc."""

    def __init__(self, **settings: Any) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._settings = dict(DEFAULTS)
        self.request_count = 0
        self.requests: list[tuple[str, dict]] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.served: list[dict] = []
        self._rng = random.Random(DEFAULTS["fault_seed"])
        self.set(**settings)
        self._httpd: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None

    # --- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "FakeLLMServer":
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._httpd = _Server(("127.0.0.1", 0), _make_handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-llm-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a latency
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url_openai(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def base_url_anthropic(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- behaviour ---------------------------------------------------------------------
    def set(self, **settings: Any) -> None:
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown fake server settings: {sorted(unknown)}")
        if "mode" in settings and settings["mode"] not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        with self._lock:
            self._settings.update(settings)
            if "fault_seed" in settings:
                self._rng = random.Random(settings["fault_seed"])

    def reset(self) -> None:
        with self._lock:
            self._settings = dict(DEFAULTS)
            self._rng = random.Random(DEFAULTS["fault_seed"])
            self.request_count = 0
            self.requests = []
            self.served = []
            self.peak_in_flight = self.in_flight

    def _admit(self, api: str, request: dict) -> tuple[dict, str]:
        """Count the request; return the settings snapshot and the fault it gets."""
        with self._lock:
            self.request_count += 1
            self.requests.append((api, request))
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            settings = dict(self._settings)
            nth = settings["fail_every_nth"]
            applies = nth is None or self.request_count % nth == 0
            if settings["fail_rate"] is not None:
                applies = applies and self._rng.random() < settings["fail_rate"]
            if settings["latency_jitter"]:
                settings["latency"] += self._rng.uniform(0.0, settings["latency_jitter"])
            return settings, settings["mode"] if applies else "ok"

    def _leave(self, stream: bool, started: float, client_left: bool) -> None:
        with self._lock:
            self.in_flight -= 1
            self.served.append(dict(stream=stream, seconds=time.monotonic() - started, client_left=client_left))

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:
            slots = server._settings["slots"]
            if self.path.rstrip("/").endswith("/props") and slots is not None:
                self._send_json(200, {"total_slots": slots, "default_generation_settings": {"n_ctx": 4096}})
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path.rstrip("/").endswith("/chat/completions"):
                api = "openai"
            elif self.path.rstrip("/").endswith("/messages"):
                api = "anthropic"
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            settings, fault = server._admit(api, request)
            started, client_left = time.monotonic(), False
            try:
                server._sleep(settings["latency"] + (settings["slow_seconds"] if fault == "slow" else 0.0))
                self._respond(api, request, settings, fault)
            except (BrokenPipeError, ConnectionResetError):
                client_left = True  # the client gave up (its deadline): nothing to answer
            finally:
                server._leave(bool(request.get("stream")), started, client_left)

        def _respond(self, api: str, request: dict, settings: dict, fault: str) -> None:
            if fault == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if fault == "429":
                self._send_json(429, _error_body(api, "rate_limit_error", "rate limited (fake)"),
                                {"Retry-After": str(settings["retry_after"])})
                return
            if fault == "500":
                self._send_json(500, _error_body(api, "api_error", "internal error (fake)"))
                return
            if settings["models"] is not None and request.get("model") not in settings["models"]:
                self._send_json(404, _error_body(api, "not_found_error",
                                                 f"The model `{request.get('model')}` does not exist (fake)"))
                return
            window = settings["context_window"]
            if window is not None:
                prompt_tokens = _prompt_tokens(request)
                wanted = prompt_tokens + int(request.get("max_tokens") or request.get("max_completion_tokens") or 0)
                if wanted > window:
                    self._send_json(400, _error_body(
                        api, "exceed_context_size_error",
                        f"the request exceeds the available context size ({prompt_tokens} prompt tokens + "
                        f"max_tokens > n_ctx {window}), try increasing it"))
                    return
            grammar = _grammar_in(request)
            if grammar is not None and grammar[0] not in (settings["grammar_fields"] or ()):
                if settings["reject_unknown_fields"]:
                    self._send_json(400, _error_body(api, "invalid_request_error",
                                                     f"Unrecognized request argument supplied: {grammar[0]}"))
                    return
                grammar = None
            if fault == "malformed":
                self._send_raw(200, b'{"id": "broken", "choices": [', "application/json")
                return
            text = _reply_text(settings["reply"], request, api)
            literal = _only_literal(grammar)
            if literal is not None:
                text = literal
            truncated = fault == "truncated"
            if truncated:
                text = text[: max(1, len(text) // 2)]
            body = _success_body(api, request, text, truncated)
            if settings["reasoning"] is not None and api == "openai":
                body["choices"][0]["message"]["reasoning_content"] = settings["reasoning"]
            if api == "openai" and request.get("stream"):
                self._stream(request, settings, body, text)
                return
            self._send_json(200, body)

        def _stream(self, request: dict, settings: dict, body: dict, text: str) -> None:
            """The reply as server-sent events, a piece at a time; a client that leaves stops it
            (the write fails: BrokenPipeError or ConnectionResetError, as the caller expects)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            choice = body["choices"][0]

            def event(data: Any) -> None:
                payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
                self.wfile.write(f"data: {payload}\n\n".encode("utf-8"))
                self.wfile.flush()

            def chunk(delta: dict, finish_reason: Optional[str] = None, **extra: Any) -> dict:
                return {"id": body["id"], "object": "chat.completion.chunk", "model": body["model"],
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}

            event(chunk({"role": "assistant"}))
            if choice["message"].get("reasoning_content"):
                event(chunk({"reasoning_content": choice["message"]["reasoning_content"]}))
            for start in range(0, len(text), 4):
                if start:
                    server._sleep(settings["token_seconds"])
                event(chunk({"content": text[start: start + 4]}))
            if not settings["cut_stream"]:
                event(chunk({}, choice["finish_reason"], **({"timings": settings["timings"]}
                                                            if settings["timings"] else {})))
                if settings["stream_usage"] and (request.get("stream_options") or {}).get("include_usage"):
                    event({"id": body["id"], "object": "chat.completion.chunk", "model": body["model"],
                           "choices": [], "usage": body["usage"]})
            event("[DONE]")

        def _send_json(self, status: int, payload: dict, headers: Optional[dict] = None) -> None:
            self._send_raw(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json",
                           headers)

        def _send_raw(self, status: int, data: bytes, content_type: str, headers: Optional[dict] = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler


def _reply_text(source: ReplySource, request: dict, api: str) -> str:
    if source is None:
        return default_reply(request)
    if callable(source):
        return source(request, api)
    return source


GRAMMAR_FIELDS = ("grammar", "structured_outputs", "guided_regex")


def _grammar_in(request: dict) -> Optional[tuple[str, str]]:
    """(field, grammar text) of the first grammar field in the request, or None."""
    for field in GRAMMAR_FIELDS:
        value = request.get(field)
        if value:
            return field, (value.get("regex") or value.get("grammar") or "") if isinstance(value, dict) else value
    return None


def _only_literal(grammar: Optional[tuple[str, str]]) -> Optional[str]:
    """The one text a grammar allows, when it allows one literal only."""
    if grammar is None:
        return None
    field, text = grammar
    if field == "grammar":
        match = re.fullmatch(r'\s*root\s*::=\s*"([^"\\]*)"\s*', text)
        return match.group(1) if match else None
    return re.sub(r"\\(.)", r"\1", text) if re.escape(re.sub(r"\\(.)", r"\1", text)) == text else None


def _error_body(api: str, kind: str, message: str) -> dict:
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None}}


def _prompt_tokens(request: dict) -> int:
    return sum(len(str(m.get("content", ""))) for m in request.get("messages", [])) // 4 + 1


def _success_body(api: str, request: dict, text: str, truncated: bool) -> dict:
    input_tokens = _prompt_tokens(request)
    output_tokens = len(text) // 4 + 1
    model = request.get("model", "fake-model")
    if api == "anthropic":
        return {
            "id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens" if truncated else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "length" if truncated else "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                  "total_tokens": input_tokens + output_tokens},
    }
