"""REPLACES: starlette.routing.Router.startup (wrapped once, for every hook of the lab's)

WHY: oTree's Starlette app has no start-up hook an app can reach at import. The lab needs, before
the first request: the server's event loop known to lab/server/channels.py (wait pages' pushes), the
"Test model" route of the admin (lab/agent_runtime/model_probe.py, outside oTree's lock), the agents' turns a
killed server left recovered (lab/agent_runtime/startup.py: a human would wait on them until the
fallback), the heap frozen out of full garbage collections, and the closed-tab watcher of online
sessions started (lab/online/presence.py). They run here in that order, for oTree's app's router
only (not for a test's or another app's).

HOW TO CHECK: a newer Starlette or oTree may offer lifespan hooks to apps: then use them.
tests/test_restart.py and tests/test_online_presence.py exercise the start.
"""

from __future__ import annotations

import sys

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["starlette.routing.Router.startup", "starlette.routing.Router", "otree.asgi"]
REPLACED = ["starlette.routing.Router.startup"]


def is_otree_app_router(router) -> bool:
    asgi = sys.modules.get("otree.asgi")
    return asgi is not None and getattr(asgi, "app", None) is not None and router is asgi.app.router


def add_model_test_route(router) -> None:
    from lab.agent_runtime.model_probe import TEST_MODEL_PATH, model_test_route
    from lab.server.request_lock import PATHS_WITHOUT_DATABASE

    route = model_test_route()
    if any(getattr(existing, "path", None) == route.path for existing in router.routes):
        return
    router.routes.insert(0, route)
    PATHS_WITHOUT_DATABASE.add(TEST_MODEL_PATH)  # run without oTree's lock (lab/server/request_lock.py)


def install() -> None:
    from starlette.routing import Router

    from lab.agent_runtime import startup as agents_startup
    from lab.online import presence

    if patched_by(Router.startup) == "router_startup":
        return
    original = Router.startup

    async def startup(self):
        agents_startup.before_server_start()
        await original(self)
        if is_otree_app_router(self):
            add_model_test_route(self)
            await agents_startup.after_server_start()
            presence.after_server_start()

    Router.startup = marked(startup, original, __name__)
