"""What annotators write, read as labels: strategies, agreement, motive ratings (SI Note 2).

In the study's languages (Chinese, English) and German. A value none of these spellings reads is UNREADABLE: the
loader lists it as a problem with its file and row, and reads it as missing (not as
"unclear", which is a label).
"""

from __future__ import annotations

TRUE_WORDS, FALSE_WORDS = {"true", "1", "yes", "y", "t"}, {"false", "0", "no", "n", "f"}
AGREEMENT_TRUE = TRUE_WORDS | {"1.0", "agreed", "agree", "agreement", "mutual a", "a/a", "是", "对", "有", "同意",
                               "达成", "达成一致", "已达成", "一致", "√", "✓", "✔", "ja", "j", "einig",
                               "einigung", "geeinigt"}
AGREEMENT_FALSE = FALSE_WORDS | {"0.0", "no agreement", "not agreed", "disagree", "none", "否", "不", "不是", "无",
                                 "没有", "未达成", "没有达成", "不同意", "不一致", "×", "✗", "✘", "nein",
                                 "keine einigung", "nicht geeinigt", "uneinig"}
UNCLEAR_WORDS = {"", "unclear", "?", "？", "-", "—", "n/a", "na", "none", "不清楚", "不确定", "不明确", "无法判断",
                 "未知", "不明", "unklar", "unbekannt"}
STRATEGY_NOISE = ("STRATEGY", "STRATEGIE", "策略", "选择", "选", "CHOOSE", "OPTION", " ", "\u3000", '"', "'", "“", "”")
UNREADABLE = "\x00unreadable"  # a value that is no label: read as missing


def parse_strategy(value: object) -> str:
    """'A', 'B', '' (unclear) or UNREADABLE, from what an annotator wrote: a, B, 策略A, Strategy B…"""
    text = str(value).strip()
    if text.lower() in UNCLEAR_WORDS:
        return ""
    letter = text.upper()
    for noise in STRATEGY_NOISE:
        letter = letter.replace(noise, "")
    letter = letter.replace("Ａ", "A").replace("Ｂ", "B")  # full-width letters of a Chinese keyboard
    return letter if letter in ("A", "B") else UNREADABLE


def parse_agreement(value: object) -> str:
    """'True', 'False', '' (not filled) or UNREADABLE: 是/否, yes/no, 1/0, agreed, 1.0, TRUE…"""
    text = str(value).strip().lower()
    if text == "":
        return ""
    if text in AGREEMENT_TRUE:
        return "True"
    if text in AGREEMENT_FALSE:
        return "False"
    return UNREADABLE


def parse_motive(value: object) -> str:
    """A motive rating (SI Note 2: a whole number from −3 to 3) as text, '' when not filled, else
    UNREADABLE: 'high', 1.5 and 5 are no ratings. 2.0, +2 and −2 (a typographic minus) are."""
    text = str(value).strip().replace("−", "-").replace("＋", "+").replace("－", "-")
    try:
        number = float(text) if text else None
    except ValueError:
        return UNREADABLE
    return "" if number is None else str(int(number)) if number.is_integer() and abs(number) <= 3 else UNREADABLE
