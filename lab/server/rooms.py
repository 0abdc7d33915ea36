"""One cubicle, one browser: a room label already in use in another browser is refused.

oTree hands a room label's participant to every browser that opens the room with that label,
so a mistyped label (cubicle07 typed on cubicle08) would put two PCs on one participant, each
submitting the other's pages. Here each browser carries a random id in oTree's signed session
cookie; the first browser to open the room with a label holds it, and another browser asking
for the same label is refused with a message while the holder still holds it:

- before the session exists, while the holder's waiting tab is open (oTree's room presence)
  or it came in the last ``CLAIM_GRACE_SECONDS`` (before its tab has connected);
- once the session exists, for good: the holder is recorded in the participant's vars.

A cubicle whose browser lost its cookies can always be started from the participant's own link
(admin: the session's Monitor or Links tab), which does not go through the room.
"""

from __future__ import annotations

import html
import secrets
import threading
import time

BROWSER_KEY = "lab_room_browser"
CLAIM_GRACE_SECONDS = 30

_claims: dict[tuple[str, str], tuple[str, float]] = {}  # (room, label) -> (browser, claimed at)
_claims_lock = threading.Lock()  # also serialises room entries (one_browser_per_label)


def one_browser_per_label(original_get):
    """oTree's room entry (``AssignVisitorToRoom.get``), guarded; lab/otree_patches/rooms.py puts
    it in."""

    def get(self, request):
        # One room entry at a time, so two browsers cannot both pass the check for one label.
        with _claims_lock:
            refusal = refusal_if_taken(request)
            if refusal is not None:
                return refusal
            response = original_get(self, request)
            if response.status_code in (302, 303, 307):  # oTree gave the label its participant
                record_holder(request)
            return response

    return get


def refusal_if_taken(request):
    """None to let oTree go on, or the page refusing a label held by another browser."""
    from otree.room import ROOM_DICT

    room = ROOM_DICT.get(request.path_params.get("room_name"))
    label = request.query_params.get("participant_label", "")
    if (room is None or not room.has_participant_labels or not request.query_params.get("welcome_page_ok")
            or label not in room.get_participant_labels()):
        return None  # oTree's own checks and messages apply
    browser = request.session.setdefault(BROWSER_KEY, secrets.token_urlsafe(16))
    session = room.get_session()
    holder, claimed_at = _claims.get((room.name, label), (None, 0.0))
    held_elsewhere = holder not in (None, browser) and (
        label in room.present_list or time.time() - claimed_at < CLAIM_GRACE_SECONDS)
    if session is None:
        if held_elsewhere:
            return _refusal_page(room.name, label)
        _claims[(room.name, label)] = (browser, time.time())
        return None
    participant = session.pp_set.filter_by(label=label).first()
    owner = participant.vars.get(BROWSER_KEY) if participant is not None else None
    if owner not in (None, browser) or (owner is None and held_elsewhere):
        return _refusal_page(room.name, label)
    return None


def record_holder(request) -> None:
    """After oTree gave the label its participant: this browser holds it for the session."""
    from otree.room import ROOM_DICT

    session = ROOM_DICT[request.path_params["room_name"]].get_session()
    label = request.query_params.get("participant_label", "")
    browser = request.session.get(BROWSER_KEY)
    participant = session.pp_set.filter_by(label=label).first() if session and label and browser else None
    if participant is not None and participant.vars.get(BROWSER_KEY) is None:
        participant.vars[BROWSER_KEY] = browser


def _refusal_page(room_name: str, label: str):
    from starlette.responses import HTMLResponse

    from lab.base import i18n
    from lab.server.otree_language import current_language

    language = current_language()  # the room's session's, or the server's before it
    title = i18n.text(language, "room_label_in_use_title")
    body = i18n.text(language, "room_label_in_use", label=html.escape(label))
    retry = i18n.text(language, "room_enter_other_label")
    return HTMLResponse(
        f"""<!DOCTYPE html>
<html lang="{i18n.html_lang(language)}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>
<link href="/static/bootstrap5/css/bootstrap.min.css" rel="stylesheet"></head>
<body><div class="container m-5" id="label-in-use"><h2>{title}</h2><p>{body}</p>
<p><a class="btn btn-primary" href="/room/{html.escape(room_name)}">{retry}</a></p></div></body></html>""",
        status_code=409,
    )
