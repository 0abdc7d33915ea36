"""What every layer of a model call shares.

The call's scope (which agent, round and turn is calling: ``call_scope``), the time left before its
deadline (``_remaining``, ``MIN_ATTEMPT_SECONDS``), one object per event loop (``_PerLoop``: SDK
clients, semaphores) and error texts scrubbed of keys (``redact``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
import threading
import time
import weakref
from typing import Any, Callable, Iterator, Optional

# An attempt needs at least this long to be worth sending; less, and the turn gives up instead.
MIN_ATTEMPT_SECONDS = 0.25
MAX_ERROR_CHARS = 300
_SECRET_PATTERN = re.compile(r"(sk-[A-Za-z0-9_\-]{3,}|sk_[A-Za-z0-9_\-]{3,}|AIza[0-9A-Za-z_\-]{8,}|"
                             r"(?i:bearer)\s+\S+|(?i:x-api-key)[\"':\s]+\S+)")

# What the current call is, set by the caller (the agent): lets the simulated model draw its
# randomness per agent, round and turn, independent of the order concurrent calls are served.
_call_scope: contextvars.ContextVar[str] = contextvars.ContextVar("agents_call_scope", default="")


@contextlib.contextmanager
def context_value(variable: contextvars.ContextVar, value: Any) -> Iterator[None]:
    """``variable`` holds ``value`` inside this block (asyncio tasks made in it inherit it)."""
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)


def call_scope(name: str) -> contextlib.AbstractContextManager:
    """Name the logical call made inside this block (e.g. ``agent-3|seed|r2|decision|1``)."""
    return context_value(_call_scope, name)


def current_call_scope() -> str:
    return _call_scope.get()


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
