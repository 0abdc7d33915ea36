"""REPLACES: otree.session.create_session (and the name otree.views.rest imported),
otree.session.run_creating_session_functions, otree.views.rest.RESTSessions.post,
otree.channels.consumers.BaseCreateSession.lock, the create pages' send_response_to_browser
(WSCreateSession, WSCreateDemoSession), and adds the treatment's keys to
otree.session.NON_EDITABLE_FIELDS.

WHY: oTree commits a session before the apps' ``creating_session`` runs, and its callers roll back
its own deletion when that fails: a refused session stayed in the session list, its links
answering 500, and REST answered a refusal with a 500 and a traceback. oTree's admin creates a
session in a thread without its global lock (``BaseCreateSession.lock`` is a no-op) on the
server's one database connection: page requests committed or rolled back the creation half-way
(players in no group, foreign-key errors). Its create pages show Python tracebacks with the
server's paths. The behaviour is lab/experimenter/session_creation.py.

HOW TO CHECK: tests/test_refused_session.py and
tests/test_admin_create_session_shares_the_connection.py without this patch (remove it from
patch_modules()); read oTree's create_session for a rollback of the failed session.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.session.create_session", "otree.session.run_creating_session_functions",
           "otree.views.rest.RESTSessions.post", "otree.views.rest.create_session",
           "otree.channels.consumers.BaseCreateSession",
           "otree.channels.consumers.WSCreateSession.send_response_to_browser",
           "otree.channels.consumers.WSCreateDemoSession.send_response_to_browser",
           "otree.session.NON_EDITABLE_FIELDS", "otree.session.CreateSessionInvalidArgs",
           "otree.session.SESSION_CONFIGS_DICT", "otree.room.ROOM_DICT", "otree.views.admin.CreateSession"]
REPLACED = ["otree.session.create_session", "otree.session.run_creating_session_functions",
            "otree.views.rest.RESTSessions.post", "otree.views.rest.create_session",
            "otree.channels.consumers.WSCreateSession.send_response_to_browser",
            "otree.channels.consumers.WSCreateDemoSession.send_response_to_browser"]


def install() -> None:
    import otree.session
    import otree.views.rest
    from otree.channels.consumers import BaseCreateSession, WSCreateDemoSession, WSCreateSession
    from otree.middleware import lock2

    from lab.experimenter.session_creation import leaving_nothing, rest_post_with_model_check, without_traceback
    from lab.base.session_settings import TREATMENT_KEYS

    if patched_by(otree.session.create_session) == "session_creation":
        return
    original_create = otree.session.create_session
    original_run_hooks = otree.session.run_creating_session_functions
    create_session, run_hooks = leaving_nothing(original_create, original_run_hooks)
    original_rest_post = otree.views.rest.RESTSessions.post

    BaseCreateSession.lock = lock2  # the one connection: one transaction at a time
    for page in (WSCreateSession, WSCreateDemoSession):
        original_send = page.send_response_to_browser
        page.send_response_to_browser = marked(without_traceback(original_send), original_send, __name__)
    otree.session.NON_EDITABLE_FIELDS.update(TREATMENT_KEYS)  # the create page shows every other flat value

    otree.session.run_creating_session_functions = marked(run_hooks, original_run_hooks, __name__)
    otree.session.create_session = marked(create_session, original_create, __name__)
    otree.views.rest.create_session = otree.session.create_session  # REST imported the name
    otree.views.rest.RESTSessions.post = marked(rest_post_with_model_check(original_rest_post), original_rest_post,
                                                __name__)
