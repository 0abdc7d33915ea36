"""The experimenter's "Test model" button: a probe of the session's model, one first turn per persona
(one after another on an openai_compatible server, else at ``llm_concurrency``), each attempt shown.

The agents page (``admin_report`` in lab/experimenter/agents_report.py) notes what the route needs
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
    from agents.probe import probe_personas
    from agents.models import build_model

    target = TEST_TARGETS.get(session_code)
    if target is None:
        return dict(error="open the session's agents page first")
    started = time.time()
    config = target["config"]
    # A local server (openai_compatible) answers one request at a time: one persona after another.
    concurrency = 1 if config.provider == "openai_compatible" else config.concurrency
    try:
        results = probe_personas(build_model(config), language=target["language"],
                                 with_communication=target["with_chat"], concurrency=concurrency,
                                 experiment=target.get("experiment"))
    except Exception as error:  # a config the check let through but the SDK refuses
        results = [dict(persona="(all)", status="error", error=f"{type(error).__name__}: {error}")]
    outcome = dict(at=time.strftime("%H:%M:%S", time.localtime(started)), concurrency=concurrency,
                   constrained_output=config.constrained_output, results=[])
    for r in results:  # one row per attempt: the first ask and the re-ask, each with its reply
        turn = dict(persona=r.get("persona") or "", status=r.get("status") or "",
                    fallback_reason=r.get("fallback_reason") or "", flags=r.get("flags") or "",
                    parsed=r.get("parsed") or "")
        attempts = r.get("attempts") or [dict(attempt="", status=r.get("status"), reply=r.get("reply"),
                                               error=r.get("error"))]
        for a in attempts:
            outcome["results"].append(dict(
                turn, attempt=a.get("attempt") or "", attempt_status=a.get("status") or "",
                reply=a.get("reply") or "", parsed_attempt=a.get("parsed") or "", error=a.get("error") or "",
                temperature="" if a.get("temperature") is None else a["temperature"],
                latency="" if a.get("latency") is None else f"{a['latency']:.2f} s",
                tokens=f"{a.get('input_tokens') or 0}/{a.get('output_tokens') or 0}"))
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


def model_test_route():
    """The "Test model" route, added to oTree's app at its start (lab/otree_patches/router_startup.py)
    and run without oTree's lock (lab/server/request_lock.py's ``PATHS_WITHOUT_DATABASE``)."""
    from starlette.routing import Route

    return Route(TEST_MODEL_PATH + "{code}", test_model_endpoint, methods=["POST"])
