"""Which choice a chat message proposes, read as a person would: ``proposed_choice(text)``.

The dashboard's agreement proxy (lab/experimenter/dashboard.py) needs, for each message, "does it propose
option A?". A letter is not enough: "Let us both pick B, a safe deal" names B (the article "a"
is not option A), "not A, B!" rejects A, "我选B，不合作" refuses to cooperate. The reading, in
English and Chinese, and in German (a language the lab ships; "nimm nicht B", "aber", "70 für jeden"):

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

The choices and numbers are the session's (``ChatReading``, ``session_reading``): its choices'
labels as participants write them (a one-letter label reads as above; a longer one, "Stag", as a
word), the cooperative choice (the cooperate/betray words name it and the other; none without
one), and its points ("70 each" is mutual cooperation's; a clause naming fewer points weighs a bad
outcome). ``PAPER`` is the paper's.

It is a proxy: tests/test_proposals.py holds the table of messages it is checked against.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

import protocol


@dataclass(frozen=True)
class ChatReading:
    """What a session's messages are read by (hashable: the reading's patterns are built once)."""
    labels: tuple[tuple[str, str], ...]  # (a choice's label in one of the session's languages, its id)
    cooperative: str | None  # the choice cooperate/合作 names; None: those words name none
    mutual_points: str | None  # the cooperative choice's points when both make it ("70 each")
    low_points: tuple[str, ...]  # points below that (a clause naming them weighs a bad outcome)

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(choice for _, choice in self.labels))


def _points(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def chat_reading(labels: dict[str, list[str]], payoffs, cooperative: str | None) -> ChatReading:
    """``labels``: choice id -> its labels (one per language); ``payoffs``: (own, other) -> (own
    points, other's points), as protocol.PAYOFFS."""
    mutual = payoffs[(cooperative, cooperative)][0] if cooperative else None
    low = sorted({_points(points) for pair in payoffs.values() for points in pair
                  if mutual is not None and points < mutual and points != 0}, key=len, reverse=True)
    return ChatReading(tuple((label, choice) for choice, names in labels.items() for label in dict.fromkeys(names)),
                       cooperative, None if mutual is None else _points(mutual), tuple(low))


PAPER = chat_reading({choice: [choice] for choice in protocol.CHOICES}, protocol.PAYOFFS, protocol.COOPERATE)


def session_reading(session) -> ChatReading:
    """The reading of a session's chat, from its frozen game and experiment (its choices' labels in
    every language the experiment offers)."""
    from lab.base.session_game import frozen_experiment, session_game

    game, experiment = session_game(session), frozen_experiment(session)
    labels = {choice: [experiment.choice_label(choice, language) for language in experiment.design.languages]
              for choice in game.choices}
    return chat_reading(labels, game.payoffs, game.cooperative_choice)


_TAG = re.compile(r"</?[A-Za-z][^<>]{0,40}>")
_CLAUSE_SPLIT = re.compile(r"[,.!?;:\n…~，。！？；：、～]+")
_CONTRAST = re.compile(r"\bbut\b|\bhowever\b|但是|但|不过|可是|然而|\baber\b|\bjedoch\b|\bsondern\b", re.IGNORECASE)
_OR_WORD = re.compile(r"\bor\b|还是|或者|或|\boder\b", re.IGNORECASE)

# Words after which an "A"/"a" is the option, not the article ("A for both", "go a then").
_AFTER_OPTION = frozenset("""
    for is it it's its and or too again then this now please with both each every so all from we you i me us
    gives gets works would will pays because since if ok okay yeah yes sounds seems as instead only always
    tho though vs versus
    für ist und oder auch nochmal dann jetzt bitte mit beide jeder wir ich du uns gibt bringt zahlt weil wenn ja
    klingt statt nur immer
""".split())
_ACCENTED = "À-ÖØ-öø-ÿ"  # Latin letters beyond A-Z (ä, ö, ü, ß, é, ...)
_WORD_AFTER = re.compile(rf"\s*([A-Za-z{_ACCENTED}']+)")
_NOT_OPTIONS = re.compile(r"\bplan\s+b\b|\bb/c\b", re.IGNORECASE)  # "plan B", "b/c" (because)
_COOPERATE_WORDS = r"cooperat\w*|\bwin[- ]?win\b|合作|双赢|共赢|kooperier\w*|zusammen ?arbeit\w*"
_BETRAY_WORDS = r"\bbetray\w*|\bdefect\w*|背叛|出卖|\bverr[aä]t\w*|\bbetr[uü]g\w*|\bhintergeh\w*"


@dataclass(frozen=True)
class _Patterns:
    letters: re.Pattern | None  # a pair of one-letter labels ("A/A", "AA", "A-A", "A&B") or one alone
    words: re.Pattern | None  # a longer label, as a word
    by_label: dict
    cooperate: re.Pattern | None
    betray: re.Pattern | None
    weighs: re.Pattern


@functools.lru_cache(maxsize=64)
def _patterns(reading: ChatReading) -> _Patterns:
    by_label = {label.upper(): choice for label, choice in reading.labels}
    letters = "".join(sorted({label.upper() for label, _ in reading.labels if len(label) == 1 and label.isalpha()}))
    words = sorted({label for label, _ in reading.labels if not (len(label) == 1 and label.isalpha())}, key=len,
                   reverse=True)
    # a letter inside a word is none (Latin letters with accents too: German "Büro" names no B)
    letter_pattern = (re.compile(rf"(?<![A-Za-z0-9{_ACCENTED}])([{letters}{letters.lower()}])(?:\s*[/&-]\s*|)"
                                 rf"([{letters}])?(?![A-Za-z0-9'’{_ACCENTED}])") if letters else None)
    word_pattern = (re.compile(r"(?<![\w])(" + "|".join(map(re.escape, words)) + r")(?![\w])", re.IGNORECASE)
                    if words else None)
    cooperate = betray = None
    if reading.cooperative is not None:
        mutual = re.escape(reading.mutual_points)
        cooperate = re.compile(
            _COOPERATE_WORDS + rf"|\b{mutual} each\b|\beach (?:get|take|make|earn)s? {mutual}\b"
            rf"|\bboth (?:get|take|make|earn) {mutual}\b|各拿\s*{mutual}|都拿\s*{mutual}|各得\s*{mutual}|各\s*{mutual}"
            rf"|\b{mutual} für jeden\b|\bjeder (?:kriegt|bekommt|hat) {mutual}\b|\bbeide {mutual}\b|\bje(?:weils)? {mutual}\b",
            re.IGNORECASE)
        betray = re.compile(_BETRAY_WORDS, re.IGNORECASE) if len(reading.choices) == 2 else None
    low = (r"|(?<!\d)(?:" + "|".join(map(re.escape, reading.low_points)) + r")(?!\d)") if reading.low_points else ""
    weighs = re.compile(r"\bonly get\w*|\bworse\b|只有|只能|吃亏|太亏|亏了|亏大|损失|\bschlechter\b|\bverlier\w*|\bverlust\w*"
                        + low, re.IGNORECASE)
    return _Patterns(letter_pattern, word_pattern, by_label, cooperate, betray, weighs)


# Negation before a mention: English within 4 words, Chinese within 3 characters.
_EN_NEGATION = re.compile(
    r"\b(?:not|don't|dont|do not|won't|wont|will not|never|no|shouldn't|shouldnt|can't|cant|cannot|"
    r"didn't|isn't|avoid|stop)\b((?:\s+[A-Za-z']+){0,4}?)\s*$", re.IGNORECASE)
_EN_NOT_NEGATION = re.compile(
    r"\bwhy (?:not|don't|dont)\b|\bnot (?:gonna|going to) lie\b|\bno (?:worries|problem|doubt|matter)\b"
    r"|\bnot only\b", re.IGNORECASE)
_ZH_NEGATION = re.compile(r"(?:不|别|没|莫|勿)[\u3400-\u9fff]{0,3}$")
_ZH_NOT_NEGATION = re.compile(r"不管|不论|不如|要不|何不|为什么不|为啥不|不妨|不错|不过|无论")
# German: the negation before the mention within 4 words ("nimm bloß nicht B"); one after it ("B nehme ich
# nicht") is not read.
_DE_NEGATION = re.compile(r"\b(?:nicht|nich|kein|keine|keinen|nie|niemals)\b((?:\s+[\w']+){0,4}?)\s*$", re.IGNORECASE)
_DE_NOT_NEGATION = re.compile(r"\b(?:warum|wieso) nicht\b|\bnicht nur\b|\bkein problem\b|\bkeine sorge\b",
                              re.IGNORECASE)
# A clause that tells the past names a choice without proposing it (one that weighs a bad outcome:
# ``_Patterns.weighs``).
_PAST = re.compile(r"\blast (?:round|time)\b|上一轮|上轮|上次|上一局|上局|\bletzte[nmrs]? (?:runde|mal)\b"
                   r"|\bvorige[nmrs]? runde\b", re.IGNORECASE)

def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").replace("🅰", "A").replace("🅱", "B")
    text = text.replace("’", "'")
    return _NOT_OPTIONS.sub(" ", _TAG.sub(" ", text))


def _letter_is_option(clause: str, start: int, end: int, letter: str) -> bool:
    """An "A"/"a" is the option unless it reads as the article (a noun follows it, and it is
    lowercase or begins the clause)."""
    if letter not in "Aa":
        return True
    follows = _WORD_AFTER.match(clause, end)
    if follows is None or follows.group(1).lower() in _AFTER_OPTION:
        return True  # nothing (or a function word) follows: "pick a!", "A for both"
    if letter == "a":
        return False  # "a safe deal", "what a day"
    return bool(clause[:start].strip())  # mid-sentence capital "A" is the option, initial one the article


def _negated(before: str) -> bool:
    if (_EN_NOT_NEGATION.search(before[-30:]) or _ZH_NOT_NEGATION.search(before[-6:])
            or _DE_NOT_NEGATION.search(before[-30:])):
        return False
    return bool(_EN_NEGATION.search(before) or _ZH_NEGATION.search(before) or _DE_NEGATION.search(before))


def _mentions(clause: str, reading: ChatReading, patterns: _Patterns) -> list[tuple[str, bool]]:
    """(choice, negated) for each mention of the clause, in order."""
    found: list[tuple[int, str, bool]] = []
    if patterns.letters is not None:
        for match in patterns.letters.finditer(clause):
            first, second = match.group(1), match.group(2)
            if not second and not _letter_is_option(clause, match.start(1), match.end(1), first):
                continue
            negated = _negated(clause[:match.start()])
            for letter in filter(None, (first, second)):
                found.append((match.start(), patterns.by_label[letter.upper()], negated))
    if patterns.words is not None:
        for match in patterns.words.finditer(clause):
            found.append((match.start(), patterns.by_label[match.group(1).upper()], _negated(clause[:match.start()])))
    if patterns.cooperate is not None:
        other = next((c for c in reading.choices if c != reading.cooperative), None)
        for pattern, choice in ((patterns.cooperate, reading.cooperative), (patterns.betray, other)):
            for match in (pattern.finditer(clause) if pattern is not None and choice else ()):
                found.append((match.start(), choice, _negated(clause[:match.start()])))
    return [(choice, negated) for _, choice, negated in sorted(found)]


def _read(text: str, reading: ChatReading, patterns: _Patterns) -> tuple[set, set]:
    """Choices named positively and choices rejected, over the clauses of ``text``."""
    positive, rejected = set(), set()
    for clause in _CLAUSE_SPLIT.split(text):
        mentions = _mentions(clause, reading, patterns)
        if not mentions or patterns.weighs.search(clause) or _PAST.search(clause):
            continue
        if _OR_WORD.search(clause) and len({choice for choice, _ in mentions}) > 1:
            continue  # "A or B?", 选A还是B: a question, not a proposal
        for choice, negated in mentions:
            (rejected if negated else positive).add(choice)
    return positive, rejected


@functools.lru_cache(maxsize=1 << 14)  # the dashboard reads every message again at each poll
def proposed_choice(text: str | None, reading: ChatReading = PAPER) -> str | None:
    """The choice (its id) one chat message proposes, or None (no proposal, or an ambiguous one)."""
    patterns = _patterns(reading)
    text = _normalise(text or "")
    parts = _CONTRAST.split(text)
    for part in ([parts[-1]] if len(parts) > 1 else []) + [text]:
        positive, rejected = _read(part, reading, patterns)
        if len(positive) == 1:
            return next(iter(positive))
        if positive:
            return None  # both named: ambiguous
        if len(rejected) == 1 and len(reading.choices) == 2:
            return next(c for c in reading.choices if c not in rejected)  # "don't pick B"
    return None


def proposes_cooperation(text: str | None, reading: ChatReading = PAPER) -> bool:
    """The message proposes the reading's cooperative choice (the paper's: A; none: never)."""
    return reading.cooperative is not None and proposed_choice(text, reading) == reading.cooperative
