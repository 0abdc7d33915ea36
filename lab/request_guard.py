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
(What participants type in forms is cleaned, not refused: lab/text.py.)
"""

from __future__ import annotations

import re
from typing import Optional

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
NUL_REFUSED = "This address contains a NUL character (%00), which no address of this lab can contain."


def refusal(scope: dict) -> Optional[str]:
    """Why this HTTP request or websocket is refused (the message), or None to let oTree go on."""
    from starlette.datastructures import QueryParams

    raw_query = scope.get("query_string", b"")
    if b"%" not in raw_query:  # a control character can only come percent-encoded
        return NUL_REFUSED if "\x00" in scope.get("path", "") else None
    query = QueryParams(raw_query)  # decoded as oTree's request decodes it
    label = query.get("participant_label")
    if label is not None and CONTROL_CHARACTERS.search(label):
        from otree import settings

        from lab import i18n

        return i18n.text(i18n.lab_language(settings.LANGUAGE_CODE), "room_label_invalid")
    if "\x00" in scope.get("path", "") or any("\x00" in key + value for key, value in query.multi_items()):
        return NUL_REFUSED
    return None


def install() -> None:
    """Put the guard in front of oTree's app (its class is built where apps cannot reach it
    before it is made, so Starlette's entry point is wrapped for it alone); idempotent."""
    from starlette.applications import Starlette

    if getattr(Starlette.__call__, "_lab_request_guard", False):
        return
    original_call = Starlette.__call__

    async def __call__(self, scope, receive, send):
        reason = refusal(scope) if scope["type"] in ("http", "websocket") and _is_otree_app(self) else None
        if reason is None:
            return await original_call(self, scope, receive, send)
        if scope["type"] == "websocket":
            from starlette.websockets import WebSocketClose

            return await WebSocketClose(code=1008)(scope, receive, send)  # 1008: policy violation
        from starlette.responses import PlainTextResponse

        return await PlainTextResponse(reason, status_code=400)(scope, receive, send)

    __call__._lab_request_guard = True
    Starlette.__call__ = __call__


def _is_otree_app(app) -> bool:
    return type(app).__module__ == "otree.asgi"
