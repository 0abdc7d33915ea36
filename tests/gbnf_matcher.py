"""A small matcher for the GBNF agents/grammars.py writes, so that tests check the grammar llama.cpp
gets, not only its regular-expression form (which leaves out the echoes' tails: see
agents/grammars.py). The subset: ``name ::= expression`` per line; sequences; ``( a | b )``;
``"literal"``; ``[...]`` and ``[^...]`` with ranges and ``\\n \\t \\" \\\\`` escapes; rule names;
``?``, ``*``, ``+`` and ``{m,n}`` after an item. ``matches(grammar, text)``: the whole text."""

from __future__ import annotations

import functools
import re

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "[": "[", "]": "]", "-": "-"}


def _parse_class(body: str) -> tuple[bool, list[tuple[str, str]]]:
    negated = body.startswith("^")
    body = body[1:] if negated else body
    chars, i = [], 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            char, i = _ESCAPES[body[i + 1]], i + 1
        chars.append(char)
        i += 1
    ranges, i = [], 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            ranges.append((chars[i], chars[i + 2]))
            i += 3
        else:
            ranges.append((chars[i], chars[i]))
            i += 1
    return negated, ranges


_TOKEN = re.compile(r'\s*(?:(?P<literal>"(?:[^"\\]|\\.)*")|(?P<cls>\[(?:[^\]\\]|\\.)*\])|(?P<name>[\w-]+)'
                    r'|(?P<open>\()|(?P<close>\))|(?P<bar>\|)|(?P<repeat>\{\d+(?:,\d*)?\}|[?*+]))')


def _parse(expression: str):
    """The expression as nested tuples: ("alt", [seq...]), ("seq", [items]), ("lit", s),
    ("cls", negated, ranges), ("ref", name), ("rep", item, low, high)."""
    tokens = [(m.lastgroup, m.group(m.lastgroup)) for m in _TOKEN.finditer(expression)]
    position = 0

    def alternation():
        nonlocal position
        options = [sequence()]
        while position < len(tokens) and tokens[position][0] == "bar":
            position += 1
            options.append(sequence())
        return ("alt", options)

    def sequence():
        nonlocal position
        items = []
        while position < len(tokens) and tokens[position][0] not in ("bar", "close"):
            kind, text = tokens[position]
            position += 1
            if kind == "open":
                item = alternation()
                position += 1  # the ")"
            elif kind == "literal":
                item = ("lit", re.sub(r"\\(.)", lambda m: _ESCAPES[m.group(1)], text[1:-1]))
            elif kind == "cls":
                item = ("cls", *_parse_class(text[1:-1]))
            else:
                item = ("ref", text)
            if position < len(tokens) and tokens[position][0] == "repeat":
                repeat = tokens[position][1]
                position += 1
                low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}.get(repeat, (None, None))
                if low is None:
                    bounds = repeat[1:-1].split(",")
                    low = int(bounds[0])
                    high = low if len(bounds) == 1 else (int(bounds[1]) if bounds[1] else None)
                item = ("rep", item, low, high)
            items.append(item)
        return ("seq", items)

    return alternation()


@functools.lru_cache(maxsize=32)
def _rules(grammar: str) -> dict:
    rules = {}
    for line in grammar.splitlines():
        if "::=" in line:
            name, expression = line.split("::=", 1)
            rules[name.strip()] = _parse(expression)
    return rules


def matches(grammar: str, text: str, root: str = "root") -> bool:
    rules = _rules(grammar)

    def in_class(node, char: str) -> bool:
        inside = any(low <= char <= high for low, high in node[2])
        return inside != node[1]

    @functools.lru_cache(maxsize=None)
    def ends(name: str, start: int) -> frozenset:
        return frozenset(match(rules[name], start))

    def match(node, start: int) -> set:
        kind = node[0]
        if kind == "alt":
            return set().union(*(match(option, start) for option in node[1]))
        if kind == "seq":
            positions = {start}
            for item in node[1]:
                positions = set().union(*(match(item, p) for p in positions)) if positions else set()
            return positions
        if kind == "lit":
            return {start + len(node[1])} if text.startswith(node[1], start) else set()
        if kind == "cls":
            return {start + 1} if start < len(text) and in_class(node, text[start]) else set()
        if kind == "ref":
            return set(ends(node[1], start))
        _, item, low, high = node  # rep
        reached, frontier, count = set(), {start}, 0
        if low == 0:
            reached.add(start)
        while frontier and (high is None or count < high):
            frontier = set().union(*(match(item, p) for p in frontier)) - {p for p in frontier}
            count += 1
            if count >= low:
                reached |= frontier
        return reached

    return len(text) in ends(root, 0)
