"""The page burst gate: a round's first agent turns let the round start's page loads go first.

Owns ``yield_to_page_bursts`` (awaited on the engine's thread before such a turn sends anything),
``pages_busy`` (a glance at oTree's global lock) and the count of page requests that hold that
lock to wait for a turn (``page_waits_for_a_turn``), for which the gate does not wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Optional

# At a round start the request that completes the round's wait page starts every agent's turn,
# and every other participant's page reloads at that moment. The turns' prompts, token counts and
# SDK calls run in this process, so they would take the GIL from those pages: the round's first
# turns wait until page requests have left oTree's lock alone for PAGE_BURST_QUIET_SECONDS, at
# most PAGE_BURST_MAX_DEFER_SECONDS or a twentieth of their time (a human writes for many
# seconds, and nothing a participant sees waits for these turns yet).
PAGE_BURST_MAX_DEFER_SECONDS = 2.0
PAGE_BURST_POLL_SECONDS = 0.02
# The quiet spell covers the moment between the wait page's push and the browsers' reloads.
PAGE_BURST_QUIET_SECONDS = 0.2


_turn_waiters = 0  # page requests (oTree's bots) that hold oTree's lock to wait for a turn
_turn_waiters_lock = threading.Lock()


@contextlib.contextmanager
def page_waits_for_a_turn():
    """A page request (oTree's bots) holds oTree's lock in this block to wait for a turn: the
    turns do not wait for that page meanwhile (``pages_busy``)."""
    global _turn_waiters
    with _turn_waiters_lock:
        _turn_waiters += 1
    try:
        yield
    finally:
        with _turn_waiters_lock:
            _turn_waiters -= 1


def pages_busy() -> bool:
    """A page request holds oTree's global lock or waits for it, other than one holding it to
    wait for an agent (then the agents go first). Read from the engine's thread: a glance at the
    lock, never a wait on it."""
    from otree.middleware import lock2

    if _turn_waiters:
        return False
    return lock2.locked() or bool(getattr(lock2, "_waiters", None))


class _PageBurstGate:
    """One poller per event loop, however many turns wait on it (a round start holds dozens)."""

    def __init__(self) -> None:
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.served: Optional[asyncio.Event] = None
        self.poller: Optional[asyncio.Future] = None

    async def wait(self, bound: float) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is not loop:  # a new engine loop (or a test's): start afresh
            self.loop, self.poller = loop, None
        if self.poller is None or self.poller.done():
            self.served = asyncio.Event()
            self.poller = asyncio.ensure_future(self._poll(self.served))
        try:
            await asyncio.wait_for(asyncio.shield(self.served.wait()), timeout=bound)
        except asyncio.TimeoutError:
            pass

    @staticmethod
    async def _poll(served: asyncio.Event) -> None:
        quiet_since = None
        while True:
            now = time.monotonic()
            if pages_busy():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= PAGE_BURST_QUIET_SECONDS:
                break
            await asyncio.sleep(PAGE_BURST_POLL_SECONDS)
        served.set()


_PAGE_BURST_GATE = _PageBurstGate()


async def yield_to_page_bursts(deadline: float) -> float:
    """Wait until page requests have left oTree's lock alone for a moment (bounded, see
    PAGE_BURST_MAX_DEFER_SECONDS); the seconds waited."""
    started = time.monotonic()
    until = started + min(PAGE_BURST_MAX_DEFER_SECONDS, max(0.0, deadline - started) / 20)
    while pages_busy() and time.monotonic() < until:
        await _PAGE_BURST_GATE.wait(until - time.monotonic())
    return time.monotonic() - started
