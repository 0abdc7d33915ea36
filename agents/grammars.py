"""The paper's reply format as a grammar, for servers that constrain their sampler.

The reply stays the paper's text: STEP 1 … STEP n, one line each, then a message inside ``<…>``
(message stages) or the sentence ``I DECIDE TO CHOOSE [A]`` / ``[B]`` (decision stages; the choices
as the prompts name them, ``OutputShape.choices``). Only the
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

import functools
import hashlib
import itertools
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
    chinese: bool = False  # the message opens with a Han character (a zh agent's llm_chinese_messages)
    # a decision's choices as the prompts name them (their labels in the session's language; the paper's A and B)
    choices: tuple[str, ...] = ("A", "B")

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
# The prompt's format echoed (parsing.ECHO_OPENINGS), by their words: nothing may open with one,
# in any case, its words apart (one space) or run together, unless its last word goes on as a
# plural or past and the message goes on after it ("Messages are…"; "The messages" alone is barred). NOT_MESSAGES' words that open with an echo are barred with it.
ECHOES = tuple(tuple(opening.split()) for opening in parsing.ECHO_OPENINGS)
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
    any case, with or without a final "." or quote), nothing opening with one of ``ECHOES`` (in
    any case, a space or none between its words, unless its last word goes on as a plural or past
    and the message after it),
    and not a bare word (``_WORD`` characters only; see ``MAX_WORD_RUN``). As (expression, extra
    GBNF rules): a trie of those words, keyed by what was matched without the spaces; a node
    having matched a prefix of one is left by ending (not where a word is complete, nor on a bare
    word), by a character no word continues with (then anything, or, while the message is a bare
    word, anything with a mark in it), by a word's next character, or where an echo's word ends,
    by a space and then any of those; a complete echo, only by the "s" or "d" of a plural or a
    past (``parsing.ECHO_WORD_ENDINGS``) that ends the word there, and more. Inside the
    trie the rest of the message is bounded as if the deepest node had been reached, so that
    nodes alike share one GBNF rule (the echoes' articles share what follows them)."""
    echoes = {"".join(words) for words in ECHOES}
    exact = tuple(w for w in NOT_MESSAGES if not parsing.is_echo(w))
    by_prefix: dict[str, list[str]] = {}  # prefix -> the next characters of the words it begins
    for word in exact + tuple(sorted(echoes)):
        for k in range(len(word)):
            by_prefix.setdefault(word[:k], []).append(word[k])
    spaces: set[str] = set()  # the prefixes after which an echo's next word may follow a space
    for words in ECHOES:
        spaces.update(itertools.accumulate(words[:-1]))
    deepest = max(len(w) for w in exact + tuple(echoes)) + max(len(words) - 1 for words in ECHOES)
    rules: list[str] = []
    named: dict[str, str] = {}  # rule body -> its name
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
        within its first MAX_WORD_RUN characters, then anything, bounded as if the word characters
        before the mark had taken all their room; None if there is none."""
        words = min(chars, MAX_WORD_RUN) - done - 1
        if words < 0:
            return None
        rest = f"[{_WORD}]{{0,{words}}}" + sep + cls(_MESSAGE + _WORD) + then_anything(chars - done - words - 1)
        if not gbnf_syntax:
            return f"(?:{rest})"
        if done not in marked_rules:
            marked_rules[done] = f"marked{done} ::= {rest}"
        return f"marked{done}"

    def leave(excluded: str, done: int, bare: bool) -> list[str]:
        """Leave the trie by one character not in ``excluded``, the ``done``-th of the message."""
        if not bare:
            return [cls(excluded) + then_anything(chars - done)]
        alternatives = [cls(excluded + _WORD) + then_anything(chars - done)]
        word_chars = "".join(c for c in _WORD_CHARS if c not in _characters(excluded))
        rest = marked(min(done, MAX_WORD_RUN // 2))
        if word_chars and rest is not None:
            alternatives.append(f"[{word_chars}]" + sep + rest)
        return alternatives

    def node(prefix: str, spaced: bool) -> Optional[str]:
        """The rule of a node (``spaced``: a space was taken on the way, so the message is no
        bare word): "" where the message can only end, None where it cannot pass."""
        k = len(prefix)
        # How far into the message the node may be (its spaces included), as far as the bounds
        # go: as deep as the deepest node, unless the messages are too short to spare that.
        spaces_taken = sum(1 for start in spaces if len(start) < k and prefix.startswith(start))
        done = 0 if k == 0 else deepest if chars >= 2 * deepest else k + spaces_taken
        bare = _bare(prefix) and not spaced
        if done + 1 > chars or (prefix in exact and done + 2 > chars):  # no room to go on
            return "" if k and prefix not in echoes and prefix not in exact and not bare else None
        nexts = sorted({c for c in by_prefix.get(prefix, ()) if k or c not in _FIRST_BARRED})
        if prefix in echoes:  # its last word ends as a plural or a past and the message goes on
            if done + 2 > chars:  # ("messages are…"), or it is barred: "The messages" alone is an echo
                return None
            after = cls(_MESSAGE + (_WORD if bare else "A-Za-z")) + then_anything(chars - done - 2)
            return f"[{parsing.ECHO_WORD_ENDINGS}]" + sep + f"({sep}{after}{sep})"
        complete = prefix in exact

        def goes_on(after_space: bool) -> list[str]:
            found = []
            for char in nexts:
                child = nested(prefix + char, after_space)
                if child is not None:
                    found.append(literal(char) + (sep + child if child else ""))
            return found

        letters = "".join(c.lower() + c.upper() if c.isalpha() else c for c in nexts)
        excluded = (_FIRST if k == 0 else _MESSAGE) + (_STRIPPED_AT_END if complete else "") + letters
        alternatives = leave(excluded + (" " if prefix in spaces else ""), done + 1, bare)
        if complete:  # "br. Hi": a stripped character, then more than that,
            # but not "/" ("<br />" read by its shape was delivered as the message "br /")
            stripped = _STRIPPED_AT_END.replace("_", "") if bare else _STRIPPED_AT_END
            alternatives.append(f"[{stripped}]" + sep + cls(_MESSAGE + _STRIPPED_AT_END + "/")
                                + then_anything(chars - done - 2))
        if prefix in spaces:  # after a space: the next word, anything else, or the end
            space = '" "' if gbnf_syntax else " "
            anything_else = cls(_MESSAGE + letters) + then_anything(chars - done - 2)
            alternatives.append(space + sep + alternation(goes_on(True) + [anything_else]) + "?")
        alternatives += goes_on(spaced)
        body = alternation(alternatives)
        return body if k == 0 or complete or bare else body + "?"

    bodies: dict[tuple, Optional[str]] = {}

    def nested(prefix: str, spaced: bool) -> Optional[str]:
        if (prefix, spaced) not in bodies:  # reached with and without a space: computed once
            bodies[prefix, spaced] = node(prefix, spaced)
        body = bodies[prefix, spaced]
        if not body or not gbnf_syntax:
            return body
        if body not in named:  # a node like one already written shares its rule
            named[body] = f"message{len(named) + 1}"
            rules.append(f"{named[body]} ::= {body}")
        return named[body]

    return node("", False), rules + [marked_rules[done] for done in sorted(marked_rules)]


def _chinese_message(chars: int, gbnf_syntax: bool) -> str:
    """A message that opens with a Han character: the words the parser takes for no message, the
    echoes and bare words (all ASCII) cannot be one. Measured with SmolLM2-135M in zh sessions:
    docs/agents.md."""
    rest = f"[^{_MESSAGE}]{{0,{chars - 1}}}" if chars > 1 else ""
    return f"[{parsing.HAN}]" + (" " if gbnf_syntax and rest else "") + rest


def _choice(labels: tuple[str, ...], gbnf_syntax: bool) -> str:
    """One of the labels, exactly (the paper's single letters as the class [AB])."""
    if all(len(label) == 1 and label.isascii() and label.isalnum() for label in labels):
        return "[" + "".join(labels) + "]"
    if gbnf_syntax:
        return "( " + " | ".join(json.dumps(label, ensure_ascii=False) for label in labels) + " )"
    return "(?:" + "|".join(re.escape(label) for label in labels) + ")"


def _banned(shape: OutputShape) -> str:
    return _INSIDE if shape.kind == "message" else r"\n\[\]［］"


@functools.lru_cache(maxsize=64)  # every call's request and record carry it: built once per shape
def gbnf(shape: OutputShape, max_tokens: int) -> str:
    """llama.cpp's GBNF for the shape (bounded repetitions ``{m,n}``)."""
    line = shape.step_chars(max_tokens)
    banned = _banned(shape)
    rules = [f'step ::= [^{banned}]{{1,{line}}}'] if shape.steps else []
    steps = [f'"STEP {n}: " step "\\n"' for n in range(1, shape.steps)]
    if shape.kind == "message":
        last = (f'"STEP {shape.steps}: " ' if shape.steps else "") + 'lead "<" message ">"'
        message, message_rules = ((_chinese_message(shape.inside_chars(max_tokens), True), []) if shape.chinese
                                  else _message_rules(shape.inside_chars(max_tokens), gbnf_syntax=True))
        rules += [f'lead ::= [^{banned}]{{0,{line}}}', f"message ::= {message}", *message_rules]
    else:
        last = f'"STEP {shape.steps}: " step "\\n" "I DECIDE TO CHOOSE [" {_choice(shape.choices, True)} "]"'
    return "\n".join([f"root ::= {' '.join(steps + [last])}", *rules])


@functools.lru_cache(maxsize=64)
def regex(shape: OutputShape, max_tokens: int) -> str:
    """The same shape as a regular expression (vLLM's guided decoding)."""
    line = shape.step_chars(max_tokens)
    banned = _banned(shape)
    steps = "".join(f"STEP {n}: [^{banned}]{{1,{line}}}\\n" for n in range(1, shape.steps))
    if shape.kind == "message":
        head = f"STEP {shape.steps}: " if shape.steps else ""
        message = (_chinese_message(shape.inside_chars(max_tokens), False) if shape.chinese
                   else _message_rules(shape.inside_chars(max_tokens), gbnf_syntax=False)[0])
        return steps + head + f"[^{banned}]{{0,{line}}}<{message}>"
    choice = _choice(shape.choices, False)
    return steps + f"STEP {shape.steps}: [^{banned}]{{1,{line}}}\\nI DECIDE TO CHOOSE \\[{choice}\\]"


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
    return (f"{shape.kind} steps={shape.steps} chars={shape.inside_chars(max_tokens)}"
            f"{' chinese' if shape.chinese else ''} "
            f"sha256={hashlib.sha256(fields.encode()).hexdigest()[:12]}")
