"""oTree's pushes to wait pages, always sent on the server's event loop.

oTree runs a page request's code in a worker thread (starlette's thread pool). A request that
completes a wait page pushes ``{'status': 'ready'}`` to the page's websocket group with
``ChannelLayer.sync_send``, which, off the event loop, sends in a new event loop of its own
(``asyncio.run``) in that thread. The sockets belong to the server's loop. uvicorn's send on a
socket first awaits the socket's handshake event, and a socket that has been accepted and has
joined its group (oTree's consumer joins right after accepting) but whose handshake the server
loop has not finished yet binds that event to the thread's loop. The server loop then sets it
without waking that loop: the request thread sleeps for ever, holding oTree's global lock and
the database's write transaction, and every page of every participant stops.

Seen under load in tests/test_browser_hh.py, about once in a hundred runs: the H-H pair's second
decision never got past its wait page, and oTree's timeout worker then died on "database is
locked". The same race waits at every wait page a group completes while a member's page is
connecting its socket (tests/test_channels.py reproduces it with uvicorn's and starlette's own
socket code). Here a send from another thread is handed to the server loop instead, where the
socket's own code runs it; on the loop itself oTree's own path is kept.

Also here: a wait page's socket that closes once the page has been told 'ready' (its
participant is moving on) is let go without oTree's database write. oTree marks the participant
as disconnected from the wait page under its global lock, in a commit of its own, for its
monitor's presence icon; at a round start the 71 reloads' sockets close at once and those 71
commits came before the reloads in the lock's queue (0.2-0.3 s of the wave, bench/lab_load.py's
--trace). A participant on a wait page that is over is not waiting any more; the icon is set
again by the next wait page, and a closed tab there is still marked. A socket that closes while
its page still waits (a closed tab, a reload) takes oTree's path, unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Optional

_server_loop: Optional[asyncio.AbstractEventLoop] = None
READY = {"status": "ready"}
# What this thread's 'ready' pushes say besides (lab/shared_pages/wait_for_all.py: where the waiting went).
_ready_extra = threading.local()
# Channel groups told 'ready' (group -> when), on the server's loop; kept for a lab day at most.
_told_ready: dict[str, float] = {}
TOLD_READY_KEPT_SECONDS = 12 * 3600


def remember_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Called on the server's loop as the app starts (lab/agent_runtime/startup.py's startup hook)."""
    global _server_loop
    _server_loop = loop


def server_loop() -> Optional[asyncio.AbstractEventLoop]:
    """The loop the server's websockets live on, once the app has started (else None)."""
    return _server_loop


def is_ready(data) -> bool:
    return isinstance(data, dict) and data.get("status") == READY["status"]


@contextlib.contextmanager
def ready_says(**extra):
    """Within this block, every 'ready' this thread pushes carries ``extra`` too (keys whose
    value is None are left out); pages that know no such key reload, as oTree's do."""
    extra = {key: value for key, value in extra.items() if value is not None}
    previous = getattr(_ready_extra, "value", None)
    _ready_extra.value = extra
    try:
        yield
    finally:
        _ready_extra.value = previous


def _with_ready_extra(data):
    extra = getattr(_ready_extra, "value", None)
    return {**data, **extra} if extra and is_ready(data) else data


def sending_on_the_server_loop(original):
    """oTree's ``ChannelLayer.sync_send``: from another thread, handed to the server's loop
    (lab/otree_patches/channel_layer.py puts it in)."""

    def sync_send(self, group, data):
        data = _with_ready_extra(data)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = _server_loop
        if loop is None or running is loop or not loop.is_running():
            return original(self, group, data)  # on the server's loop, or no server (oTree's bots)
        # Fire and forget, as oTree's own path on the loop: the page request does not wait.
        asyncio.run_coroutine_threadsafe(self.send(group, data), loop)

    return sync_send


def noting_ready(original_send):
    """oTree's ``ChannelLayer.send``: every 'ready' a group is sent (oTree's wait pages, the
    agents' WaitNotifier) is noted."""

    async def send(self, group, data):
        if is_ready(data):
            note_ready(group)
        await original_send(self, group, data)

    return send


def note_ready(group: str, now: float | None = None) -> None:
    now = time.time() if now is None else now
    _told_ready.pop(group, None)
    _told_ready[group] = now  # the dict keeps insertion order: the oldest come first
    while _told_ready:
        oldest = next(iter(_told_ready))
        if _told_ready[oldest] >= now - TOLD_READY_KEPT_SECONDS:
            break
        del _told_ready[oldest]


def was_told_ready(group: str) -> bool:
    return group in _told_ready


def quiet_disconnect(original):
    """A wait page's socket's ``on_disconnect`` (oTree's subsession and group wait pages, not
    group-by-arrival-time pages, whose one channel group serves groups formed at different times):
    let go without oTree's database write once the page has been told 'ready'."""
    from otree.channels.utils import channel_layer

    async def on_disconnect(self, websocket, close_code):
        if self.groups and all(was_told_ready(group) for group in self.groups):
            for group in self.groups:
                channel_layer.discard(group, websocket)
            return
        await original(self, websocket, close_code)

    return on_disconnect
