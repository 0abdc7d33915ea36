"""Which choice a chat message proposes, read as a person would: ``proposed_choice(text)``.

The dashboard's agreement proxy (lab/experimenter/dashboard.py) needs, for each message, "does it propose
option A?". A letter is not enough: "Let us both pick B, a safe deal" names B (the article "a"
is not option A), "not A, B!" rejects A, "我选B，不合作" refuses to cooperate. The reading, in
English and Chinese:

1. Markup-looking tags are dropped ("<b>" is not option B), full-width letters made plain.
2. The message is cut into clauses at punctuation; after a "but" (但/不过/可是) the later part
   decides when it names a choice.
3. In each clause, a *mention* is an option letter (A, B, "A/A", "AA"; a lowercase "a" or a
   sentence-initial "A" followed by a noun is the article), or a word that stands for one
   (cooperate/合作/win-win/双赢/"70 each" for A; betray/defect/背叛 for B).
4. A mention is *negated* by a nearby "not/don't/won't/never/no" or 不/别/不要/没 before it
   ("why not A", 不如, 要不, 不管 are not negations); it is *ignored* in a clause that weighs a
   bad outcome ("both B only gets us 40", 都选B只有40, 亏) or tells the past (last round, 上轮),
   and in a clause that asks "A or B" (还是, 或者).
5. One option named positively is the proposal; both named positively is no proposal
   (ambiguous); none named but one rejected ("don't pick B") proposes the other.

It is a proxy: tests/test_proposals.py holds the table of messages it is checked against.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import protocol

A, B = protocol.COOPERATE, protocol.DEFECT
OTHER = {A: B, B: A}

_TAG = re.compile(r"</?[A-Za-z][^<>]{0,40}>")
_CLAUSE_SPLIT = re.compile(r"[,.!?;:\n…~，。！？；：、～]+")
_CONTRAST = re.compile(r"\bbut\b|\bhowever\b|但是|但|不过|可是|然而", re.IGNORECASE)
_OR_WORD = re.compile(r"\bor\b|还是|或者|或", re.IGNORECASE)

# A pair of letters ("A/A", "AA", "A-A", "A&B") or one letter standing alone (not inside a word).
_LETTERS = re.compile(r"(?<![A-Za-z0-9])([AaBb])(?:\s*[/&-]\s*|)([AB])?(?![A-Za-z0-9'’])")
# Words after which an "A"/"a" is the option, not the article ("A for both", "go a then").
_AFTER_OPTION = frozenset("""
    for is it it's its and or too again then this now please with both each every so all from we you i me us
    gives gets works would will pays because since if ok okay yeah yes sounds seems as instead only always
    tho though vs versus
