"""The testbed's prompts: Jinja2 templates under prompts/similarity/, hashed per call.

Every call records ``prompt_version``: a content hash of exactly the templates that rendered
its messages, so a changed wording shows up as a new version in the ``llm_calls`` table.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import jinja2

from agents.types import ChatMessage

from .threshold import PrisonersDilemma, PublicGoodsGame

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "prompts" / "similarity"
OPTION_LETTERS = "ABCDEFGH"

_environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
    autoescape=False,
)


@lru_cache(maxsize=None)
def _template_source(name: str) -> str:
    return (TEMPLATE_DIR / name).read_text(encoding="utf-8")


def prompt_version(*names: str) -> str:
    digest = hashlib.sha256()
    for name in sorted(set(names)):
        digest.update(name.encode() + b"\0" + _template_source(name).encode() + b"\0")
    return "similarity-" + digest.hexdigest()[:12]


def render(name: str, **context: Any) -> str:
    return _environment.get_template(name).render(**context).strip()


@dataclass(frozen=True)
class Prompt:
    messages: list[ChatMessage]
    version: str


def _conversation(user_template: str, extra_templates: tuple[str, ...], **context: Any) -> Prompt:
    messages = [
        ChatMessage("system", render("system.j2")),
        ChatMessage("user", render(user_template, **context)),
    ]
    return Prompt(messages, prompt_version("system.j2", user_template, *extra_templates))


def format_percent(value: float) -> str:
    """70.0 -> "70", 72.5 -> "72.5": the number as a person would write it."""
    return f"{round(value, 1):g}"


def signal_text(framing: Optional[str], similarity: Optional[float], partner_phrase: str) -> str:
    """The similarity statement; framing None = the no-signal baseline (empty)."""
    if framing is None:
        return ""
    assert similarity is not None
    return render(
        "signal.j2",
        framing=framing,
        score_text=format_percent(similarity),
        complement_text=format_percent(100.0 - similarity),
        partner_phrase=partner_phrase,
    )


def pd_prompt(game: PrisonersDilemma, framing: Optional[str], similarity: Optional[float]) -> Prompt:
    signal = signal_text(framing, similarity, "your co-player")
    return _conversation(
        "pd_decision.j2", ("signal.j2",), signal=signal,
        R=format_percent(game.R), S=format_percent(game.S),
        T=format_percent(game.T), P=format_percent(game.P),
    )


def pgg_prompt(game: PublicGoodsGame, framing: Optional[str], similarity: Optional[float]) -> Prompt:
    signal = signal_text(framing, similarity, "each of your co-players")
    return _conversation(
        "pgg_decision.j2", ("signal.j2",), signal=signal, players=game.players,
        multiplier=format_percent(game.multiplier), endowment=format_percent(game.endowment),
    )


@dataclass(frozen=True)
class Question:
    id: str
    category: str
    text: str
    options: tuple[str, ...]


def load_questions(path: Path) -> list[Question]:
    with open(path, "rb") as f:
        table = tomllib.load(f)
    questions = [
        Question(q["id"], q.get("category", ""), q["text"], tuple(q["options"]))
        for q in table["questions"]
    ]
    if len({q.id for q in questions}) != len(questions):
        raise ValueError(f"{path}: question ids must be unique")
    if any(not 2 <= len(q.options) <= len(OPTION_LETTERS) for q in questions):
        raise ValueError(f"{path}: every question needs 2..{len(OPTION_LETTERS)} options")
    return questions


def question_prompt(question: Question) -> Prompt:
    return _conversation("question.j2", (), question=question)


@dataclass(frozen=True)
class ShownAnswer:
    """One of the other model's answers as the rater sees it."""

    id: str
    text: str
    options: tuple[str, ...]
    answer: str  # option letter
    reasoning: str


def rating_prompt(answers: list[ShownAnswer], *, show_reasoning: bool) -> Prompt:
    return _conversation("rating.j2", (), answers=answers, show_reasoning=show_reasoning)


def judge_prompt(game_name: str, choice: str, reasoning: str, categories: list[Any]) -> Prompt:
    return _conversation(
        "judge.j2", (), game_name=game_name, choice=choice, reasoning=reasoning,
        categories=categories,
    )
