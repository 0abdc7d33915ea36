"""REPLACES: nothing. What the project reads, calls or overrides of oTree's private parts without
patching them, and the oTree templates it copies: fingerprinted with the patches' targets
(tests/test_otree_seam.py), so that an oTree that renames or changes them is noticed.

- Participants' private fields, read (and some written) in some 50 places: ``_index_in_pages``,
  ``_max_page_index``, ``_timeout_expiration_time``, ``_timeout_page_index``, ``_session_code``,
  ``_current_page_name``, ``_current_app_name``, ``_waitpage_is_connected``, ``_waitpage_tab_hidden``,
  ``_last_request_timestamp``, ``_last_page_timestamp``, ``_monitor_note_json``, ``_start_url``,
  ``_url_i_should_be_on``, ``_get_page_instance``, ``_is_bot`` (otree.models.participant); ``_vars``
  of participants and sessions (otree.database.MixinVars); players' ``_payoff`` and ``_role``,
  ``_session_pk``/``_subsession_pk`` of pages and models; ``db._db`` (the SQLAlchemy session).
- Wait pages' private methods, overridden or called by lab/agent_runtime/wait_pages.py, lab/shared_pages/wait_for_all.py
  and lab/online/: ``inner_dispatch_group``, ``_response_when_ready``, ``_get_wait_page``,
  ``_run_aapa_and_notify``, ``_tally_unvisited``, ``_mark_completed_and_notify``,
  ``_get_participants_for_this_waitpage``, ``_group_or_subsession``; oTree's
  ``CompletedGroupWaitPage`` and its wait-page channel names.
- The admin's login check (``_is_unauthorized``, ``_is_logged_in``: lab/experimenter/admin_views.py), the
  websocket consumers' base (``_requires_login``: lab/server/notices.py), the channel layer's ``_subs``
  (lab/agent_runtime/waiting.py).
- Templates copied and changed: _templates/otree/Session.html, _templates/otree/Base_UserFacing.html.

HOW TO CHECK: when a fingerprint here changes, grep the project for the names above that the
changed oTree source defines, and read what oTree now does with them.
"""

from __future__ import annotations

TARGETS = ["otree.models.participant.Participant", "otree.models.session.Session", "otree.models.player.BasePlayer",
           "otree.database.MixinVars", "otree.database.DBWrapper", "otree.database.SSPPGModel",
           "otree.database.SPGModel", "otree.views.abstract.FormPageOrInGameWaitPage",
           "otree.views.abstract.Page", "otree.views.abstract.WaitPage", "otree.views.abstract.GenericWaitPageMixin",
           "otree.models_concrete.CompletedGroupWaitPage", "otree.channels.utils.group_wait_page_name",
           "otree.channels.utils.ChannelLayer", "otree.channels.consumers._OTreeAsyncJsonWebsocketConsumer",
           "otree.views.cbv.AdminView", "otree.lookup", "otree.tasks.ensure_pages_visited",
           "template:otree/Session.html", "template:otree/Base_UserFacing.html"]
REPLACED: list[str] = []


def install() -> None:
    """Nothing to apply: what is read is only fingerprinted."""
