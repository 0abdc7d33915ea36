"""REPLACES: otree.views.abstract.FormPageOrInGameWaitPage._is_displayed,
otree.views.abstract.FormPageOrInGameWaitPage._increment_index_in_pages,
otree.views.abstract.Page._record_page_completion_time (each wrapped once)

WHY: oTree can only skip a page by the app's ``is_displayed``, and has no notion of a participant
who has left. Online sessions need two skips, both in oTree's own way (a skipped wait page counts
the participant as arrived): a participant whose outcome ends their session (screened out, lobby
timeout, dropped) skips every page up to the exit page (lab/online/exit.py), and a seat dropped
for closed tabs or repeated timeouts skips too, is moved straight to the exit page, and has its
timed-out pages counted (lab/online/dropouts.py). Without them a dropped participant's partner
waits for ever at the next wait page.

The two ``_is_displayed`` wrappers are applied here as one, in a fixed order: the dropout check
(which also notes the session for the closed-tab watcher) runs first, then the leavers' skip,
then oTree's.

HOW TO CHECK: tests/test_online_dropouts.py and tests/test_online_lobby.py without this patch
(remove it from patch_modules()); read oTree's _increment_index_in_pages and _is_displayed for a hook.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.views.abstract.FormPageOrInGameWaitPage._is_displayed",
           "otree.views.abstract.FormPageOrInGameWaitPage._increment_index_in_pages",
           "otree.views.abstract.Page._record_page_completion_time",
           "otree.views.abstract.WaitPage._tally_unvisited", "otree.views.abstract.WaitPage._run_aapa_and_notify",
           "otree.views.abstract.FormPageOrInGameWaitPage.set_attributes",
           "otree.views.abstract.FormPageOrInGameWaitPage.instantiate_without_request",
           "otree.lookup.get_page_lookup"]
REPLACED = ["otree.views.abstract.FormPageOrInGameWaitPage._is_displayed",
            "otree.views.abstract.FormPageOrInGameWaitPage._increment_index_in_pages",
            "otree.views.abstract.Page._record_page_completion_time"]


def install() -> None:
    from otree.views.abstract import FormPageOrInGameWaitPage, Page

    from lab.online import dropouts, exit

    if patched_by(FormPageOrInGameWaitPage._is_displayed) == "page_index":
        return
    original_displayed = FormPageOrInGameWaitPage._is_displayed
    original_increment = FormPageOrInGameWaitPage._increment_index_in_pages
    original_record = Page._record_page_completion_time
    is_displayed = dropouts.skipping_dropped(exit.skipping_leavers(original_displayed))
    FormPageOrInGameWaitPage._is_displayed = marked(is_displayed, original_displayed, __name__)
    FormPageOrInGameWaitPage._increment_index_in_pages = marked(dropouts.jumping_to_exit(original_increment),
                                                                original_increment, __name__)
    Page._record_page_completion_time = marked(dropouts.counting_timeouts(original_record), original_record,
                                               __name__)
