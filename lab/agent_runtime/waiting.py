"""A human's page waiting for an agent's turn: how long, and the push when the turn is over.

Owns the questions the wait page asks (is the turn running, settled, when does it end, is the
wait over: ``SETTLE_GRACE_SECONDS`` past its deadline), ``WaitNotifier`` (its one ``NOTIFIER``
pushes 'ready' to the page's websocket group when the turn ends, so that the page reloads and its
request settles the turn under oTree's lock) and ``wait_for_turn`` (oTree's bots block instead).
"""

from __future__ import annotations

import asyncio
import threading
import time

from lab.server import channels
from lab.agent_runtime.engine import ENGINE
from lab.agent_runtime.page_bursts import page_waits_for_a_turn
from lab.agent_runtime.tables import GameTables
from lab.agent_runtime.turns import FINAL_STATUSES, RUNNING, TURN_STAGE, ensure_turn, turn_key
from lab.base.session_settings import params_of

# How long the wait page for an agent lets it run past its deadline before settling anyway:
# the agent returns by its deadline; this covers the hop back to the page.
SETTLE_GRACE_SECONDS = 2.0


def is_running(player, tables: GameTables, kind: str) -> bool:
    row = ensure_turn(player, tables, kind)
    return row is None or row.status == RUNNING


def settle_if_finished(player, tables: GameTables, kind: str) -> bool:
    """True when the turn is settled (now, if its answer has just come in): the participant
    goes on without seeing a wait page. Idempotent."""
    row = ensure_turn(player, tables, kind)
    return row is not None and row.status in FINAL_STATUSES


def turn_deadline(player, tables: GameTables, kind: str) -> float:
    """Epoch seconds by which the turn ends (the agent's stage limit)."""
    row = ensure_turn(player, tables, kind)
    if row is None:
        return time.time() + params_of(player).stage_limits[TURN_STAGE[kind]]
    return row.deadline_at


def wait_is_over(player, tables: GameTables, kind: str) -> bool:
    """The turn's deadline and the grace have passed: settle it now, by the fallback if need be."""
    return time.time() > turn_deadline(player, tables, kind) + SETTLE_GRACE_SECONDS


def wait_for_turn(player, tables: GameTables, kind: str, timeout: float) -> None:
    """Block until the running turn's answer is in (oTree's bots only: their runner gives up
    after ten passes over wait pages without progress)."""
    future = ENGINE.future(turn_key(player, tables, kind))
    if future is not None:
        with page_waits_for_a_turn():
            try:
                future.result(timeout=max(0.0, timeout))
            except Exception:  # a timeout or a failed turn: settled by the fallback
                pass


class WaitNotifier:
    """When a turn ends, pushes {'status': 'ready'} to the websocket group of the page the
    human waits on: oTree's own wait-page channel, so the page behaves as an H-H wait page (it
    reloads, and that request settles the turn under oTree's lock). Nothing is written here;
    the push only wakes the page.

    The turn ends on the agent engine's thread and the push is handed to the server's event loop
    (``call_soon_threadsafe``; lab/server/channels.py knows it from the app's start), and a page whose
    socket joins after its turn has ended gets the push as it joins.
    """

    READY = {"status": "ready"}

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, float] = {}  # channel -> until when a joining socket is told

    def telling_late_joiners(self, original_add):
        """oTree's in-process ``channel_layer.add``: a socket joining a channel whose turn has
        ended is told at once (lab/otree_patches/channel_layer.py puts it in)."""
        from otree.channels.utils import channel_layer

        def add(group, websocket):
            original_add(group, websocket)  # on the server's loop
            with self._lock:
                ready = self._ready.get(group, 0) > time.time()
            if ready:
                asyncio.ensure_future(channel_layer.send(group, self.READY))

        return add

    def watch(self, player, tables: GameTables, kind: str, channel: str, until: float) -> bool:
        """Push to ``channel`` when the turn ends; False if there is nothing to watch."""
        future = ENGINE.future(turn_key(player, tables, kind))
        if future is None:
            return False
        future.add_done_callback(lambda _: self._turn_ended(channel, until))
        return True

    def _turn_ended(self, channel: str, until: float) -> None:
        """On the engine's thread."""
        now = time.time()
        with self._lock:
            for stale in [c for c, t in self._ready.items() if t < now]:
                del self._ready[stale]
            self._ready[channel] = until
        loop = channels.server_loop()
        if loop is not None:
            loop.call_soon_threadsafe(self._push, channel)

    def _push(self, channel: str) -> None:
        from otree.channels.utils import channel_layer

        if channel_layer._subs.get(channel):  # sockets on the page now; later ones are told as they join
            asyncio.ensure_future(channel_layer.send(channel, self.READY))


NOTIFIER = WaitNotifier()
