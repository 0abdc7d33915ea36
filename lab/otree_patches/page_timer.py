"""REPLACES: otree.views.abstract.Page.remaining_timeout_seconds_inner (wrapped),
otree.views.abstract.Page._is_past_timeout

WHY: oTree's page deadlines run on the wall clock; it has no pause. While the experimenter has
paused a session (the dashboard), pages must not time out, and a page first shown during the
pause must get its full time after the resume; lab/server/pause.py keeps the session's clock and reads
oTree's private ``_timeout_expiration_time`` / ``_timeout_page_index``.

HOW TO CHECK: tests/test_experimenter_pause.py without this patch (remove it from patch_modules()): a
page shown during a pause times out early.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.views.abstract.Page.remaining_timeout_seconds_inner", "otree.views.abstract.Page._is_past_timeout",
           "otree.views.abstract.Page.remaining_timeout_seconds", "otree.views.abstract.Page._get_timeout_submission"]
REPLACED = ["otree.views.abstract.Page.remaining_timeout_seconds_inner", "otree.views.abstract.Page._is_past_timeout"]


def install() -> None:
    from otree.views.abstract import Page

    from lab.server import pause

    if patched_by(Page._is_past_timeout) == "page_timer":
        return
    original_time_left, original_past = Page.remaining_timeout_seconds_inner, Page._is_past_timeout
    Page.remaining_timeout_seconds_inner = marked(pause.pause_aware_time_left(original_time_left),
                                                  original_time_left, __name__)
    Page._is_past_timeout = marked(pause.is_past_timeout, original_past, __name__)
