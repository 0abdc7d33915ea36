"""The agent's output as the breach annotators see it (SI Note 2's second task): blind.

The annotators rate the reasoning of an agent that broke its promise (coherent, free of errors,
four motives), so they see the agent's own text — its payoff reasoning and its decision — but
not which persona it was given: every statement of the persona ("As a selfish person, …",
"Remember that I am a FAIR-MINDED human") is cut, as the conversation template hides the
treatment. A leading "As a fair-minded human," is cut and the sentence kept; a sentence that
states the persona otherwise is replaced by "[…]". Hidden reasoning (``<think>…</think>``, which
restates the system prompt) is cut whole. What the agent reasons about payoffs and motives stays,
even where it echoes the persona's wording ("I only care about my own payoff"): that is what the
motives are rated on.
"""

from __future__ import annotations

import re

REMOVED = "[…]"
# The personas' words: the prompts' names (prompts/roleplay_*.j2) and what models call them.
_PERSONA_ADJECTIVES = (r"(?:cooperative|fair|fair-minded|selfish|individualistic|individualist|self-interested|"
                       r"prosocial|pro-social|altruistic|egoistic|egoist|competitive|generous|greedy)")
_IDENTITY_NOUNS = r"(?:human|person|player|individual|agent|type|character|personality|being)"
_ZH_PERSONA = r"(?:合作|公平|个人主义|自私|利己|利他)"
# "As a fair-minded human," / "Being an individualistic person and" at the start of a sentence.
_LEADING_CLAUSE = re.compile(
    rf"^(?:so\s+|and\s+|but\s+)?(?:as|being)\s+(?:a|an|someone)\s+(?:[\w-]+\s+){{0,2}}?{_PERSONA_ADJECTIVES}\b"
    r"[^,;:，、]*[,;:，、]\s*", re.IGNORECASE)
_ZH_LEADING_CLAUSE = re.compile(rf"^(?:作为|身为)(?:一个|一名|一位)?[^，,。]{{0,10}}?{_ZH_PERSONA}[^，,。]{{0,6}}[，,]\s*")
_PERSONA_STATEMENT = re.compile("|".join([
    r"\b(?:fair-minded|individualistic|individualist)\b",  # only ever the persona's name
    r"(?-i:\b(?:COOPERATIVE|FAIR|SELFISH)\b)",  # the prompts shout the name
    rf"\b(?:i am|i'm|i’m|im|you are|you're|you’re|as|being|be|am)\s+(?:a|an|someone)\s+(?:[\w-]+\s+){{0,2}}?"
    rf"{_PERSONA_ADJECTIVES}\s+{_IDENTITY_NOUNS}\b",
    r"\bmy\s+(?:persona|role|character|personality)\b",
    r"\b(?:persona|role-?play(?:ing)?)\b",
    rf"(?:作为|身为|我是)(?:一个|一名|一位)?[^，,。！!？?]{{0,10}}?{_ZH_PERSONA}",
]), re.IGNORECASE)
_HIDDEN_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|$)", re.IGNORECASE | re.DOTALL)
_LINE_PREFIX = re.compile(r"^((?:\s*(?:STEP\s*\d+\s*[:：.]|\[[^\]\n]{1,30}\])\s*)+)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"((?<=[.!?])\s+|(?<=[。！？])\s*)")  # not inside 0.5; kept by split


def _blind_sentence(sentence: str) -> str:
    for clause in (_LEADING_CLAUSE, _ZH_LEADING_CLAUSE):
        cut = clause.sub("", sentence, count=1)
        if cut != sentence and cut.strip():
            sentence = cut[0].upper() + cut[1:]
    return REMOVED if _PERSONA_STATEMENT.search(sentence) else sentence


def _blind_line(line: str) -> str:
    prefix_match = _LINE_PREFIX.match(line)
    prefix = prefix_match.group(1) if prefix_match else ""
    pieces = _SENTENCE_END.split(line[len(prefix):])  # sentence, its separator, sentence, …
    blinded: list[str] = []
    for sentence, separator in zip(pieces[::2], pieces[1::2] + [""]):
        if not sentence.strip():
            continue
        sentence = _blind_sentence(sentence)
        if sentence == REMOVED and blinded and blinded[-1].strip() == REMOVED:
            continue
        blinded.append(sentence + (separator or (" " if sentence == REMOVED else "")))
    return (prefix + "".join(blinded)).rstrip()


def without_persona(text: str) -> str:
    """``text`` with its hidden reasoning and every statement of the persona cut."""
    text = _HIDDEN_REASONING.sub("", text or "")
    return "\n".join(_blind_line(line) if line.strip() else line for line in text.strip().splitlines())
