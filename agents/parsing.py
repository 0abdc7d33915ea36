"""Reading the agent's reply: the message inside ``<...>`` and the choice in ``I DECIDE TO CHOOSE [A]``.

Both parsers are tolerant of what real models write (full-width brackets and letters, Markdown
bold, quotes, extra words, Chinese phrasing) and return None for anything they cannot read with
confidence: the agent then re-asks once or falls back. The last usable occurrence wins, because
models often restate the instruction ("I must complete 'I DECIDE TO CHOOSE []'") before answering.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

import protocol

# A message between angle brackets: ASCII, full-width and CJK angle brackets.
_MESSAGE_PATTERNS = (
    re.compile(r"[<＜]([^<>＜＞]*)[>＞]"),
    re.compile(r"[〈⟨]([^〈〉⟨⟩]*)[〉⟩]"),
)
# Texts between brackets that are not messages: the prompt's own format example echoed back,
# placeholders and HTML-ish tags.
_NOT_MESSAGES = {
    "the message you want to send",
    "message",
    "your message",
    "br",
    "br/",
    "/br",
}
_QUOTES = "\"'“”‘’「」『』*_` "
_CHOICE_SENTENCE = re.compile(r"(?:I\s*DECIDE\s*TO\s*CHOOSE|我决定选择?)", re.IGNORECASE)
# What may follow the sentence before the letter: spaces, Markdown, quotes, brackets, "option".
_CHOICE_LETTER = re.compile(
    r"""^[\s*_:："'“”‘’`]*(?:(?:option|strategy|to\s+play|play|playing)\s*)?[\s*_"'“”‘’`]*"""
    r"""[\[【(（{]?[\s*_"'“”‘’`]*(?:option\s*)?([AB])(?![A-Za-z])[\s*_"'“”‘’`]*[\]】)）}]?""",
    re.IGNORECASE,
)
# "[A] or [B]", "A/B", "A or B": the instruction echoed, not a choice.
_ECHOED_ALTERNATIVES = re.compile(r"^[\s\]】)）}*_\"'“”‘’`]*(?:or|/|\||或者?|还是)\s*[\[【(（{]?\s*[AB]\b",
                                  re.IGNORECASE)


def parse_message(reply: Optional[str]) -> Optional[str]:
    """The last non-empty message inside angle brackets, trimmed; None if there is none."""
    if not reply:
        return None
    for pattern in _MESSAGE_PATTERNS:
        candidates = [_clean_message(m.group(1)) for m in pattern.finditer(reply)]
        candidates = [c for c in candidates if c and c.lower().rstrip(".") not in _NOT_MESSAGES]
        if candidates:
            return candidates[-1][: protocol.MESSAGE_MAX_CHARS]
    return None


def _clean_message(text: str) -> str:
    return " ".join(text.split()).strip(_QUOTES)


def parse_choice(reply: Optional[str]) -> Optional[str]:
    """"A" or "B" from the last unambiguous ``I DECIDE TO CHOOSE [X]``; None if there is none."""
    if not reply:
        return None
    text = unicodedata.normalize("NFKC", reply)  # full-width ［Ａ］ -> [A]
    chosen = None
    for sentence in _CHOICE_SENTENCE.finditer(text):
        rest = text[sentence.end(): sentence.end() + 80]
        letter = _CHOICE_LETTER.match(rest)
        if letter is None:
            continue  # "I DECIDE TO CHOOSE []" echoed, or no letter
        if _ECHOED_ALTERNATIVES.match(rest[letter.end():]):
            continue  # "[A] or [B]": the instruction, not a decision
        chosen = letter.group(1).upper()
    return chosen
