"""A session refused at creation leaves nothing behind, and the REST API says why with a 400.

oTree's ``create_session`` commits the session, its participants and each app's subsessions,
groups and players before it runs the apps' ``creating_session``, where this lab refuses a
session that cannot run (``lab.base.session_settings.validate``: the model check, the number of
people, the rounds...). On an error it marks the session for deletion and re-raises, but both
callers then roll back, the deletion with it: the refused session stayed in the session list
with participant links answering 500. And the REST API (``POST /api/sessions``) answered a
refusal with a 500 and a traceback; it turns only oTree's ``CreateSessionInvalidArgs`` into a
400 with the message.

Here ``create_session`` is wrapped: when it fails after the session row exists, what the
attempt wrote is rolled back and the session deleted as oTree's own "delete sessions" does it
(its participants, subsessions, groups, players and the apps' rows go with it: every table
refers to the session or to those rows with ON DELETE CASCADE), and a refusal is raised as
``SessionRefused``, a ``CreateSessionInvalidArgs``: REST answers 400 with the message as plain
text, and the admin's create-session form shows "Failed to create session: <message>" as before.
A created session's REST answer also says what its model check found (``with_model_check``).

oTree's server has one database connection (``StaticPool``, PostgreSQL too), kept to one
transaction at a time by its global lock (``otree.middleware.lock2``). Its admin page creates a
session in a worker thread without the lock (``BaseCreateSession.lock`` is a no-op), so the
creation's transaction and every page request's, socket's and the closed-tab watcher's ran on the
one connection at once, committing or rolling back each other's work half-way: an online H-H
session came out with players in no group, or failed with a foreign-key error. Here the admin's
creation holds the lock, as oTree's REST creation does (tests/test_admin_create_session_shares_
the_connection.py); the creation page still shows its progress, page requests wait meanwhile.

What a creation is given is checked before anything is written (``checked_arguments``), with a
message saying which value and why, as a refusal (REST: 400): oTree itself answers an unknown REST
field, ``num_participants`` 0 (a division by zero after the session row exists), an unknown room
(after it too) and a NUL in the label (PostgreSQL) with 500s, and takes NaN, infinity, negative
money and control characters in settings (``lab.base.session_settings.check_overrides``). A config's treatment is
fixed by its name: ``associate_type``, ``label_setting`` and ``game_order`` join oTree's
``NON_EDITABLE_FIELDS`` (not on the create page; its REST refusal is replaced by ours, which takes
the same value and refuses another). A failure that is not a refusal is logged with its
traceback; oTree's create pages show every failure's Python traceback, the chained exceptions'
too, with the server's paths: here they show the message and a note instead
(``without_traceback``).
"""

from __future__ import annotations

import inspect
import logging
import threading

from otree.session import CreateSessionInvalidArgs

_attempt = threading.local()  # the id of the session being created in this thread
logger = logging.getLogger("lab.sessions")
# In place of the traceback oTree's create pages show under "Failed to create session: ...".
TRACEBACK_NOTE = "Nothing was created. A refusal's reason is above; any other error's details are in the server's log."


class SessionRefused(CreateSessionInvalidArgs):
    """A session config this lab cannot run; the message says which value and why."""


def leaving_nothing(original_create, original_run_hooks):
    """oTree's ``create_session`` and ``run_creating_session_functions``, wrapped: a failed creation
    leaves nothing, a refusal is a ``SessionRefused`` (lab/otree_patches/session_creation.py)."""

    def run_creating_session_functions(session, progress_message_fxn):
        _attempt.session_id = session.id  # committed by now: known without a query
        return original_run_hooks(session, progress_message_fxn)

    def create_session(*args, **kwargs):
        from lab.base.session_settings import SessionConfigError

        _attempt.session_id = None
        try:
            return original_create(**checked_arguments(original_create, args, kwargs))
        except Exception as error:
            if _attempt.session_id is not None:
                remove_session(_attempt.session_id)
            if isinstance(error, SessionConfigError):
                raise SessionRefused(str(error)) from None  # the message says it all: no chained traceback
            if not isinstance(error, CreateSessionInvalidArgs):
                logger.exception("Session creation failed (%s); nothing was created", error)
            raise
        finally:
            _attempt.session_id = None

    return create_session, run_creating_session_functions


