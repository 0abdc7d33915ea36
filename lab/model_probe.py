"""The experimenter's "Test model" button: a probe of the session's model, one first turn per persona.

The agents page (``admin_report`` in lab/agent_pages.py) notes what the route needs
(``TEST_TARGETS``) and shows its last results (``MODEL_TESTS``); the route itself is installed at
server start (lab/agent_runtime/startup.py) and runs outside oTree's global lock.
"""

from __future__ import annotations

import time

# "Test model" results per session code (in this server process), shown by the report.
MODEL_TESTS: dict[str, dict] = {}
# What the "Test model" route needs, noted by the report under oTree's lock (the route runs
# without it, for up to a minute of model calls, and never reads the database).
TEST_TARGETS: dict[str, dict] = {}
TEST_MODEL_PATH = "/lab/agents/test_model/"


def run_model_test(session_code: str) -> dict:
    """One first turn per persona with the session's model; stored for the report."""
    from agents.agent import probe_personas
    from agents.models import build_model

    target = TEST_TARGETS.get(session_code)
    if target is None:
        return dict(error="open the session's agents page first")
    started = time.time()
    try:
        results = probe_personas(build_model(target["config"]), language=target["language"],
                                 with_communication=target["with_chat"])
    except Exception as error:  # a config the check let through but the SDK refuses
        results = [dict(persona="(all)", status="error", error=f"{type(error).__name__}: {error}")]
    shown = ("persona", "status", "fallback_reason", "reply", "parsed", "error", "flags")
    outcome = dict(at=time.strftime("%H:%M:%S", time.localtime(started)), results=[
        dict({key: r.get(key) or "" for key in shown},
             latency="" if r.get("latency") is None else f"{r['latency']:.2f} s",
             tokens=f"{r.get('input_tokens') or 0}/{r.get('output_tokens') or 0}") for r in results])
    MODEL_TESTS[session_code] = outcome
    return outcome


async def test_model_endpoint(request):
    """POST /lab/agents/test_model/<session code>: oTree admin login required as for its pages."""
    import asyncio

    from otree import settings as otree_settings
    from starlette.responses import JSONResponse

    if otree_settings.AUTH_LEVEL in ("DEMO", "STUDY"):
        from otree.common import AUTH_COOKIE_NAME, AUTH_COOKIE_VALUE

        if request.session.get(AUTH_COOKIE_NAME) != AUTH_COOKIE_VALUE:
            return JSONResponse({"error": "log in to the admin first"}, status_code=403)
    code = request.path_params["code"]
    outcome = await asyncio.get_running_loop().run_in_executor(None, run_model_test, code)
    return JSONResponse(outcome, status_code=404 if "error" in outcome else 200)


def install_test_model_route(router) -> None:
    """Called at server start (lab/agent_runtime/startup.py): the route, outside oTree's lock."""
    from starlette.routing import Route

    from otree import middleware

    if any(getattr(route, "path", None) == TEST_MODEL_PATH + "{code}" for route in router.routes):
        return
    router.routes.insert(0, Route(TEST_MODEL_PATH + "{code}", test_model_endpoint, methods=["POST"]))
    middleware._get_paths_without_lock().add(TEST_MODEL_PATH)  # a set of path prefixes
