"""The norm estimates' intervals as the analysis reads them: an estimate is an index into the
sessions' experiment's ``questionnaires.norm_intervals`` (the paper's five by default); an
experiment without the norm estimates page has none."""

from __future__ import annotations

import protocol

# Fig. S2's groups on the paper's intervals: 60–80 % and 80–100 % merged, as in the paper.
PAPER_GROUP_LABELS = {0: "0–20 %", 1: "20–40 %", 2: "40–60 %", 3: "60–100 %"}
NONE_ASKED = "The sessions' experiment asks no norm estimate (questionnaires.pages)."


def papers(intervals) -> bool:
    return tuple(map(tuple, intervals)) == tuple(protocol.NORM_INTERVALS)


def groups(intervals) -> dict[int, str]:
    """Estimate index -> its group in Fig. S2: on the paper's intervals the paper's groups, on an
    experiment's own each interval a group of its own."""
    if papers(intervals):
        return {index: PAPER_GROUP_LABELS[min(index, 3)] for index in range(len(intervals))}
    return {index: f"{lo}–{hi} %" for index, (lo, hi) in enumerate(intervals)}


def index_note(intervals) -> str:
    """What the estimates' indices mean, for a section's note."""
    if papers(intervals):
        return "0 = 0–20 % … 4 = 80–100 %"
    return ", ".join(f"{index} = {lo}–{hi} %" for index, (lo, hi) in enumerate(intervals))
