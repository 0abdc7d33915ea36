"""REPLACES: nothing of oTree's; adds the lab's socket (``/lab_notices``) to
otree.channels.routing.websocket_routes and ``lab_notices_json`` to
otree.views.abstract.FormPageOrInGameWaitPage (read by _templates/otree/Base_UserFacing.html).

WHY: oTree has no way for an app to add a websocket route or a value every participant page's
template can read. Every participant page holds this socket: the experimenter's notices and
pause (lab/server/notices.py), the typed drafts kept across a reload, and, for online sessions, whether
the participant still has a page open (lab/online/presence.py).

HOW TO CHECK: oTree's routing still builds its websocket routes from ``websocket_routes`` when
otree.asgi is imported (after the apps); tests/test_online_presence.py and
tests/test_experimenter_actions.py exercise the socket.
"""

from __future__ import annotations

TARGETS = ["otree.channels.routing.websocket_routes", "otree.views.abstract.FormPageOrInGameWaitPage",
           "otree.channels.consumers._OTreeAsyncJsonWebsocketConsumer", "otree.asgi",
           "template:otree/Base_UserFacing.html"]
REPLACED: list[str] = []


def install() -> None:
    from otree.channels.routing import websocket_routes
    from otree.views.abstract import FormPageOrInGameWaitPage
    from starlette.routing import WebSocketRoute

    from lab.server import notices
    from lab.online import presence

    if any(getattr(route, "path", None) == notices.SOCKET_PATH for route in websocket_routes):
        return
    consumer = notices.consumer_class()
    presence.tracking_presence(consumer)
    websocket_routes.append(WebSocketRoute(notices.SOCKET_PATH, consumer))
    FormPageOrInGameWaitPage.lab_notices_json = notices.page_state_json
