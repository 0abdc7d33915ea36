"""The paper's reply format as a grammar, for servers that constrain their sampler (issue 25).

The reply stays the paper's text: STEP 1 … STEP n, one line each, then a message inside ``<…>``
(message stages) or the sentence ``I DECIDE TO CHOOSE [A]`` / ``[B]`` (decision stages). Only the
server's sampler is told the shape, so a small local model cannot wander off it.

Each stage's shape is written twice, as llama.cpp's GBNF (``grammar``) and as a regular expression
(vLLM's ``structured_outputs.regex`` / ``guided_regex``); ``request_fields`` puts it where the
server takes it (``GRAMMAR_FORMATS``). Ollama's ``format`` constrains JSON only, which is not the
paper's text: Ollama is not offered a grammar (docs/agents.md).

The lengths are bounded so that a constrained reply ends inside ``max_tokens``: each reasoning
line gets a share of it (``step_chars``); a message holds 1 to min(300, the chat's limit,
max_tokens) characters.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from dataclasses import dataclass
from typing import Any, Optional

import protocol

from . import parsing

CONSTRAINED_OUTPUT_MODES = ("auto", "on", "off")
# How a server takes a grammar, in the order the model check tries them:
#   gbnf                llama.cpp (llama-server, llama-cpp-python): "grammar": GBNF text
#   structured_outputs  vLLM >= 0.10: "structured_outputs": {"regex": ...}
#   guided_regex        vLLM before: "guided_regex": ...
GRAMMAR_FORMATS = ("gbnf", "structured_outputs", "guided_regex")
MESSAGE_GRAMMAR_MAX_CHARS = 300  # the chat's limit (protocol.MESSAGE_MAX_CHARS) at most
# Characters of reasoning per token of max_tokens the lines may take together (a token of English
# is ~4 characters; half of max_tokens stays for the headings, the message or the sentence, and
# scripts that take more tokens per character).
REASONING_CHARS_PER_TOKEN = 2
MIN_STEP_CHARS, MAX_STEP_CHARS = 16, 400
# The model check's probe: a grammar no model would follow by chance.
PROBE_TEXT = "GRAMMAR-OK"


@dataclass(frozen=True)
class OutputShape:
    """What a turn's reply must look like: ``kind`` "message" or "decision", after ``steps``
    reasoning lines (the prompt's STEP 1 … n; 0 for the second message, whose prompt asks none)."""

    kind: str
    steps: int
    message_chars: int = protocol.MESSAGE_MAX_CHARS

    def step_chars(self, max_tokens: int) -> int:
        share = REASONING_CHARS_PER_TOKEN * max_tokens // (2 * max(1, self.steps or 1))
        return max(MIN_STEP_CHARS, min(MAX_STEP_CHARS, share))

    def inside_chars(self, max_tokens: int) -> int:
        """1 to 300 characters, the chat's limit, and no more than ``max_tokens`` (a message of a
        character per token must still end inside the reply limit)."""
        return max(1, min(MESSAGE_GRAMMAR_MAX_CHARS, self.message_chars, max_tokens))


# Characters a line may not hold: no brackets of the answer's form before the answer.
_INSIDE = r"\n<>＜＞"
# Inside the brackets: nothing the parser would take for HTML rather than a message (a closing
# tag "</p>", a comment "<!--", attributes "x=y").
_MESSAGE = _INSIDE + "="
# First character: no blank or quote the parser strips from a message's ends, and no "|": SmolLM2
# wants to end its reply after "<" and, its end token barred, spells "<|im_end|>", the chat
# template's stop sequence, where the server cuts the reply, message and all (llama-server: 6 of 6
# such replies then ended in a message). Banning "*_`" or curly quotes too left llama-cpp-python
# 0.3.36 no token after "<" (the reply ended there).
_FIRST = _MESSAGE + r" \t\"'/!|"


# What the parser takes for no message (agents/parsing.py): the prompt's own format example
# (prompts/_message_format.j2 shows "<The message you want to send>"), "message", "br"… Small
# models write them (under the grammar SmolLM2 ended whole rounds in "<message>" and "<br>", every
# agent alike); the grammar allows every message but these, in any case.
NOT_MESSAGES = tuple(sorted(parsing.NOT_MESSAGES))
PLACEHOLDER = "The message you want to send"
# After a complete word of NOT_MESSAGES: nothing the parser strips from a message's end (ASCII
# only: multi-byte characters in a class left llama-cpp-python 0.3.36 no token to choose).
_STRIPPED_AT_END = r". \"'*_`"


def _characters(escaped: str) -> str:
    """A character class's content as written above (``\\n``, ``\\t``, ``\\"`` escaped, as GBNF
    and regular expressions both read them) as the characters themselves."""
    return escaped.replace(r"\n", "\n").replace(r"\t", "\t").replace(r'\"', '"')


_FIRST_BARRED = _characters(_FIRST)  # for the trie: no barred word may begin with one of these

# A message is not a bare word: chat models' special tokens read "<file_sep>", "<think>",
# "<start_of_turn>", and the grammar checks a token by its text, so one special token satisfied
# "<" message ">" whole; the server leaves special tokens out of the reply's text, which then
# ended with no message (SmolLM2-135M: whole rounds of "<repo_name>"-like replies read as
# "STEP 4: To send your message in English." and nothing). A message has a character other than
# these (a space, a mark, any non-ASCII letter) within its first MAX_WORD_RUN characters.
_WORD_CHARS = string.ascii_letters + string.digits + "_"
_WORD = "A-Za-z0-9_"  # _WORD_CHARS as a character class's content
MAX_WORD_RUN = 32


def _bare(text: str) -> bool:
    return all(c in _WORD_CHARS for c in text)


def _message_rules(chars: int, gbnf_syntax: bool) -> tuple[str, list[str]]:
    """The message inside the brackets: 1 to ``chars`` characters, none of ``NOT_MESSAGES`` (in
    any case, with or without a final "." or quote), nothing beginning with ``PLACEHOLDER``, and
    not a bare word (``_WORD`` characters only; see ``MAX_WORD_RUN``). As (expression, extra GBNF
    rules): a trie of those words, a node having matched a prefix of one and leaving it by ending
    (not where a word is complete, nor on a bare word), by a character no word continues with
    (then anything, or, while the message is a bare word, anything with a mark in it), or by a
    word's next character."""
    rules: list[str] = []
    sep = " " if gbnf_syntax else ""
    marked_rules: dict[int, str] = {}  # GBNF rules of marked(done), by done

    def cls(excluded: str, count: str = "") -> str:
        return f"[^{excluded}]{count}"

    def literal(char: str) -> str:
        if char.isalpha():
            return f"[{char.lower()}{char.upper()}]"
        return f'"{char}"' if gbnf_syntax else re.escape(char)

    def alternation(alternatives: list[str]) -> str:
        return ("( " + " | ".join(alternatives) + " )") if gbnf_syntax else "(?:" + "|".join(alternatives) + ")"

    def then_anything(room: int) -> str:
        return "" if room <= 0 else sep + cls(_MESSAGE, f"{{0,{room}}}")

    def marked(done: int) -> Optional[str]:
        """The rest of a message whose first ``done`` characters are word characters: a mark
        within the next MAX_WORD_RUN - done characters, then anything; None if no room."""
        if done >= min(chars, MAX_WORD_RUN):
            return None
        alternatives = [cls(_MESSAGE + _WORD) + then_anything(chars - done - 1)]
        further = marked(done + 1)
        if further is not None:
            alternatives.append(f"[{_WORD}]" + sep + further)
        if not gbnf_syntax:
            return alternation(alternatives)
        if done not in marked_rules:
            marked_rules[done] = f"marked{done} ::= {alternation(alternatives)}"
        return f"marked{done}"

    def leave(excluded: str, done: int, bare: bool) -> list[str]:
        """Leave the trie by one character not in ``excluded``, the ``done``-th of the message."""
        if not bare:
            return [cls(excluded) + then_anything(chars - done)]
        alternatives = [cls(excluded + _WORD) + then_anything(chars - done)]
        word_chars = "".join(c for c in _WORD_CHARS if c not in _characters(excluded))
        rest = marked(done)
        if word_chars and rest is not None:
            alternatives.append(f"[{word_chars}]" + sep + rest)
        return alternatives

    def node(prefix: str) -> str:
        k = len(prefix)
        nexts = sorted({w[k] for w in NOT_MESSAGES if len(w) > k and w.startswith(prefix)
                        and (k or w[0] not in _FIRST_BARRED)})
        complete = prefix in NOT_MESSAGES
        bare = _bare(prefix)
        excluded = (_FIRST if k == 0 else _MESSAGE) + (_STRIPPED_AT_END if complete else "")
        excluded += "".join(c.lower() + c.upper() if c.isalpha() else c for c in nexts)
        alternatives = leave(excluded, k + 1, bare)
        rest = chars - k - 1
        if complete and rest >= 1:  # "message. Hi": a stripped character, then more than that,
            # but not "/" ("<br />" read by its shape was delivered as the message "br /")
            stripped = _STRIPPED_AT_END.replace("_", "") if bare else _STRIPPED_AT_END
            alternatives.append(f"[{stripped}]" + sep + cls(_MESSAGE + _STRIPPED_AT_END + "/")
                                + then_anything(rest - 1))
        for char in nexts:
            if k + 1 > chars or (k + 1 == chars and (prefix + char in NOT_MESSAGES or _bare(prefix + char))):
                continue  # no room, or it would end on a word or a bare word
            if prefix + char == PLACEHOLDER.lower():
                continue  # nothing may begin with it: barred from ending there, SmolLM2 went on
                # "<The message you want to send.1.1.2.3.4.5.6…" to the reply's limit
            alternatives.append(literal(char) + ("" if k + 1 == chars else sep + nested(prefix + char)))
        body = alternation(alternatives)
        return body if k == 0 or complete or bare else body + "?"

    def nested(prefix: str) -> str:
        if not gbnf_syntax:
            return node(prefix)
        name = f"message{len(rules) + 1}"
        rules.append("")  # reserve the name before the children take theirs
        index = len(rules) - 1
        rules[index] = f"{name} ::= {node(prefix)}"
        return name

    return node(""), rules + [marked_rules[done] for done in sorted(marked_rules)]


def _banned(shape: OutputShape) -> str:
    return _INSIDE if shape.kind == "message" else r"\n\[\]［］"


def gbnf(shape: OutputShape, max_tokens: int) -> str:
    """llama.cpp's GBNF for the shape (bounded repetitions ``{m,n}``)."""
    line = shape.step_chars(max_tokens)
    banned = _banned(shape)
    rules = [f'step ::= [^{banned}]{{1,{line}}}'] if shape.steps else []
    steps = [f'"STEP {n}: " step "\\n"' for n in range(1, shape.steps)]
    if shape.kind == "message":
        last = (f'"STEP {shape.steps}: " ' if shape.steps else "") + 'lead "<" message ">"'
        message, message_rules = _message_rules(shape.inside_chars(max_tokens), gbnf_syntax=True)
        rules += [f'lead ::= [^{banned}]{{0,{line}}}', f"message ::= {message}", *message_rules]
    else:
        last = f'"STEP {shape.steps}: " step "\\n" "I DECIDE TO CHOOSE [" [AB] "]"'
    return "\n".join([f"root ::= {' '.join(steps + [last])}", *rules])


def regex(shape: OutputShape, max_tokens: int) -> str:
    """The same shape as a regular expression (vLLM's guided decoding)."""
    line = shape.step_chars(max_tokens)
    banned = _banned(shape)
    steps = "".join(f"STEP {n}: [^{banned}]{{1,{line}}}\\n" for n in range(1, shape.steps))
    if shape.kind == "message":
        head = f"STEP {shape.steps}: " if shape.steps else ""
        message, _ = _message_rules(shape.inside_chars(max_tokens), gbnf_syntax=False)
        return steps + head + f"[^{banned}]{{0,{line}}}<{message}>"
    return steps + f"STEP {shape.steps}: [^{banned}]{{1,{line}}}\\nI DECIDE TO CHOOSE \\[[AB]\\]"


def request_fields(grammar_format: str, shape: OutputShape, max_tokens: int) -> dict[str, Any]:
    """The request body's extra fields (the OpenAI SDK's ``extra_body``) for the server's format."""
    if grammar_format == "gbnf":
        return {"grammar": gbnf(shape, max_tokens)}
    if grammar_format == "structured_outputs":
        return {"structured_outputs": {"regex": regex(shape, max_tokens)}}
    if grammar_format == "guided_regex":
        return {"guided_regex": regex(shape, max_tokens)}
    raise ValueError(f"grammar format must be one of {GRAMMAR_FORMATS}, not {grammar_format!r}")


def probe_fields(grammar_format: str) -> dict[str, Any]:
    """A grammar that allows one reply only (``PROBE_TEXT``): a server that obeys it takes grammars."""
    if grammar_format == "gbnf":
        return {"grammar": f'root ::= "{PROBE_TEXT}"'}
    if grammar_format == "structured_outputs":
        return {"structured_outputs": {"regex": re.escape(PROBE_TEXT)}}
    if grammar_format == "guided_regex":
        return {"guided_regex": re.escape(PROBE_TEXT)}
    raise ValueError(f"grammar format must be one of {GRAMMAR_FORMATS}, not {grammar_format!r}")


def describe(grammar_format: Optional[str], shape: Optional[OutputShape], max_tokens: int) -> str:
    """The grammar a call carried, as it goes on the call's record: the shape and a hash of the
    fields sent (``request_fields`` rebuilds them; the text itself would add kilobytes per row),
    e.g. ``decision steps=5 chars=300 sha256=1f2e…``; "" when none was sent."""
    if not grammar_format or shape is None:
        return ""
    fields = json.dumps(request_fields(grammar_format, shape, max_tokens), ensure_ascii=False, sort_keys=True)
    return (f"{shape.kind} steps={shape.steps} chars={shape.inside_chars(max_tokens)} "
            f"sha256={hashlib.sha256(fields.encode()).hexdigest()[:12]}")
