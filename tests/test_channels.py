"""A page request that completes a wait page pushes 'ready' to the waiting pages' sockets from
its worker thread (lab/server/channels.py). The socket here is uvicorn's own protocol and starlette's
own WebSocket, accepted as oTree's consumer accepts it and in its channel group, its handshake
not yet finished by the server's loop: the moment that froze the whole server under load.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

from otree.channels import utils as channel_utils
from otree.common2 import json_dumps
from starlette.websockets import WebSocket
from uvicorn.protocols.websockets.websockets_impl import WebSocketProtocol

from lab.server import channels
from lab import otree_patches

otree_patches.install()  # as the server has them (the apps apply them when oTree imports them)
GROUP = "wait-page-1-page13-7"
READY = {"status": "ready"}


class ServerLoop:
    """A server's event loop on a thread of its own, as uvicorn's."""

    def __enter__(self) -> "ServerLoop":
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.previous = channels.server_loop()
        channels.remember_server_loop(self.loop)
        return self

    def __exit__(self, *exc_info) -> None:
        channels.remember_server_loop(self.previous)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=5)


async def connecting_socket(layer: channel_utils.ChannelLayer):
    """What oTree's consumer has done before it waits for the global lock: accepted (uvicorn's
    asgi_send starts the handshake) and joined its group. The handshake itself is finished
    later by the protocol's own task, which the test plays by setting its event."""
    protocol = WebSocketProtocol.__new__(WebSocketProtocol)
    protocol.logger = logging.getLogger("test_channels")
    protocol.scope = {"client": ("127.0.0.1", 1), "root_path": "", "path": "/wait_page"}
    protocol.handshake_started_event = asyncio.Event()
    protocol.handshake_completed_event = asyncio.Event()
    protocol.closed_event = asyncio.Event()
    sent = []

    async def send_frame(data):  # the websockets library writing the frame
        sent.append(data)

    protocol.send = send_frame

    async def receive():
        return {"type": "websocket.connect"}

    websocket = WebSocket({"type": "websocket", "path": "/wait_page"}, receive=receive, send=protocol.asgi_send)
    await websocket.accept()
    websocket.send = channel_utils.wrap_websocket_send(websocket.send)  # as oTree's consumer does
    layer.add(GROUP, websocket)
    assert protocol.handshake_started_event.is_set() and not protocol.handshake_completed_event.is_set()
    return protocol, sent


def push_from_page_thread(send) -> threading.Thread:
    """oTree runs a page's code on a worker thread; the push is made there."""
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    thread.join(timeout=2)
    return thread


def test_the_page_request_returns_and_the_push_arrives_once_the_handshake_is_done():
    layer = channel_utils.ChannelLayer()
    with ServerLoop() as server:
        protocol, sent = server.run(connecting_socket(layer))
        thread = push_from_page_thread(lambda: layer.sync_send(GROUP, READY))
        assert not thread.is_alive(), "the page request waited on the socket's handshake"
        server.loop.call_soon_threadsafe(protocol.handshake_completed_event.set)  # the server loop's handshake
        deadline = time.monotonic() + 5
        while not sent and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sent == [json_dumps(READY)]


def test_a_push_made_on_the_server_loop_keeps_otree_own_path():
    layer = channel_utils.ChannelLayer()
    with ServerLoop() as server:
        protocol, sent = server.run(connecting_socket(layer))

        async def on_the_loop():
            layer.sync_send(GROUP, READY)  # a live method or websocket handler
            protocol.handshake_completed_event.set()
            for _ in range(100):
                if sent:
                    return
                await asyncio.sleep(0.01)

        server.run(on_the_loop())
        assert sent == [json_dumps(READY)]


def test_without_a_server_loop_the_push_is_otree_own(monkeypatch):
    """oTree's bots (``otree test``) have no server: oTree's asyncio.run, delivered at once."""
    layer = channel_utils.ChannelLayer()
    with ServerLoop() as server:
        protocol, sent = server.run(connecting_socket(layer))
        protocol.handshake_completed_event.set()  # a finished handshake: oTree's own path works
        channels.remember_server_loop(None)
        thread = push_from_page_thread(lambda: layer.sync_send(GROUP, READY))
        assert not thread.is_alive() and sent == [json_dumps(READY)]