""".split())
_WORD_AFTER = re.compile(r"\s*([A-Za-z']+)")
_NOT_OPTIONS = re.compile(r"\bplan\s+b\b|\bb/c\b", re.IGNORECASE)  # "plan B", "b/c" (because)

_A_WORDS = re.compile(
    r"cooperat\w*|\bwin[- ]?win\b|\b70 each\b|\beach (?:get|take|make|earn)s? 70\b|\bboth (?:get|take|make|earn) 70\b"
    r"|合作|双赢|共赢|各拿\s*70|都拿\s*70|各得\s*70|各\s*70", re.IGNORECASE)
_B_WORDS = re.compile(r"\bbetray\w*|\bdefect\w*|背叛|出卖", re.IGNORECASE)

# Negation before a mention: English within 4 words, Chinese within 3 characters.
_EN_NEGATION = re.compile(
    r"\b(?:not|don't|dont|do not|won't|wont|will not|never|no|shouldn't|shouldnt|can't|cant|cannot|"
    r"didn't|isn't|avoid|stop)\b((?:\s+[A-Za-z']+){0,4}?)\s*$", re.IGNORECASE)
_EN_NOT_NEGATION = re.compile(
    r"\bwhy (?:not|don't|dont)\b|\bnot (?:gonna|going to) lie\b|\bno (?:worries|problem|doubt|matter)\b"
    r"|\bnot only\b", re.IGNORECASE)
_ZH_NEGATION = re.compile(r"(?:不|别|没|莫|勿)[\u3400-\u9fff]{0,3}$")
_ZH_NOT_NEGATION = re.compile(r"不管|不论|不如|要不|何不|为什么不|为啥不|不妨|不错|不过|无论")

# A clause that weighs a bad outcome or tells the past names a choice without proposing it.
_LOW_POINTS = sorted({str(points) for pair in protocol.PAYOFFS.values() for points in pair
                      if points < protocol.PAYOFFS[(A, A)][0] and points != 0}, key=len, reverse=True)
_WEIGHS = re.compile(
    r"(?<!\d)(?:" + "|".join(_LOW_POINTS) + r")(?!\d)|\bonly get\w*|\bworse\b"
    r"|只有|只能|吃亏|太亏|亏了|亏大|损失", re.IGNORECASE)
_PAST = re.compile(r"\blast (?:round|time)\b|上一轮|上轮|上次|上一局|上局", re.IGNORECASE)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").replace("🅰", "A").replace("🅱", "B")
    text = text.replace("’", "'")
    return _NOT_OPTIONS.sub(" ", _TAG.sub(" ", text))


def _letter_is_option(clause: str, start: int, end: int, letter: str) -> bool:
    """An "A"/"a" is option A unless it reads as the article (a noun follows it, and it is
    lowercase or begins the clause)."""
    if letter in "Bb":
        return True
    follows = _WORD_AFTER.match(clause, end)
    if follows is None or follows.group(1).lower() in _AFTER_OPTION:
        return True  # nothing (or a function word) follows: "pick a!", "A for both"
    if letter == "a":
        return False  # "a safe deal", "what a day"
    return bool(clause[:start].strip())  # mid-sentence capital "A" is the option, initial one the article


def _negated(before: str) -> bool:
    if _EN_NOT_NEGATION.search(before[-30:]) or _ZH_NOT_NEGATION.search(before[-6:]):
        return False
    return bool(_EN_NEGATION.search(before) or _ZH_NEGATION.search(before))


def _mentions(clause: str) -> list[tuple[str, bool]]:
    """(option, negated) for each mention of the clause, in order."""
    found: list[tuple[int, str, bool]] = []
    for match in _LETTERS.finditer(clause):
        first, second = match.group(1), match.group(2)
        if not second and not _letter_is_option(clause, match.start(1), match.end(1), first):
            continue
        negated = _negated(clause[:match.start()])
        for letter in filter(None, (first, second)):
            found.append((match.start(), letter.upper(), negated))
    for pattern, option in ((_A_WORDS, A), (_B_WORDS, B)):
        for match in pattern.finditer(clause):
            found.append((match.start(), option, _negated(clause[:match.start()])))
    return [(option, negated) for _, option, negated in sorted(found)]


def _read(text: str) -> tuple[set, set]:
    """Options named positively and options rejected, over the clauses of ``text``."""
    positive, rejected = set(), set()
    for clause in _CLAUSE_SPLIT.split(text):
        mentions = _mentions(clause)
        if not mentions or _WEIGHS.search(clause) or _PAST.search(clause):
            continue
        if _OR_WORD.search(clause) and {option for option, _ in mentions} == {A, B}:
            continue  # "A or B?", 选A还是B: a question, not a proposal
        for option, negated in mentions:
            (rejected if negated else positive).add(option)
    return positive, rejected


@functools.lru_cache(maxsize=1 << 14)  # the dashboard reads every message again at each poll
def proposed_choice(text: str | None) -> str | None:
    """"A", "B", or None (no proposal, or an ambiguous one) for one chat message."""
    text = _normalise(text or "")
    parts = _CONTRAST.split(text)
    for part in ([parts[-1]] if len(parts) > 1 else []) + [text]:
        positive, rejected = _read(part)
        if len(positive) == 1:
            return next(iter(positive))
        if positive:
            return None  # both named: ambiguous
        if len(rejected) == 1:
            return OTHER[next(iter(rejected))]  # "don't pick B"
    return None


def proposes_a(text: str | None) -> bool:
    return proposed_choice(text) == A
