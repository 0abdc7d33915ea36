"""Online sessions' stand-in pair-rounds (docs/online.md): left out of the analysis by default.

A pair-round went on without one of its participants when a decision row of it has a
``dropout_rule`` (``stand_in``: an agent played the dropped seat; ``alone``: the seat's choice was
random) or says ``stand_in`` / ``partner_stand_in``. Its rows (both sides' decisions and its
messages) are not the paper's design, so they are left out unless ``--include-stand-ins``; the
report and the command line say how many.
"""

from __future__ import annotations

import pandas as pd

from analysis.load import Exports, Problem, to_bool

FLAGS = ("stand_in", "partner_stand_in")


def stand_in_conversations(decisions: pd.DataFrame, messages: pd.DataFrame) -> set:
    """conversation_id of every pair-round a stand-in (or an absent seat) took part in."""
    found: set = set()
    for table in (decisions, messages):
        if table.empty or "conversation_id" not in table:
            continue
        marked = pd.Series(False, index=table.index)
        for flag in FLAGS:
            if flag in table:
                marked |= to_bool(table[flag]).fillna(False).astype(bool)
        if "dropout_rule" in table:
            marked |= table["dropout_rule"].fillna("").astype(str).str.strip() != ""
        found |= set(table.loc[marked, "conversation_id"])
    return found


def apply(exports: Exports, include: bool = False) -> tuple[Exports, int]:
    """The exports without stand-in pair-rounds (unless ``include``), and how many there were."""
    decisions, messages = exports.decisions, exports.messages
    conversations = stand_in_conversations(decisions, messages)
    if not conversations:
        return exports, 0
    if include:
        exports.problems.append(Problem("decisions", "stand_in", f"{len(conversations)} stand-in pair-rounds kept "
                                        "(--include-stand-ins)", "info"))
        return exports, len(conversations)
    tables = dict(exports.tables)
    for name in ("decisions", "messages"):
        if name in tables and "conversation_id" in tables[name]:
            tables[name] = tables[name][~tables[name]["conversation_id"].isin(conversations)].reset_index(drop=True)
    problems = list(exports.problems) + [Problem(
        "decisions", "stand_in", f"{len(conversations)} stand-in pair-rounds excluded (online dropouts: an agent "
        "stand-in or an absent seat played one side); --include-stand-ins keeps them", "info")]
    return Exports(tables, exports.files, problems), len(conversations)
