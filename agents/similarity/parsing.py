"""Reading the models' replies: the choice, the answer letter, the rating, the labels.

Each parser returns None when the reply holds no usable value (the call is then recorded as
``parse_error``). The choice is read by the lab's rules (``agents.parsing.parse_choice``: ``<think>``
blocks ignored, the options restated are no choice, conflicting or retracted choices none), so the
testbed and the lab read a model's decision alike; for the answer, the rating and the labels the
last occurrence wins: models often restate the options before answering.
"""

from __future__ import annotations

import re
from typing import Optional

from agents.parsing import parse_choice  # noqa: F401  (the runner reads it here)
from protocol import CHOICES

# Where the final decision line starts: the reasoning is what comes before it.
_DECISION_LINE = re.compile(r"I\s+DECIDE\s+TO\s+CHOOSE\s*\[?\s*([%s])\s*\]?" % "".join(CHOICES), re.I)
_ANSWER = re.compile(r"ANSWER\s*:\s*\**\s*\(?([A-H])\b", re.I)
_SIMILARITY = re.compile(r"SIMILARITY\s*:\s*\**\s*(\d+(?:\.\d+)?)\s*%?", re.I)
_LABELS = re.compile(r"LABELS\s*:\s*(.*)", re.I)


def _last(pattern: re.Pattern[str], text: Optional[str]) -> Optional[re.Match[str]]:
    matches = list(pattern.finditer(text or ""))
    return matches[-1] if matches else None


def reasoning_of(text: Optional[str]) -> str:
    """The reply without its final decision/answer line: the chain of thought the judge reads."""
    text = text or ""
    for pattern in (_DECISION_LINE, _ANSWER, _SIMILARITY, _LABELS):
        match = _last(pattern, text)
        if match:
            text = text[: match.start()]
            break
    return text.strip()


def parse_answer(text: Optional[str], option_count: int) -> Optional[str]:
    match = _last(_ANSWER, text)
    if not match:
        return None
    letter = match.group(1).upper()
    return letter if ord(letter) - ord("A") < option_count else None


def parse_similarity(text: Optional[str]) -> Optional[float]:
    match = _last(_SIMILARITY, text)
    if not match:
        return None
    value = float(match.group(1))
    return value if 0.0 <= value <= 100.0 else None


def parse_labels(text: Optional[str], known: list[str]) -> Optional[list[str]]:
    """Known category names listed on the LABELS line; [] for NONE; None if no such line or
    nothing on it is a known name (a judge inventing categories is a parse error)."""
    match = _last(_LABELS, text)
    if not match:
        return None
    line = match.group(1).strip().strip("*").strip()
    if line.upper().startswith("NONE"):
        return []
    names = [n.strip().strip("`*'\"").lower() for n in re.split(r"[,;]", line)]
    labels = [n for n in names if n in known]
    return sorted(set(labels), key=known.index) or None
