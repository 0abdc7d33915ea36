"""REPLACES: otree.views.participant.AssignVisitorToRoom.get (wrapped)

WHY: oTree hands a room label's participant to every browser that opens the room with that
label, so a mistyped label (cubicle07 typed on cubicle08) puts two PCs on one participant, each
submitting the other's pages. lab/server/rooms.py lets the first browser hold the label and refuses
another with a message.

HOW TO CHECK: tests/test_browser_room.py without this patch (remove it from patch_modules()): a second
browser with the same label gets the first one's participant.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.views.participant.AssignVisitorToRoom.get", "otree.room.ROOM_DICT", "otree.room.BaseRoom"]
REPLACED = ["otree.views.participant.AssignVisitorToRoom.get"]


def install() -> None:
    from otree.views.participant import AssignVisitorToRoom

    from lab.server.rooms import one_browser_per_label

    if patched_by(AssignVisitorToRoom.get) == "rooms":
        return
    original = AssignVisitorToRoom.get
    AssignVisitorToRoom.get = marked(one_browser_per_label(original), original, __name__)
