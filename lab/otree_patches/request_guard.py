"""REPLACES: starlette.applications.Starlette.__call__ (wrapped, for oTree's app alone)

WHY: PostgreSQL rejects NUL in text, so an address with ``%00`` where oTree looks a value up or
stores it (a participant label, a participant code, ``session_code=`` of an export) answered 500;
a participant label with control characters was stored as given; a REST call whose body is not
JSON answered 500 with a traceback. oTree's app class is built where apps cannot reach it before
it is made, so Starlette's entry point is wrapped and the guard (lab/server/request_guard.py) answers
those with a 400 before any of oTree's code runs.

HOW TO CHECK: tests/test_participant_label_nul.py without this patch (remove it from patch_modules()):
its PostgreSQL cases answer 500.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["starlette.applications.Starlette.__call__", "otree.asgi"]
REPLACED = ["starlette.applications.Starlette.__call__"]


def install() -> None:
    from starlette.applications import Starlette

    from lab.server.request_guard import guarded_call

    if patched_by(Starlette.__call__) == "request_guard":
        return
    original = Starlette.__call__
    Starlette.__call__ = marked(guarded_call(original), original, __name__)
