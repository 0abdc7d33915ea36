"""A response cache for any ``LanguageModel``: an identical rerun is free and reproducible.

The key is a hash of the provider, the model, the parameters sent, the exact messages, a
*scope* and a *sample index*. The scope names the logical call (e.g. one agent's turn in one
game, set with ``cache_scope``); the sample index counts identical requests within a scope.
So identical prompts in different games are still independent samples, while a rerun asks
the same questions in the same scopes and gets the recorded answers. Without a scope the
sample index is the n-th identical request of the process (a sweep drawing several samples
of one prompt gets samples 0, 1, 2... again on rerun).

A reply is stored before it is returned, so a call that finished before a crash is served
from the cache afterwards and never paid twice. Only replies that cost tokens are stored
(ok, length, refusal); errors are retried on rerun.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Callable, Optional

from agents.models.calls import context_value
from agents.types import NO_OPTIONS, CallOptions, CallStatus, ChatMessage, ModelReply

_scope: contextvars.ContextVar[str] = contextvars.ContextVar("cache_scope", default="")

CACHEABLE_STATUSES = {CallStatus.OK.value, CallStatus.LENGTH.value, CallStatus.REFUSAL.value}


def cache_scope(name: str) -> contextlib.AbstractContextManager:
    """Name the logical call(s) made inside this block (asyncio tasks inherit it)."""
    return context_value(_scope, name)


def current_cache_scope() -> str:
    return _scope.get()


def arm_scope(arm_label: str, *call: str) -> str:
    """The scope of one logical call of one arm of a run (a model entry of the config, named by its
    ``label``): the arm's label first, then what names the call. The tournament's scopes start with
    a unit's id (design.Unit.id) and the replay's are built here, so two arms that send identical
    requests (one model and settings behind two endpoints, or under two labels) never share a
    stored reply: each arm's results are its own."""
    return "|".join((arm_label, *call))


class ResponseCache:
    """SQLite table: key -> the provider's reply. One file, shared by runs that share it."""

    def __init__(self, path: str | Path, *, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            # For estimates: look up, never create or write (a missing file is an empty cache).
            if self.path.exists():
                self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            else:
                self._db = sqlite3.connect(":memory:")
                self._db.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, request TEXT, reply TEXT)")
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        # WAL + NORMAL: a committed row survives a killed process, at a few ms per write.
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, request TEXT, reply TEXT)"
        )
        self._db.commit()

    def get(self, key: str) -> ModelReply | None:
        row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        known = {f.name for f in dataclasses.fields(ModelReply)}  # a cache may outlive a field
        return ModelReply(**{k: v for k, v in json.loads(row[0]).items() if k in known})

    def put(self, key: str, request: dict[str, Any], reply: ModelReply) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO replies (key, request, reply) VALUES (?, ?, ?)",
            (key, json.dumps(request, ensure_ascii=False), json.dumps(dataclasses.asdict(reply))),
        )
        self._db.commit()

    def stored_scopes(self) -> dict[str, collections.Counter]:
        """Per namespace, how many replies are stored under each scope (one pass over the file)."""
        found: dict[str, collections.Counter] = {}
        for (request,) in self._db.execute("SELECT request FROM replies"):
            data = json.loads(request)
            found.setdefault(data.get("namespace", ""), collections.Counter())[data.get("scope", "")] += 1
        return found

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        self._db.close()


class CachedModel:
    """Wraps a ``LanguageModel``; is one. Counts hits and misses for progress reports."""

    def __init__(self, inner: Any, cache: ResponseCache, *, namespace: str = "",
                 on_reply: Optional[Callable[[ModelReply], None]] = None, read_only: bool = False):
        self.inner = inner
        self.settings = inner.settings
        self.cache = cache
        self.namespace = namespace  # e.g. the run's seed: a new namespace draws new samples
        # Called with every reply that did not come from the cache, before it is stored: the
        # run's spending log (a kill after it loses no record of money spent).
        self.on_reply = on_reply
        self.read_only = read_only  # look up only (estimates)
        self.hits = 0
        self.misses = 0
        # Of the calls not served from the cache: tokens and USD (None-cost replies not summed).
        self.sent_input_tokens = self.sent_output_tokens = 0
        self.sent_cost = 0.0
        self._occurrences: dict[tuple[str, str], int] = {}

    def __getattr__(self, name: str) -> Any:
        # Anything else the agents package reads off a model (price table...) is the inner one's.
        return getattr(self.inner, name)

    def request_key(self, messages: list[ChatMessage],
                    call_options: CallOptions = NO_OPTIONS) -> tuple[str, dict[str, Any]]:
        scope = _scope.get()
        # What a call asks besides its messages: the re-ask's temperature and seed, and the
        # reply's shape where the server is sent it (unconstrained calls keep their old keys).
        options = call_options.as_dict()
        if self.settings.grammar is None:
            options["shape"] = None
        body = json.dumps(
            {
                "settings": dataclasses.asdict(self.settings),
                **({"options": options} if any(options.values()) else {}),
                "messages": [[m.role, m.content] for m in messages],
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        body_hash = hashlib.sha256(body.encode()).hexdigest()
        sample = self._occurrences.get((scope, body_hash), 0)
        self._occurrences[(scope, body_hash)] = sample + 1
        request = {"namespace": self.namespace, "scope": scope, "sample": sample, "body": body_hash}
        key = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        return key, {**request, "settings": dataclasses.asdict(self.settings)}

    async def complete(self, messages: list[ChatMessage], *, deadline: float | None,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        key, request = self.request_key(messages, options)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        reply = await self.inner.complete(messages, deadline=deadline, options=options)
        self.sent_input_tokens += reply.input_tokens or 0
        self.sent_output_tokens += reply.output_tokens or 0
        self.sent_cost += reply.cost or 0.0
        if self.on_reply is not None:
            self.on_reply(reply)
        if not self.read_only and CallStatus(reply.status).value in CACHEABLE_STATUSES:
            self.cache.put(key, request, reply)
        return reply