def test_otree_own_push_from_a_page_thread_never_returns():
    """Why lab/server/channels.py exists: oTree 6.0.15's own ``sync_send`` binds the socket's
    handshake event to a loop of the page thread's own, which the server loop's ``set`` never
    wakes. (The thread is left blocked, a daemon; if this starts to fail, oTree has fixed it.)"""
    layer = channel_utils.ChannelLayer()
    otree_sync_send = channel_utils.ChannelLayer.sync_send._lab_otree_original
    with ServerLoop() as server:
        protocol, sent = server.run(connecting_socket(layer))
        thread = threading.Thread(target=lambda: otree_sync_send(layer, GROUP, READY), daemon=True)
        thread.start()
        time.sleep(0.5)  # the thread is waiting on the handshake event
        server.loop.call_soon_threadsafe(protocol.handshake_completed_event.set)
        thread.join(timeout=3)
        assert thread.is_alive() and sent == []


def group_wait_page_consumer():
    """oTree's consumer of a group wait page's socket, as its route makes it."""
    from otree.channels import consumers

    scope = {"type": "websocket", "path": "/wait_page", "path_params": {},
             "query_string": b"session_pk=1&page_index=13&participant_id=5&group_id=7"}
    consumer = consumers.WSGroupWaitPage(scope, receive=None, send=None)
    consumer.lock = asyncio.Lock()  # oTree's global lock, one per test loop
    return consumer


def test_the_socket_of_a_wait_page_that_is_over_closes_without_queueing_for_the_lock():
    """At a round start every reload closes a socket at once; oTree's disconnect handler would
    queue each one for the global lock and a commit, ahead of the reloads."""
    async def run():
        consumer = group_wait_page_consumer()
        [group] = consumer.groups
        class Socket:
            async def send_text(self, text):
                pass

        websocket = Socket()
        channel_utils.channel_layer.add(group, websocket)
        await channel_utils.channel_layer.send(group, READY)  # the wait page is over: noted
        assert channels.was_told_ready(group)
        async with consumer.lock:  # a page request holds the lock
            await asyncio.wait_for(consumer.on_disconnect(websocket, 1000), timeout=1)
        assert group not in channel_utils.channel_layer._subs

    asyncio.run(run())


def test_the_socket_of_a_page_still_waiting_takes_otree_own_path():
    """A closed tab on a wait page that still waits is marked disconnected, as oTree does (its
    handler waits for the global lock, then writes)."""
    async def run():
        consumer = group_wait_page_consumer()
        consumer.groups = ["wait-page-1-page13-still-waiting"]
        async with consumer.lock:
            closing = asyncio.ensure_future(consumer.on_disconnect(object(), 1000))
            await asyncio.sleep(0.2)
            assert not closing.done()  # in the lock's queue, as oTree's own handler
            closing.cancel()

    asyncio.run(run())


def test_groups_told_ready_are_forgotten_after_a_lab_day(monkeypatch):
    monkeypatch.setattr(channels, "_told_ready", {})
    channels.note_ready("wait-page-old", now=1000.0)
    channels.note_ready("wait-page-new", now=1000.0 + channels.TOLD_READY_KEPT_SECONDS + 1)
    assert not channels.was_told_ready("wait-page-old") and channels.was_told_ready("wait-page-new")


def test_a_ready_push_carries_where_the_waiting_went_and_other_pushes_are_untouched():
    """lab/shared_pages/wait_for_all.py: within ``ready_says``, this thread's 'ready' pushes carry the
    destination (pages that know it go straight there); other messages, other threads and
    pushes after the block are as oTree sends them."""
    layer = channel_utils.ChannelLayer()
    with ServerLoop() as server:
        protocol, sent = server.run(connecting_socket(layer))
        protocol.handshake_completed_event.set()
        monitor_update = {"type": "update_waiting_for_list", "ids": [1]}

        def page_request():
            with channels.ready_says(to="game_with_chat/Message1/3", nothing=None):
                layer.sync_send(GROUP, monitor_update)
                layer.sync_send(GROUP, READY)
                other_thread = threading.Thread(target=lambda: layer.sync_send(GROUP, READY))
                other_thread.start()
                other_thread.join()
            layer.sync_send(GROUP, READY)

        push_from_page_thread(page_request)
        deadline = time.monotonic() + 5
        while len(sent) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        received = [json.loads(frame) for frame in sent]
        assert received[0] == monitor_update
        assert {"status": "ready", "to": "game_with_chat/Message1/3"} in received
        assert received.count(READY) == 2 and len(received) == 4
        assert channels.was_told_ready(GROUP)
