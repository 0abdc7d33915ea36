"""Participant-facing texts, per session language.

oTree chooses one language per server (LANGUAGE_CODE); this lab runs Chinese and English
sessions side by side, so every text a participant sees lives in ``locale/<language>.toml``
and is looked up by the session config's ``language``. Texts may hold ``{placeholders}``
filled from the session's parameters (payoffs, limits, rounds) and trusted HTML markup;
nothing a participant typed ever passes through here.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
LANGUAGES = ("zh_hans", "en")


class _Defaults(dict):
    """str.format_map helper: leave unknown placeholders as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@functools.lru_cache(maxsize=None)
def load_texts(language: str) -> dict[str, str]:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    with open(LOCALE_DIR / f"{language}.toml", "rb") as f:
        return _flatten(tomllib.load(f))


def _flatten(tree: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}_"))
        else:
            flat[name] = value
    return flat


def texts(language: str, **params) -> dict[str, str]:
    """All texts of ``language`` with ``params`` filled into their placeholders."""
    return dict(_filled_texts(language, tuple(sorted(params.items()))))


@functools.lru_cache(maxsize=256)
def _filled_texts(language: str, params: tuple) -> dict[str, str]:
    """Every page asks for these; a session's parameters don't change (callers get a copy)."""
    values = _Defaults(dict(params))
    return {key: text.format_map(values) for key, text in load_texts(language).items()}


def text(language: str, key: str, **params) -> str:
    return load_texts(language)[key].format_map(_Defaults(params))
