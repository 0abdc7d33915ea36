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
"""

from __future__ import annotations

import asyncio
from typing import Optional

_server_loop: Optional[asyncio.AbstractEventLoop] = None


def remember_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Called on the server's loop as the app starts (lab/agent_runtime.py's startup hook)."""
    global _server_loop
    _server_loop = loop


def server_loop() -> Optional[asyncio.AbstractEventLoop]:
    """The loop the server's websockets live on, once the app has started (else None)."""
    return _server_loop


def install() -> None:
    """Patch oTree's channel layer (every process imports it; only the server has a loop)."""
    from otree.channels.utils import ChannelLayer

    if getattr(ChannelLayer.sync_send, "_lab_server_loop", False):
        return
    original = ChannelLayer.sync_send

    def sync_send(self, group, data):
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = _server_loop
        if loop is None or running is loop or not loop.is_running():
            return original(self, group, data)  # on the server's loop, or no server (oTree's bots)
        # Fire and forget, as oTree's own path on the loop: the page request does not wait.
        asyncio.run_coroutine_threadsafe(self.send(group, data), loop)

    sync_send._lab_server_loop = True
    sync_send._lab_otree_original = original  # tests/test_channels.py shows why it is replaced
    ChannelLayer.sync_send = sync_send


install()
