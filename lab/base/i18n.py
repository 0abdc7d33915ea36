"""Participant-facing texts, per session language.

oTree chooses one language per server (LANGUAGE_CODE); this lab runs sessions of several
languages side by side, so every text a participant sees lives in ``locale/<language>.toml``
and is looked up by the session config's ``language``. A language is its locale file: the lab's
languages are the files of locale/ (the experiment check names every key a file lacks). Texts
may hold ``{placeholders}`` filled from the session's parameters (payoffs, limits, rounds) and
trusted HTML markup; nothing a participant typed ever passes through here.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

LOCALE_DIR = Path(__file__).resolve().parents[2] / "locale"
LANGUAGES = tuple(sorted(path.stem for path in LOCALE_DIR.glob("*.toml")))  # ("de", "en", "zh_hans")


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


def _localised(language: str, params: dict) -> _Defaults:
    """The placeholder values, with ``{currency}`` written as the language writes it: a
    currency code (protocol.CURRENCY_CODE) becomes the locale's ``[currency]`` name (元)."""
    values = _Defaults(params)
    code = values.get("currency")
    if code is not None:
        values["currency"] = load_texts(language).get(f"currency_{code}", code)
    return values


def texts(language: str, **params) -> dict[str, str]:
    """All texts of ``language`` with ``params`` filled into their placeholders."""
    return dict(_filled_texts(language, tuple(sorted(params.items()))))


@functools.lru_cache(maxsize=256)
def _filled_texts(language: str, params: tuple) -> dict[str, str]:
    """Every page asks for these; a session's parameters don't change (callers get a copy)."""
    values = _localised(language, dict(params))
    return {key: text.format_map(values) for key, text in load_texts(language).items()}


def text(language: str, key: str, **params) -> str:
    return load_texts(language)[key].format_map(_localised(language, params))


def currency_name(language: str, code: str) -> str:
    """How participant pages in ``language`` write the currency ``code`` (CNY: 元 in Chinese)."""
    return load_texts(language).get(f"currency_{code}", code)


# --- The server's language ------------------------------------------------------------
# OTREE_LANGUAGE_CODE (settings.LANGUAGE_CODE) is the default of each session's language and
# the language of the pages that belong to no session (a room before its session); oTree's own
# texts follow each request's session (lab/server/otree_language.py). The lab's texts exist in
# LANGUAGES, named as locale files are ("zh_hans"); oTree spells them as Django does ("zh-hans"),
# HTML as BCP 47 ("zh-Hans").
DEFAULT_LANGUAGE = "zh_hans"  # the paper's lab
# A session's language -> the agents' code for it (agents/prompts.py): the paper's agents call
# Chinese "zh"; every other language goes by its own code.
AGENT_LANGUAGE = {"zh_hans": "zh", "en": "en"}


def agent_language(language: str) -> str:
    """The agents' code of a session language: "zh_hans" -> "zh", "de" -> "de"."""
    return AGENT_LANGUAGE.get(language, language)


def otree_code(language: str) -> str:
    """oTree's spelling of a lab language (settings.LANGUAGE_CODE): "zh_hans" -> "zh-hans", "de" -> "de"."""
    return language.replace("_", "-")


def html_lang(language: str) -> str:
    """<html lang="…"> of a lab language: a script subtag capitalised, a region upper-cased ("zh-Hans", "pt-BR")."""
    first, *rest = language.split("_")
    return "-".join([first, *(tag.title() if len(tag) == 4 else tag.upper() if len(tag) == 2 else tag
                              for tag in rest)])


def lab_language(raw: str | None) -> str:
    """OTREE_LANGUAGE_CODE (``zh-hans``, ``zh_Hans``, ``zh``, ``en``, ``de-DE``…) as one of LANGUAGES;
    unset or empty means DEFAULT_LANGUAGE. ValueError says what is accepted."""
    value = (raw or "").strip().lower().replace("-", "_")
    if not value:
        return DEFAULT_LANGUAGE
    aliases = {"zh": "zh_hans", "zh_cn": "zh_hans"}
    value = aliases.get(value, value)
    if value not in LANGUAGES and value.split("_")[0] in LANGUAGES:  # a region of a language: en-US, de-AT
        value = value.split("_")[0]
    if value not in LANGUAGES:
        codes = ", ".join(otree_code(language) for language in LANGUAGES)
        raise ValueError(
            f"OTREE_LANGUAGE_CODE is {raw!r}; this lab's texts exist in {codes} (the files of locale/). Set "
            f"OTREE_LANGUAGE_CODE to one of them, or add locale/<code>.toml (docs/experiment-file.md, A language "
            "is files)."
        )
    return value


def otree_language_code(raw: str | None) -> str:
    """settings.LANGUAGE_CODE for oTree from OTREE_LANGUAGE_CODE (see lab_language)."""
    return otree_code(lab_language(raw))
