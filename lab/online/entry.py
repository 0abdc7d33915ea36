"""The study link: Prolific's parameters into the participant's record, one seat per person.

Prolific sends each participant to the study URL with ``PROLIFIC_PID``, ``STUDY_ID`` and
``SESSION_ID`` filled in. The study URL of an online session is oTree's session-wide link,
``/join/<anonymous code>`` (the session's *Links* tab), with those three parameters (and any the
session config names in ``online_url_params``). oTree itself keeps only ``participant_label``
from that link and hands a label that exists again to whoever brings it; here, for an online
session only, the link is read before oTree's (``SessionWideLink.get`` wrapped, as lab/server/rooms.py
wraps the room's):

- each parameter is checked (letters and digits; a placeholder Prolific did not fill, or a
  parameter given twice, is refused with a page saying so, never a 500);
- a PROLIFIC_PID that already holds a seat of this session is refused (409) unless the browser is
  the one that took the seat (oTree's session cookie: a reload or a return goes on); a PID that
  took part in another online session of this server is refused as well;
- a new PID gets the next unused participant: its label is the PID (the admin's Monitor shows
  it), and ``participant.vars`` gets ``prolific_pid``, ``study_id``, ``prolific_session_id`` and
  ``online_params`` ({name: value} of the session's own parameters).

Every HTTP request runs under oTree's global lock, so the check and the seat are one step.
"""

from __future__ import annotations

import html
import time

from lab.base import online_settings as online_config


def reading_the_study_link(original_get):
    """oTree's session-wide link (``SessionWideLink.get``): an online session's link is read here,
    any other session's by oTree; lab/otree_patches/session_wide_link.py puts it in."""

    def get(self, request):
        from otree.database import db
        from otree.models import Session

        session = db.get_or_404(Session, _anonymous_code=request.path_params["anonymous_code"])
        if not online_config.is_online(session):
            return original_get(self, request)
        return enter(session, request)

    return get


def read_parameters(session, query) -> tuple[dict | None, str | None]:
    """({vars to record}, None) or (None, the text key and detail of a refusal)."""
    names = [*online_config.PROLIFIC_PARAMS, *online_config.url_param_names(session.config)]
    for name in names:
        if len(query.getlist(name)) > 1:  # which one is the person's? (starlette would take the last)
            return None, ("online_link_repeated", name)
    values = {}
    for name in online_config.PROLIFIC_PARAMS:
        value = query.get(name, "")
        if not value:
            return None, ("online_link_missing", name)
        if not online_config.ID_PATTERN.fullmatch(value):
            return None, ("online_link_malformed", name)
        values[name] = value
    extra = {}
    for name in online_config.url_param_names(session.config):
        value = query.get(name)
        if value is None:
            continue
        if len(value) > online_config.PARAM_MAX_CHARS or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            return None, ("online_link_malformed", name)
        extra[name] = value
    return dict(prolific_pid=values["PROLIFIC_PID"], study_id=values["STUDY_ID"],
                prolific_session_id=values["SESSION_ID"], online_params=extra, online_entered_at=time.time()), None


def enter(session, request):
    from otree.models import Participant
    from otree.views.participant import no_participants_left_http_response
    from starlette.responses import RedirectResponse

    record, refusal = read_parameters(session, request.query_params)
    if refusal is not None:
        key, name = refusal
        return refusal_page(session, key, 400, name=name)
    pid = record["prolific_pid"]
    cookie = f"session_{session.code}_participant"
    seat = session.pp_set.filter_by(label=pid).first()
    if seat is not None:
        if request.session.get(cookie) == seat.code:
            return RedirectResponse(seat._start_url(), status_code=302)  # the same browser comes back
        return refusal_page(session, "online_pid_taken", 409)
    elsewhere = [p for p in Participant.objects_filter(label=pid) if p._session_code != session.code]
    if any(p.vars.get("prolific_pid") == pid for p in elsewhere):
        return refusal_page(session, "online_pid_elsewhere", 409)
    if request.session.get(cookie):
        # This browser holds another seat of the session (another PID typed into the link).
        return refusal_page(session, "online_browser_taken", 409)
    participant = session.pp_set.filter_by(visited=False).order_by("id").first()
    if participant is None:
        return no_participants_left_http_response()
    participant.visited = True
    participant.label = pid
    for key, value in record.items():
        participant.vars[key] = value
    request.session[cookie] = participant.code
    return RedirectResponse(participant._start_url(), status_code=302)


def refusal_page(session, key: str, status: int, **params):
    from starlette.responses import HTMLResponse

    from lab.base import i18n
    from lab.base.session_settings import params as session_params

    language = session_params(session).language
    title = i18n.text(language, "online_refused_title")
    body = i18n.text(language, key, **{k: html.escape(v) for k, v in params.items()})
    return HTMLResponse(
        f"""<!DOCTYPE html>
<html lang="{i18n.html_lang(language)}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>
<link href="/static/bootstrap5/css/bootstrap.min.css" rel="stylesheet"></head>
<body><div class="container m-5" id="online-refused" data-reason="{key}"><h2>{title}</h2><p>{body}</p></div></body></html>""",
        status_code=status,
    )
