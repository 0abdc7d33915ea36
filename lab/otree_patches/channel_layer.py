"""REPLACES: otree.channels.utils.ChannelLayer.sync_send, otree.channels.utils.ChannelLayer.send
(wrapped), otree.channels.consumers.WSSubsessionWaitPage.on_disconnect,
otree.channels.consumers.WSGroupWaitPage.on_disconnect, and the ``add`` of oTree's one
channel layer (otree.channels.utils.channel_layer.add).

WHY: a page request completing a wait page pushes 'ready' with ``sync_send`` from a worker
thread, in an event loop of its own; when a member's socket was still connecting, the thread
slept for ever holding oTree's global lock and the database's write transaction, and every page
of every participant stopped (about once in a hundred H-H runs). Sends from other threads go to
the server's loop instead (lab/server/channels.py). A wait page's socket closing once the page was told
'ready' no longer costs a commit under the lock (71 at each round start came before the reloads).
A page whose agent's turn has ended before its socket joined is told as it joins
(lab/agent_runtime/waiting.py), or it would wait until its deadline.

HOW TO CHECK: tests/test_channels.py reproduces the hang with oTree's own ``sync_send``
(``_lab_otree_original``); tests/test_agent_wait.py for the late joiner.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.channels.utils.ChannelLayer.sync_send", "otree.channels.utils.ChannelLayer.send",
           "otree.channels.utils.ChannelLayer.add", "otree.channels.utils.ChannelLayer.discard",
           "otree.channels.utils.ChannelLayer", "otree.channels.utils.channel_layer",
           "otree.channels.consumers.WSSubsessionWaitPage.on_disconnect",
           "otree.channels.consumers.WSGroupWaitPage.on_disconnect",
           "otree.channels.consumers.BaseWaitPage"]
REPLACED = ["otree.channels.utils.ChannelLayer.sync_send", "otree.channels.utils.ChannelLayer.send",
            "otree.channels.utils.channel_layer.add",
            "otree.channels.consumers.WSSubsessionWaitPage.on_disconnect",
            "otree.channels.consumers.WSGroupWaitPage.on_disconnect"]


def install() -> None:
    from otree.channels import consumers
    from otree.channels.utils import ChannelLayer, channel_layer

    from lab.server import channels
    from lab.agent_runtime.waiting import NOTIFIER

    if patched_by(ChannelLayer.sync_send) == "channel_layer":
        return
    original_sync_send, original_send = ChannelLayer.sync_send, ChannelLayer.send
    ChannelLayer.sync_send = marked(channels.sending_on_the_server_loop(original_sync_send), original_sync_send,
                                    __name__)
    ChannelLayer.send = marked(channels.noting_ready(original_send), original_send, __name__)
    for consumer in (consumers.WSSubsessionWaitPage, consumers.WSGroupWaitPage):
        original = consumer.on_disconnect
        consumer.on_disconnect = marked(channels.quiet_disconnect(original), original, __name__)
    original_add = channel_layer.add
    channel_layer.add = marked(NOTIFIER.telling_late_joiners(original_add), original_add, __name__)
