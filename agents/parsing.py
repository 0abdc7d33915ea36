"""Reading the agent's reply: the message inside ``<...>`` and the choice in ``I DECIDE TO CHOOSE [A]``.

The choice is named by its label in the session's language (the paper's: A and B, its ids), and
returned as its id: every function that reads a choice takes ``choices``, label -> id.

Both parsers are tolerant of what real models write (full-width brackets and letters, Markdown
bold, quotes, extra words, Chinese phrasing) and return None for anything they cannot read with
confidence: the agent then re-asks once or falls back. The last usable message wins, because
models often restate the instruction ("I must complete 'I DECIDE TO CHOOSE []'") before answering.

Reasoning is never read as the answer: ``split_reasoning`` removes ``<think>…</think>`` blocks
(and a reply that opens with reasoning but only shows ``</think>``) before either parser runs.
HTML tags (``<b>``, ``</b>``, ``<img src=x onerror=…>``) are never messages. Decisions that
conflict (A in one sentence, B in another, "A and B") or are retracted afterwards ("just
kidding", "wait, no") are None: re-asked, never guessed.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Mapping, Optional

import protocol

# A message between angle brackets: ASCII, full-width and CJK angle brackets.
_MESSAGE_PATTERNS = (
    re.compile(r"[<＜]([^<>＜＞]*)[>＞]"),
    re.compile(r"[〈⟨]([^〈〉⟨⟩]*)[〉⟩]"),
)
# Texts between brackets that are not messages: the prompt's own format example echoed back,
# placeholders and HTML-ish tags (agents/grammars.py bars them from a constrained reply).
NOT_MESSAGES = {
    "the message you want to send",
    "message",
    "your message",
    "br",
    "br/",
    "/br",
}
# Echoes of the prompt's format ("put the message you want to send into <>, using the following
# format: <The message you want to send>"): SmolLM2-135M wrote them as its message in every
# spelling ("The message I want to send", "The MessageYouWannaSend", "Your first message", "Sent
# Message in Chinese", "Your Name", "You Want To Send": tests/data/message_echoes.json). A message is
# an echo when it opens with one of these, in any case, its words apart (one space) or run
# together, unless its last word is a plural or past ("My messages…", "placeholders!"):
# "Message.", "MessageYou…", "messageyouwanttosendgofor…" and "messagesend…" are echoes (barred
# from ending or spacing after the opening, SmolLM2 ran it on in lower case, then on after an
# "s"). agents/grammars.py bars the same.
ECHO_OPENINGS = tuple(
    [" ".join(filter(None, (article, which, noun)))
     for article in ("", "the", "a", "this", "your", "my", "our", "sent")
     for which in ("", "first", "second", "last", "next") for noun in ("message", "msg")]
    + [f"{owner} {which}name".replace("  ", " ") for owner in ("your", "my") for which in ("", "first ")]
    + ["your text", "placeholder", "a placeholder", "the placeholder"]
    + [f"{who} {want} {verb}" for who in ("you", "i", "we") for want in ("want to", "wanna")
       for verb in ("send", "share", "add")])
ECHO_WORD_ENDINGS = "sd"  # what may end the last word of an opening: a plural, a past
# ...but not the message: an opening that only turned plural or past is still the format echoed
# ("The messages", "THIS MESSAGEs", "your named": SmolLM2, en bench at 10 rounds).
# The parser also refuses a message with "message" (not "messages", "messaged") in one of its first
# words ("Your second first messagestring, …", "Got your message"): a message to the associate
# is not about the message. Refusing every form within six words re-asked so many of SmolLM2's
# messages that 29 of 80 were lost (en bench, 10 rounds: delivered 91 % -> 64 %).
ECHO_WITHIN_WORDS = 4
# Chinese: what the chat's messages must hold when they must be Chinese (a Han ideograph).
HAN = "\u4e00-\u9fff"  # as characters: a class's content for Python's regex and GBNF alike
_HAN = re.compile(f"[{HAN}]")
# Reasoning blocks of reasoning models (DeepSeek-R1, Qwen3, QwQ...) and their variants.
_REASONING_BLOCK = re.compile(r"<(think|thinking|reasoning|reflection)>.*?(?:</\1>|$)", re.IGNORECASE | re.DOTALL)
_REASONING_CLOSE = re.compile(r"</(?:think|thinking|reasoning|reflection)>", re.IGNORECASE)
# HTML: a closing tag, a tag with attributes, a comment, or a known element name.
_HTML_ELEMENTS = ("a abbr b big blockquote body br center code del details div em font h1 h2 h3 h4 h5 h6 head hr "
                  "html i iframe img input ins kbd li link mark meta ol p pre s script small span strike strong "
                  "style sub summary sup svg table tbody td th thead title tr tt u ul video audio object embed "
                  "form button textarea select option frame frameset base").split()
_HTML_TAG = re.compile(
    r"<\s*/[^<>]*>|<!--.*?-->|<\s*[A-Za-z][\w-]*\s+[\w:-]+\s*=[^<>]*>"
    r"|<\s*(?:" + "|".join(_HTML_ELEMENTS) + r")\s*/?\s*>",
    re.DOTALL,
)
# Plain-text refusals ("I'm sorry, but I can't help with that").
_REFUSAL = re.compile(
    r"^\W*(?:I'?m sorry|I am sorry|sorry|I apologi[sz]e|I can(?:'|no)?t (?:help|assist|comply|do that|"
    r"participate|provide|engage)|I cannot|I won'?t be able|As an AI|抱歉|对不起|很抱歉|我不能|我无法)",
    re.IGNORECASE,
)
# Taking a decision back after stating it.
_RETRACTION = re.compile(
    r"just kidding|\bwait,? no\b|\bno,? wait\b|\bactually,? no\b|take (?:that|it) back|scratch that|"
    r"\bnever ?mind\b|on second thought|changed? my mind|\bnot really\b|开玩笑|不对|算了|改主意",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’「」『』*_` "
_CHOICE_SENTENCE = re.compile(r"(?:I\s*DECIDE\s*TO\s*CHOOSE|我决定选择?)", re.IGNORECASE)
PAPER_CHOICES = {"A": "A", "B": "B"}  # label -> id: the paper's choices are shown as their ids


class _ChoicePatterns:
    """The decision sentence's patterns for the choices' labels (label -> id; the paper's: A and B).
    The check (experiment_design/coherence.py) keeps labels apart: neither within the other in any
    case, no brackets; the labels are compared as the reply is read, NFKC and in any case."""

    def __init__(self, choices: dict[str, str]) -> None:
        labels = [unicodedata.normalize("NFKC", label) for label in choices]
        self.ids = {label.casefold(): choice for label, choice in zip(labels, choices.values())}
        self.labels = sorted(labels, key=len, reverse=True)
        # A label that ends in a letter or digit ends at a word's end; one that ends otherwise (鹿) where it ends.
        either = "|".join(re.escape(label) + (r"\b" if label[-1].isascii() and label[-1].isalnum() else "")
                          for label in self.labels)
        # What may follow the sentence before the label: spaces, Markdown, quotes, brackets, "option".
        self.chosen = re.compile(
            r"""^[\s*_:："'“”‘’`]*(?:(?:option|strategy|to\s+play|play|playing)\s*)?[\s*_"'“”‘’`]*"""
            r"""[\[【(（{]?[\s*_"'“”‘’`]*(?:option\s*)?(""" + "|".join(map(re.escape, self.labels)) +
            r""")(?![A-Za-z])[\s*_"'“”‘’`]*[\]】)）}]?""",
            re.IGNORECASE,
        )
        # "[A] or [B]", "A/B", "A or B": the instruction echoed, not a choice; "A and B": no choice either.
        self.echoed_alternatives = re.compile(
            r"^[\s\]】)）}*_\"'“”‘’`]*(?:or|/|\||或者?|还是)\s*[\[【(（{]?\s*(?:" + either + ")", re.IGNORECASE)
        self.both = re.compile(r"^[\s\]】)）}*_\"'“”‘’`]*(?:and|&|\+|,|和|与|跟)\s*[\[【(（{]?\s*(?:" + either + ")",
                               re.IGNORECASE)
        # What a grammar-shaped reply ends with (agents/grammars.py), the labels exactly as the grammar writes them.
        self.final = re.compile(r"I DECIDE TO CHOOSE \[(" + "|".join(re.escape(label) for label in choices) +
                                r")\]\s*$")
        self.originals = dict(choices)

    def id_of(self, label: str) -> str:
        return self.ids[unicodedata.normalize("NFKC", label).casefold()]


@functools.lru_cache(maxsize=16)
def _patterns(choices: tuple[tuple[str, str], ...]) -> _ChoicePatterns:
    return _ChoicePatterns(dict(choices))


def _choice_patterns(choices: Optional[Mapping[str, str]]) -> _ChoicePatterns:
    """``choices``: label -> id, as the agent's prompts name the choices (None: the paper's A and B)."""
    return _patterns(tuple((choices or PAPER_CHOICES).items()))


_OPENINGS = "(?:" + "|".join("(?i:" + " ?".join(map(re.escape, opening.split())) + ")" for opening in ECHO_OPENINGS) + ")"
_ECHO = re.compile(_OPENINGS + f"(?![{ECHO_WORD_ENDINGS}](?:[^A-Za-z]|$))")
_ECHO_WHOLE = re.compile(_OPENINGS + f"[{ECHO_WORD_ENDINGS}]?" + r"[\W_]*")  # the message is the opening alone
# The placeholder or the format's sentence further in ("This is the message you want to send",
# "insert message here", "You can send the message in English here", "…how to generate your first
# message", a message ending on "message", "the message you are sending", "send me another message to
# say", "Your Named End": SmolLM2, en, 10 rounds, two re-asks), read in the message's letters alone
# (runs on of words and spellings alike): the parser refuses it anywhere; the grammar, which would
# have to grow by a copy of it at every character, does not. Barring "messag" inside the grammar
# was tried: SmolLM2, stopped mid-word, wrote "EeEsSaeEsS…" on instead.
_PLACEHOLDER_WITHIN = re.compile(r"(?:message|msg)(?:that|which)?(?:i|you|we)(?:want|wanna|wouldlike)(?:to)?"
                                 r"(?:send|share|add)|placeholder|send(?:the|a|your)?(?:first|second)?message"
                                 r"|messages?(?:tome|toyou)?(?:here|inenglish|inchinese)|(?:you|i|we)(?:want|wanna)(?:to)?send"
                                 r"|^messages?of(?:your|my)associates?|firstmessageinthisstep|^insert[a-z]{0,20}here"
                                 r"|your(?:(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|next"
                                 r"|last)(?:and)?)+messages?|messaged?$|messages$"
                                 r"|(?:message|msg)(?:you|i|we|here|text|in|to)|yourname|wanttosend|wannasend")


def is_echo(message: str) -> bool:
    """The message echoes the prompt's format or its placeholder: it opens with one of
    ``ECHO_OPENINGS``, or holds the placeholder's words further in."""
    message = " ".join(message.split()).strip(_QUOTES)
    letters = "".join(c for c in message.lower() if "a" <= c <= "z")
    first_words = re.findall(r"[a-z]+", message.lower())[:ECHO_WITHIN_WORDS]
    return (_ECHO.match(message) is not None or _ECHO_WHOLE.fullmatch(message) is not None
            or _PLACEHOLDER_WITHIN.search(letters) is not None
            or any("message" in word and word not in ("messages", "messaged") for word in first_words))


def has_han(message: str) -> bool:
    """The message holds Chinese (a Han ideograph)."""
    return _HAN.search(message) is not None


def _usable(candidate: str) -> bool:
    return bool(candidate) and candidate.lower().rstrip(".") not in NOT_MESSAGES and not is_echo(candidate)


def split_reasoning(reply: Optional[str]) -> tuple[str, Optional[str]]:
    """(the answer, the reasoning or None): ``<think>`` blocks and text before a lone ``</think>``."""
    if not reply:
        return reply or "", None
    parts = [m.group(0) for m in _REASONING_BLOCK.finditer(reply)]
    answer = _REASONING_BLOCK.sub(" ", reply)
    close = None
    for close in _REASONING_CLOSE.finditer(answer):
        pass
    if close is not None:  # the server kept only the closing tag: all before it is reasoning
        parts.append(answer[: close.end()])
        answer = answer[close.end():]
    return answer.strip(), ("\n".join(p.strip() for p in parts) or None)


def strip_html(text: str) -> str:
    """The text without HTML tags (so a tag is never taken for a ``<message>``)."""
    return _HTML_TAG.sub(" ", text)


def is_refusal(reply: Optional[str]) -> bool:
    """A plain-text refusal of the task (checked only when nothing could be parsed)."""
    answer, _ = split_reasoning(reply)
    return bool(answer) and _REFUSAL.search(answer) is not None


def parse_message(reply: Optional[str], max_chars: Optional[int] = protocol.MESSAGE_MAX_CHARS) -> Optional[str]:
    """The last non-empty message inside angle brackets, trimmed; None if there is none.

    Cut to ``max_chars`` at a sentence or word boundary (``max_chars=None``: never cut; the agent
    uses that to re-ask for a shorter message first, see ``cut_message``).
    """
    answer, _ = split_reasoning(reply)
    if not answer:
        return None
    answer = strip_html(answer)
    for pattern in _MESSAGE_PATTERNS:
        candidates = [_clean_message(m.group(1)) for m in pattern.finditer(answer)]
        candidates = [c for c in candidates if _usable(c)]
        if candidates:
            return candidates[-1] if max_chars is None else cut_message(candidates[-1], max_chars)
    return None


_FINAL_BRACKETS = re.compile(r"[<＜]([^<>＜＞]*)[>＞]\s*$")


def grammar_message(reply: Optional[str]) -> Optional[str]:
    """The message of a reply the server's grammar shaped (agents/grammars.py): the text of its
    one final ``<…>``, trimmed, even where ``parse_message`` would take it for markup. The grammar
    admits no markup there (no ``/``, ``!`` or ``=``, no brackets before it), so a bare ``<em>`` is
    the model's message, not a tag; it is shown escaped, as every message. None when empty, a
    placeholder or an echo."""
    answer, _ = split_reasoning(reply)
    found = _FINAL_BRACKETS.search(answer or "")
    if found is None:
        return None
    text = _clean_message(found.group(1))
    return text if _usable(text) else None


def grammar_choice(reply: Optional[str], choices: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The choice of a reply the server's grammar shaped (agents/grammars.py): the id of the label
    of its forced last line ``I DECIDE TO CHOOSE [A]``, after which the grammar allows nothing. Its
    reasoning lines are steps towards it, whatever letters they name ("STEP 2: I decide to
    choose B …" then "I DECIDE TO CHOOSE [A]" is a choice of A, not a conflict). ``choices``:
    label -> id (None: the paper's A and B)."""
    patterns = _choice_patterns(choices)
    found = patterns.final.search(reply or "")
    return patterns.originals[found.group(1)] if found else None


_SENTENCE_END = re.compile(r"[.!?。！？…~～]+[\"'”’」)]*\s*")


def cut_message(text: str, max_chars: int) -> str:
    """``text`` if it fits, else its longest prefix ending a sentence (if at least half the limit
    is kept), else at the last space, else (Chinese has no spaces) at the last punctuation mark
    or the limit itself."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= max_chars // 2:
        return head[: ends[-1]].strip()
    if " " in head.strip() and text[max_chars: max_chars + 1] not in ("", " "):
        return head[: head.rstrip().rfind(" ")].strip()
    if text[max_chars: max_chars + 1] == " ":
        return head.strip()
    punctuation = max((head.rfind(ch) for ch in "，,；;、"), default=-1)
    if punctuation >= max_chars // 2:
        return head[: punctuation + 1].strip()
    return head.strip()


def _clean_message(text: str) -> str:
    return " ".join(text.split()).strip(_QUOTES)


def parse_choice(reply: Optional[str], choices: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The id of the choice of the last unambiguous ``I DECIDE TO CHOOSE [X]``, X a label of
    ``choices`` (label -> id; None: the paper's A and B) in any case; None if there is none."""
    answer, _ = split_reasoning(reply)
    if not answer:
        return None
    patterns = _choice_patterns(choices)
    text = unicodedata.normalize("NFKC", answer)  # full-width ［Ａ］ -> [A]
    chosen: list[str] = []
    last_end = 0
    for sentence in _CHOICE_SENTENCE.finditer(text):
        rest = text[sentence.end(): sentence.end() + 80]
        letter = patterns.chosen.match(rest)
        if letter is None:
            continue  # "I DECIDE TO CHOOSE []" echoed, or no letter
        after = rest[letter.end():]
        if patterns.echoed_alternatives.match(after):
            continue  # "[A] or [B]": the instruction, not a decision
        if patterns.both.match(after):
            return None  # "A and B": no single choice
        chosen.append(patterns.id_of(letter.group(1)))
        last_end = sentence.end() + letter.end()
    if len(set(chosen)) != 1:
        return None  # none, or conflicting decisions: re-asked, never guessed
    if _RETRACTION.search(text[last_end:]):
        return None  # stated, then taken back
    return chosen[0]


def message_problem(reply: Optional[str], max_chars: int = protocol.MESSAGE_MAX_CHARS,
                    chinese: bool = False) -> str:
    """What is wrong with a reply as a message turn, in a few words (the re-ask says it).
    ``chinese``: the message had to be Chinese."""
    answer, _ = split_reasoning(reply)
    if not answer:
        return "the reply was empty"
    found = parse_message(answer, max_chars=None)
    if found is not None and len(found) > max_chars:
        return f"the message inside <> has {len(found)} characters; the chat takes at most {max_chars}"
    if found is not None and chinese and not has_han(found):
        return "the message inside <> was not in Chinese; the chat is in Chinese"
    if found is None and is_refusal(answer):
        return "the reply refused the task instead of answering it"
    if not any(pattern.search(strip_html(answer)) for pattern in _MESSAGE_PATTERNS):
        return "it contained no message inside <>"
    # Never quote the placeholder back: a small model copies what the re-ask shows it.
    inside = [_clean_message(m.group(1)) for pattern in _MESSAGE_PATTERNS for m in pattern.finditer(strip_html(answer))]
    if any(text and not _usable(text) for text in inside):
        return "the text inside <> repeated the instructions' words instead of saying something to your associate"
    return "the text inside <> was empty or markup, not something said to your associate"


def choice_problem(reply: Optional[str], choices: Optional[Mapping[str, str]] = None) -> str:
    """What is wrong with a reply as a decision turn, in a few words (the re-ask says it);
    ``choices``: label -> id, named by their labels (None: the paper's A and B)."""
    answer, _ = split_reasoning(reply)
    if not answer:
        return "the reply was empty"
    patterns = _choice_patterns(choices)
    first, second = patterns.originals
    text = unicodedata.normalize("NFKC", answer)
    sentences = list(_CHOICE_SENTENCE.finditer(text))
    if not sentences:
        return ("the reply refused the task instead of answering it" if is_refusal(answer)
                else f"it did not end with the sentence I DECIDE TO CHOOSE [{first}] or I DECIDE TO CHOOSE [{second}]")
    letters = {patterns.id_of(m.group(1)) for s in sentences
               if (m := patterns.chosen.match(text[s.end(): s.end() + 80])) is not None}
    if not letters:
        what = "letter A or B" if patterns.originals == PAPER_CHOICES else f"choice {first} or {second}"
        return f"the sentence I DECIDE TO CHOOSE had no {what} after it"
    if len(letters) > 1:
        return f"it chose both {first} and {second}"
    return "the choice was unclear (both letters, or taken back after it was stated)"
