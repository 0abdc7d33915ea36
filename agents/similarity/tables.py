"""The testbed's output tables (docs/similarity.md, "Outputs"), written as tidy CSV.

``llm_calls.csv`` is the DATA.md table (session keys + CallRecord fields), so the analysis
package reads it with the lab's. The other tables are the testbed's own; none carries the
column sets DATA.md uses to recognise the lab's tables (e.g. no ``round`` next to ``choice``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from agents.simulate.tables import CALL_COLUMNS

DECISION_COLUMNS = [
    "session_code", "source", "experiment", "game", "view", "model", "co_player", "framing",
    "similarity", "stated_number", "sample", "group_id", "seat", "choice", "cooperated", "status",
    "reasoning", "threshold", "call_id", "provider", "provider_model", "prompt_version", "scope",
]
COLUMNS = {
    "decisions": DECISION_COLUMNS,
    "answers": ["session_code", "model", "question_id", "category", "sample", "answer", "status",
                "reasoning", "call_id"],
    "scores": ["session_code", "kind", "view", "rater", "model", "co_player", "score", "sample",
               "status", "call_id", "exogenous_score"],
    "welfare": ["session_code", "experiment", "game", "view", "model", "co_player", "framing",
                "similarity", "group_id", "players", "complete", "cooperators", "welfare",
                "optimal_welfare", "welfare_share"],
    "judge_labels": ["session_code", "decision_call_id", "experiment", "game", "view", "model",
                     "framing", "similarity", "choice", "category", "assigned", "judge_label",
                     "judge_provider", "judge_model", "judge_status", "judge_call_id"],
    "thresholds": ["session_code", "game", "parameters", "threshold", "threshold_percent"],
}
FILE_NAMES = {
    "decisions": "similarity_decisions.csv",
    "answers": "similarity_answers.csv",
    "scores": "similarity_scores.csv",
    "welfare": "similarity_welfare.csv",
    "judge_labels": "similarity_judge_labels.csv",
    "calls": "llm_calls.csv",
    "thresholds": "similarity_thresholds.csv",
}


# Row order of each table: its design columns (never the random call ids), then the scope.
SORT_KEYS = {
    "decisions": ["experiment", "game", "view", "model", "co_player", "framing", "similarity", "group_id",
                  "sample", "seat", "scope"],
    "answers": ["model", "question_id", "sample"],
    "scores": ["kind", "view", "rater", "model", "co_player", "sample"],
    "welfare": ["experiment", "game", "view", "model", "co_player", "framing", "similarity", "group_id"],
    "judge_labels": ["experiment", "game", "view", "model", "framing", "similarity", "choice", "category"],
    "thresholds": ["game"],
}


def sort_rows(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    keys = [k for k in SORT_KEYS.get(name, []) if k in frame]
    if frame.empty or not keys:
        return frame
    return frame.sort_values(keys, key=_sortable, kind="stable", na_position="first").reset_index(drop=True)


def _sortable(column: pd.Series) -> pd.Series:
    """Numbers as numbers (20 before 100), anything else as text (never a TypeError on mixes)."""
    numbers = pd.to_numeric(column, errors="coerce")
    if numbers.notna().sum() == column.notna().sum():
        return numbers
    return column.astype(str)


def llm_calls_frame(calls: list[dict], run_id: str) -> pd.DataFrame:
    """DATA.md's llm_calls: the simulation's session keys, CallRecord fields, JSON columns."""
    keys = {"session_code": run_id, "treatment": "A-A", "associate_type": None,
            "label_setting": None, "game_order": None, "source": "simulation",
            "participant_code": None}
    rows = []
    for call in calls:
        row = {**keys, **call}
        row["parameters"] = json.dumps(call["parameters"], ensure_ascii=False)
        row["messages"] = json.dumps(call["messages"], ensure_ascii=False)
        rows.append(row)
    return pd.DataFrame(rows, columns=CALL_COLUMNS)


def write_tables(frames: dict[str, pd.DataFrame], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, frame in frames.items():
        path = out_dir / FILE_NAMES[name]
        frame.to_csv(path, index=False)
        written[name] = path
    return written
