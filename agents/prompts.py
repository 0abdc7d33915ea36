"""The paper's agent prompts (SI Note 5), rendered from ``prompts/*.j2`` with game state.

The templates hold the text word for word; this module only fills the placeholders: payoffs and
the message word limit from ``protocol``, the persona's role-play paragraph, the round's messages
and the agent's past rounds. ``prompt_version()`` is a content hash of every template, recorded
with each call, so a data set says exactly which prompts produced it.

Jinja2 is held at 2.11 by oTree's MarkupSafe pin: the templates use nothing newer.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import jinja2

import protocol

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
LANGUAGES = ("zh", "en")
# The persona names the paper's prompts use ("Remember that you are a {PERSONA_NAME} human").
PERSONA_NAMES = {"cooperative": "COOPERATIVE", "fair": "FAIR-MINDED", "selfish": "INDIVIDUALISTIC"}
CHAT_LANGUAGE_NAMES = {"zh": "Chinese", "en": "English"}


@dataclass(frozen=True)
class PastRound:
    """One line of the decision prompt's history."""

    round_number: int
    own_choice: str
    associate_choice: str
    own_payoff: int
    associate_payoff: int


@functools.lru_cache(maxsize=1)
def _template_sources() -> dict[str, str]:
    """Every agent template, read once: what is rendered is exactly what ``prompt_version`` hashes."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(PROMPTS_DIR.glob("*.j2"))}


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.DictLoader(_template_sources()),
        undefined=jinja2.StrictUndefined,  # a missing placeholder is an error, never blank text
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,  # an included file ends its line
        autoescape=False,
    )


def render(template_name: str, **variables: object) -> str:
    """Render one template by file name with explicit variables (used by the tests too)."""
    return _environment().get_template(template_name).render(**variables).strip("\n")


@functools.lru_cache(maxsize=1)
def prompt_version() -> str:
    """Content hash of the agent templates (``prompts/*.j2``) as loaded, 12 hex digits."""
    digest = hashlib.sha256()
    for name, source in _template_sources().items():
        digest.update(name.encode("utf-8") + b"\0" + source.encode("utf-8") + b"\0")
    return digest.hexdigest()[:12]


def _check(persona: Optional[str] = None, language: Optional[str] = None) -> None:
    if persona is not None and persona not in PERSONA_NAMES:
        raise ValueError(f"persona must be one of {tuple(PERSONA_NAMES)}, not {persona!r}")
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, not {language!r}")


@functools.lru_cache(maxsize=32)
def system_prompt(persona: str, language: str = "zh", *, with_communication: bool = True) -> str:
    _check(persona, language)
    return render(
        f"system_{language}.j2",
        example_dialogues=render(f"examples_{language}.j2"),
        roleplay=render(f"roleplay_{persona}.j2"),
        with_communication=with_communication,
        max_words=protocol.AGENT_MESSAGE_MAX_WORDS,
        payoff_aa=protocol.payoff("A", "A"),
        payoff_bb=protocol.payoff("B", "B"),
        payoff_ab_own=protocol.payoff("A", "B"),
        payoff_ab_other=protocol.payoff("B", "A"),
        payoff_ba_own=protocol.payoff("B", "A"),
        payoff_ba_other=protocol.payoff("A", "B"),
    )


def message_1_prompt(round_number: int, persona: str, language: str = "zh") -> str:
    _check(persona, language)
    return render("message_1.j2", round_number=round_number, persona_name=PERSONA_NAMES[persona],
                  chat_language=CHAT_LANGUAGE_NAMES[language])


def message_2_prompt(own_message_1: Optional[str], associate_message_1: Optional[str], language: str = "zh") -> str:
    """None for a message = it was not sent in time; the prompt says so plainly."""
    _check(language=language)
    return render("message_2.j2", own_message_1=own_message_1, associate_message_1=associate_message_1,
                  chat_language=CHAT_LANGUAGE_NAMES[language])


def decision_prompt(
    round_number: int,
    persona: str,
    *,
    history: list[PastRound],
    total_payoff: int,
    with_communication: bool = True,
    own_message_1: Optional[str] = None,
    associate_message_1: Optional[str] = None,
    own_message_2: Optional[str] = None,
    associate_message_2: Optional[str] = None,
) -> str:
    _check(persona)
    common = dict(round_number=round_number, persona_name=PERSONA_NAMES[persona], history=history,
                  total_payoff=total_payoff)
    if not with_communication:
        return render("decision_woc.j2", **common)
    return render("decision.j2", own_message_1=own_message_1, associate_message_1=associate_message_1,
                  own_message_2=own_message_2, associate_message_2=associate_message_2, **common)


def reask_prompt(is_decision: bool, *, too_long: bool = False, max_chars: int = protocol.MESSAGE_MAX_CHARS,
                 problem: Optional[str] = None) -> str:
    """Our one-time re-ask after a malformed reply, or a message over the limit (not in the paper);
    ``problem`` (what the parser found wrong) is appended as one line, so the re-ask is never the
    request that failed."""
    if too_long and not is_decision:
        text = render("reask_message_shorter.j2", max_chars=max_chars, max_words=protocol.AGENT_MESSAGE_MAX_WORDS)
    else:
        text = render("reask_decision.j2" if is_decision else "reask_message.j2")
    if problem:
        text += "\n" + render("reask_problem.j2", problem=" ".join(problem.split()).rstrip("."))
    return text
