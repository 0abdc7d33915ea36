"""What a participant types, made safe to count and store: the one place that cleans free text.

The message page's script (`_static/lab/text.js`) applies the same rules before it counts, so
the browser's counter and the server agree on every input:

- line breaks: a browser submits a textarea's line break as CR LF and counts it as one
  character; both become a single LF;
- Unicode NFC, so that "é" typed as e + combining accent is one character, as it looks;
- removed: control characters other than LF and TAB (NUL would break PostgreSQL and is stored
  as is by SQLite), lone surrogates (not encodable), and U+FFFD, which is what invalid UTF-8 in a
  request becomes when it is decoded: it never reaches the data as mojibake;
- length: code points (Python's ``len``; JavaScript's ``[...text].length``), so an emoji
  or a Chinese character is one character.
"""

from __future__ import annotations

import re
import unicodedata

_LINE_BREAK = re.compile(r"\r\n?")
# Refused, not cleaned, in a label, an address or a setting: every C0 and C1 control.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# C0 and C1 controls except TAB and LF, DEL, lone surrogates, and the replacement character.
_REMOVED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffd]")


def clean_text(text: str | None) -> str:
    """``text`` as it is counted and stored ('' for None)."""
    if not text:
        return ""
    text = _LINE_BREAK.sub("\n", text)
    text = _REMOVED.sub("", text)
    return unicodedata.normalize("NFC", text)


def text_length(text: str | None) -> int:
    """Characters as the participant's counter shows them."""
    return len(clean_text(text))


def truncate(text: str | None, max_chars: int) -> str:
    """The first ``max_chars`` characters of the cleaned text."""
    return clean_text(text)[:max_chars]
