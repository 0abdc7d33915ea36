"""oTree's own participant-facing texts in the session's language (lab/otree_patches/language.py puts it in).

oTree translates its own texts into one language per process, settings.LANGUAGE_CODE (here
OTREE_LANGUAGE_CODE): its footer ("Powered by oTree"), the form error banner ("Please fix the
errors."), the form fields' errors (WTForms), the wait pages' "Please wait", the room's pages,
"Session is full.". This lab runs sessions of several languages on one server, so a participant of
an English session on a Chinese server read those in Chinese. Here each request takes the
language of the session it belongs to, and oTree's texts follow it (oTree's catalogs, otree/locale,
cover many languages, German among them; in a language without one they are English). What this
replaces:

- ``otree.i18n.gettext_lib`` (the gettext module as ``core_gettext`` and the ``|gettext`` filter
  use it), ``otree.currency.dngettext`` and ``otree.templating.nodes.gettext``: lookups in the
  catalog of the request's language instead of the process's ``LANGUAGE`` environment variable;
- the texts oTree translated once, at import: ``otree.constants.field_required_msg``,
  ``Page.timer_text``, ``GenericWaitPageMixin.title_text``;
- ``ModelForm.Meta.locales`` (WTForms' error messages): the request's language;
- ``otree.views.participant.validate_room_visitor``: its messages ("This participant label was
  not found", in English whatever the language) in the request's language (locale ``[room]``).

A request belongs to a session by its address: a participant's (``/p/CODE/…``,
``/InitializeParticipant/CODE``, ``/OutOfRangeNotification/CODE``), a session-wide link
(``/join/CODE``), a room (``/room/NAME``: its session, once there is one). Anything else, and a
room before its session, is in the server's language. The session is looked up at the first
text the request translates (inside oTree's lock and database session), once per participant.

Templates get ``lab_html_lang()`` (``<html lang>``), ``lab_text(key)`` (a locale text in the
request's language) and ``lab_tryout()`` (oTree's debug mode: the try-out server's ribbon).
"""

from __future__ import annotations

import contextvars
import functools
import gettext
import logging
import re
import types
from typing import Optional

from lab.base import i18n

logger = logging.getLogger("lab.server.otree_language")

_PARTICIPANT_PATH = re.compile(r"^/(?:p|InitializeParticipant|OutOfRangeNotification)/(?P<code>[^/]+)")
_SESSION_WIDE_PATH = re.compile(r"^/join/(?P<code>[^/]+)")
_ROOM_PATH = re.compile(r"^/room/(?P<room>[^/]+)")
_language_by_participant: dict[str, str] = {}  # a session's language never changes


class _RequestLanguage:
    """The language of one request, found from its path at the first text it translates."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.language: Optional[str] = None

    def get(self) -> str:
        if self.language is None:
            self.language = language_of_path(self.path)
        return self.language


_request: contextvars.ContextVar[Optional[_RequestLanguage]] = contextvars.ContextVar(
    "lab_request_language", default=None)


def server_language() -> str:
    """OTREE_LANGUAGE_CODE as one of i18n.LANGUAGES: pages that belong to no session."""
    from otree import settings

    return i18n.lab_language(settings.LANGUAGE_CODE)


def current_language() -> str:
    """The language of the request being served (the server's outside a request)."""
    request = _request.get()
    return request.get() if request is not None else server_language()


def language_of_path(path: str) -> str:
    """The language of the session the address belongs to, else the server's."""
    try:
        match = _PARTICIPANT_PATH.match(path)
        if match:
            return _participant_language(match["code"])
        match = _SESSION_WIDE_PATH.match(path)
        if match:
            from otree.models import Session

            return _session_language(Session.objects_filter(_anonymous_code=match["code"]).first())
        match = _ROOM_PATH.match(path)
        if match:
            from otree.room import ROOM_DICT

            room = ROOM_DICT.get(match["room"])
            return _session_language(room.get_session() if room is not None else None)
    except Exception:  # a text in the wrong language is better than a page that fails
        logger.exception("the language of %s could not be found; the server's is used", path)
    return server_language()


def _participant_language(code: str) -> str:
    found = _language_by_participant.get(code)
    if found is None:
        from otree.database import db
        from otree.models import Participant, Session

        with db._db.no_autoflush:  # the request's pending changes go in its commit, as they would
            session = (db.query(Session).join(Participant, Participant.session_id == Session.id)
                       .filter(Participant.code == code).first())
        if session is None:
            return server_language()
        found = _language_by_participant[code] = _session_language(session)
    return found


def _session_language(session) -> str:
    if session is None:
        return server_language()
    from lab.base.session_settings import params

    return params(session).language


# --- oTree's catalogs in the request's language ---------------------------------------------
@functools.lru_cache(maxsize=None)
def _catalog(domain: str, language: str) -> gettext.NullTranslations:
    """oTree's catalog (``domain`` as oTree bound it) for a lab language; English is the msgids."""
    from otree.settings import get_locale_name

    return gettext.translation(domain, gettext.bindtextdomain(domain),
                               languages=[get_locale_name(i18n.otree_code(language))], fallback=True)


def dgettext(domain: str, message: str) -> str:
    return _catalog(domain, current_language()).gettext(message)


def dngettext(domain: str, singular: str, plural: str, n: int) -> str:
    return _catalog(domain, current_language()).ngettext(singular, plural, n)


def core_gettext(message: str) -> str:
    """``otree.i18n.core_gettext`` in the request's language."""
    return dgettext("django", message)


class ConstantsOfTheRequest(types.ModuleType):
    """``otree.constants`` with its one translated constant translated when it is read."""

    @property
    def field_required_msg(self) -> str:
        return core_gettext("This field is required.")


def wtforms_locales(meta) -> list[str]:
    # oTree's own rule: the first two letters of the language (WTForms' "zh" is Simplified Chinese)
    from otree.settings import get_locale_name

    return [get_locale_name(i18n.otree_code(current_language()))[:2]]


def html_lang() -> str:
    return i18n.html_lang(current_language())


def lab_text(key: str) -> str:
    return i18n.text(current_language(), key)


def tryout() -> bool:
    """oTree's debug mode: the try-out server (``make run``), never a lab's (docs/running-a-lab.md)."""
    from otree import settings

    return bool(settings.DEBUG)


def noting_the_request(original_init):
    """An oTree view's ``__init__``: the request's language noted for its texts."""

    def __init__(self, scope, receive, send):
        original_init(self, scope, receive, send)
        if scope.get("path"):  # not a page oTree makes without a request, inside another's
            _request.set(_RequestLanguage(scope["path"]))

    return __init__


def translated_room_errors(original_validate):
    """oTree's ``validate_room_visitor``: its label messages in the request's language."""

    def validate_room_visitor(room, query_params: dict) -> dict:
        errors = original_validate(room, query_params)
        if "participant_label" in errors:
            key = "room_label_not_found" if query_params.get("participant_label") else "room_label_missing"
            errors["participant_label"] = lab_text(key)
        return errors

    return validate_room_visitor
