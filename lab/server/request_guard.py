"""Addresses the database cannot take are refused with a 400 before any of oTree's code runs.

PostgreSQL rejects NUL in text, in a query's parameters too (psycopg2: "A string literal cannot
contain NUL (0x00) characters"), and SQLite stores it. So an address with ``%00`` where oTree
looks a value up or stores it answered 500 on PostgreSQL: ``participant_label`` on
``/InitializeParticipant/CODE`` (stored as given), ``/join/CODE`` and ``/room/NAME``, a
participant's code in ``/p/CODE/...`` or a wait page's socket, ``session_code=`` of an export.
No code, label or parameter of this lab contains a NUL: a request whose path or query holds one
is refused (400, plain text; a websocket is closed before it opens).

A participant label is stored, shown in the admin and the exports, and finds its participant
again (``/join/``, a room without a label file): a label with any control character (C0, DEL,
C1; NUL among them) is refused with a message saying so, in the lab's language. It is not
cleaned instead: the cleaned label could be another participant's, whose place it would take.
(What participants type in forms is cleaned, not refused: lab/base/text.py.) oTree's REST call that
takes a label in its JSON body (``POST /api/participant_vars``: a script's data for a participant
before they arrive) is held to the same rule: it looked a NUL up and answered 500 on PostgreSQL.
A REST call whose body is not JSON is refused too (oTree answered it with a 500).
"""

from __future__ import annotations

from typing import Optional

from lab.base.text import CONTROL_CHARACTERS

NUL_REFUSED = "This address contains a NUL character (%00), which no address of this lab can contain."
REST_PREFIX = "/api/"
LABEL_IN_BODY_PATHS = ("/api/participant_vars",)  # oTree's REST call with participant_label in its body


def _label_refused() -> str:
    from otree import settings

    from lab.base import i18n

    return i18n.text(i18n.lab_language(settings.LANGUAGE_CODE), "room_label_invalid")


def refusal(scope: dict) -> Optional[str]:
    """Why this HTTP request or websocket is refused (the message), or None to let oTree go on."""
    from starlette.datastructures import QueryParams

    raw_query = scope.get("query_string", b"")
    if b"%" not in raw_query:  # a control character can only come percent-encoded
        return NUL_REFUSED if "\x00" in scope.get("path", "") else None
    query = QueryParams(raw_query)  # decoded as oTree's request decodes it
    label = query.get("participant_label")
    if label is not None and CONTROL_CHARACTERS.search(label):
        return _label_refused()
    if "\x00" in scope.get("path", "") or any("\x00" in key + value for key, value in query.multi_items()):
        return NUL_REFUSED
    return None


def body_refusal(scope: dict, body: bytes) -> Optional[str]:
    """Why this REST request's body is refused (the message), or None. oTree parses it as JSON
    and answered anything else with a 500 and its traceback; the REST call that looks a
    participant label up holds the label to the rule above."""
    import json

    if not body:
        return None  # oTree takes no body as {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        return f"The request's body is not JSON ({error}); oTree's REST API takes a JSON object."
    if not isinstance(data, dict):
        return "The request's body is not a JSON object; oTree's REST API takes one."
    path = scope.get("path", "")
    if path.startswith("/api/participant_vars"):
        # Looked up or updated with the value as it came: a number for a label, or a list for
        # the vars, answered 500.
        for key, kind, name in (("room_name", str, "text"), ("participant_label", str, "text"),
                                ("vars", dict, "a JSON object")):
            if key in data and not isinstance(data[key], kind):
                return f"'{key}' must be {name}."
    label = data.get("participant_label")
    if path in LABEL_IN_BODY_PATHS and isinstance(label, str) and CONTROL_CHARACTERS.search(label):
        return _label_refused()
    return None


def _reads_body(scope: dict) -> bool:
    """A call of oTree's REST API that may carry a body."""
    if scope["type"] != "http" or not scope.get("path", "").startswith(REST_PREFIX):
        return False
    headers = dict(scope.get("headers") or [])
    return scope.get("method") == "POST" or b"content-length" in headers or b"transfer-encoding" in headers


def guarded_call(original_call):
    """Starlette's ``__call__`` with the guard in front, for oTree's app alone (its class is built
    where apps cannot reach it before it is made; lab/otree_patches/request_guard.py puts it in)."""

    async def __call__(self, scope, receive, send):
        ours = scope["type"] in ("http", "websocket") and _is_otree_app(self)
        reason = refusal(scope) if ours else None
        if reason is None and ours and _reads_body(scope):
            from lab.server.request_lock import read_body_first

            body, receive = await read_body_first(receive)
            reason = body_refusal(scope, body)
        if reason is None:
            return await original_call(self, scope, receive, send)
        if scope["type"] == "websocket":
            from starlette.websockets import WebSocketClose

            return await WebSocketClose(code=1008)(scope, receive, send)  # 1008: policy violation
        from starlette.responses import PlainTextResponse

        return await PlainTextResponse(reason, status_code=400)(scope, receive, send)

    return __call__


def _is_otree_app(app) -> bool:
    return type(app).__module__ == "otree.asgi"
