"""REPLACES: otree.views.participant.SessionWideLink.get (wrapped; online sessions only)

WHY: an online session's study link is oTree's session-wide link with Prolific's
``PROLIFIC_PID``, ``STUDY_ID`` and ``SESSION_ID``. oTree keeps only ``participant_label`` from it
and hands a label that exists again to whoever brings it: a PID could take a second seat, a
placeholder Prolific did not fill went through, and Prolific's parameters were lost.
lab/online/entry.py checks them, gives one seat per PID and records them in the participant's
vars.

HOW TO CHECK: tests/test_online_entry.py without this patch (remove it from patch_modules()).
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.views.participant.SessionWideLink.get", "otree.views.participant.SessionWideLink"]
REPLACED = ["otree.views.participant.SessionWideLink.get"]


def install() -> None:
    from otree.views.participant import SessionWideLink

    from lab.online.entry import reading_the_study_link

    if patched_by(SessionWideLink.get) == "session_wide_link":
        return
    original = SessionWideLink.get
    SessionWideLink.get = marked(reading_the_study_link(original), original, __name__)