def rest_post_with_model_check(original_rest_post):
    """oTree's ``RESTSessions.post``: a refusal's message typed as text, a created session's answer
    with its model check."""

    def rest_post(self, **kwargs):
        response = original_rest_post(self, **kwargs)
        if response.status_code == 400 and "content-type" not in response.headers:
            response.headers["content-type"] = "text/plain; charset=utf-8"  # oTree sends the message untyped
        if response.status_code == 200:
            response = with_model_check(response)
        return response

    return rest_post


def with_model_check(response):
    """A created session's REST answer with what its model check found (``model_check``: the
    grammar, the server's capacity, a warning when it serves the agents narrowly), as the session
    pages show it (lab/experimenter/dashboard.py model_check_details)."""
    import json

    from otree.database import db
    from otree.models import Session
    from starlette.responses import JSONResponse

    payload = json.loads(response.body)
    session = db.query(Session).filter(Session.code == payload.get("code")).first()
    if session is None:
        return response
    from lab.experimenter.dashboard import model_check_details

    return JSONResponse(dict(payload, model_check=model_check_details(session)))


def remove_session(session_id: int) -> None:
    """Undo a failed creation: what is not committed yet (the apps' creating_session writes,
    oTree's own pending delete), then the session's committed rows."""
    from otree.database import db
    from otree.models import Session

    from lab.base.session_settings import forget_session_id

    db.rollback()
    db.query(Session).filter(Session.id == session_id).delete(synchronize_session=False)
    db.commit()
    forget_session_id(session_id)  # SQLite may give the next session this id


def checked_arguments(create, args: tuple, kwargs: dict) -> dict:
    """oTree's ``create_session`` arguments, checked (a refusal says which and why) before anything
    is written; the session config's fields as ``lab.base.session_settings.check_overrides`` returns them."""
    from otree.room import ROOM_DICT
    from otree.session import SESSION_CONFIGS_DICT

    from lab.base.text import CONTROL_CHARACTERS
    from lab.base.session_settings import SessionConfigError, check_overrides

    try:
        arguments = inspect.signature(create).bind(*args, **kwargs).arguments
    except TypeError as error:  # REST: a field oTree does not take, or none of a required one
        raise SessionRefused(f"Session not created: {error}.") from None
    name = arguments.get("session_config_name")
    if not isinstance(name, str) or name not in SESSION_CONFIGS_DICT:
        from lab.base.offered_experiments import why_not_offered

        not_offered = why_not_offered(name) if isinstance(name, str) else None
        if not_offered:
            raise SessionRefused(f"Session config {name!r} is not offered: {not_offered}.")
        raise SessionRefused(f"Session config {name!r} does not exist; the configs: {', '.join(SESSION_CONFIGS_DICT)}.")
    number = arguments.get("num_participants")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 1):
        raise SessionRefused(f"num_participants is {number!r}; it must be a whole number of at least 1.")
    label = arguments.get("label", "")
    if not isinstance(label, str) or CONTROL_CHARACTERS.search(label):
        raise SessionRefused(f"The session label {label!r} must be text without control characters (such as NUL).")
    room = arguments.get("room_name") or None
    if room is not None and (not isinstance(room, str) or room not in ROOM_DICT):
        raise SessionRefused(f"room_name {room!r} is not a room of this server; its rooms: {', '.join(ROOM_DICT)}.")
    arguments["room_name"] = room
    try:
        arguments["modified_session_config_fields"] = check_overrides(
            name, SESSION_CONFIGS_DICT[name], arguments.get("modified_session_config_fields"))
    except SessionConfigError as error:
        raise SessionRefused(str(error)) from None
    return arguments


def without_traceback(send):
    """A create page's ``send_response_to_browser``: ``TRACEBACK_NOTE`` in place of the traceback
    (the page shows the message only when a traceback comes with it, and inserts that as HTML)."""

    async def send_response_to_browser(self, event: dict):
        if event.get("traceback"):
            event = dict(event, traceback=TRACEBACK_NOTE)
        return await send(self, event)

    return send_response_to_browser
