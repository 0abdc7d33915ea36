"""The participant texts a design needs, by locale key, and their check against locale/<language>.toml.

The paper's texts (locale/*.toml) describe the paper's design in words: "two games", "an associate
you have never met before", "exchange two messages", "choose A or B". A design that differs in one
of those places needs another text there. Each such place is a *slot*: the paper's design uses the
paper's key; any other design uses a key in the locale's ``[variants]`` table named by the design's
features (``variants.rules_body_games2_fixed_partner``), whose text names the choices by the
placeholders ``{choice_1}``, ``{choice_2}`` and ``{cooperative_choice}`` (their labels in the
session's language) instead of A and B. Every other key of the reference locale (locale/en.toml) is
needed by every design, save those of pages the design does not show (a questionnaire it leaves
out, the message pages without a chat game) and those the experiment file itself gives (the
associates' words, the choices' labels). Keys are written as TOML paths ("intro.rules_body"); the
apps look them up flattened ("intro_rules_body", ``flat_key``).
"""

from __future__ import annotations

import string
import tomllib
from dataclasses import dataclass
from pathlib import Path

from experiment_design.coherence import STAGE_ORDER, chat_exchanges, needed_stages
from experiment_design.schema import Design

REFERENCE_LANGUAGE = "en"
PAPER_LABELS = ("A", "B")
VARIANTS = "variants"
# The texts' placeholders for the design's choices (the labels in the session's language), and for the
# session's values every page fills in (lab/shared_pages/pages.py, text_params), the stages' seconds besides.
CHOICE_PLACEHOLDERS = ("choice_1", "choice_2", "cooperative_choice")
SESSION_PLACEHOLDERS = ("rounds", "fee", "rate", "bonus", "currency", "max_chars")
# Texts the experiment file gives itself: the associates' words ([labels]) and the choices' labels;
# and the currency's name, which pages write as its code where a language has none (CNY: 元).
GIVEN_BY_THE_EXPERIMENT = ("common.associate_humans", "common.associate_machines", "common.associate_either",
                           "common.choice_a", "common.choice_b", "currency.")
# The texts of the design's slots, by the paper's key: any design needs one text for each of them.
SLOT_KEYS = {
    "rules_body": "intro.rules_body",
    "rules_body_after": "intro.rules_body_after",
    "game_intro_with_chat": "game.intro_with_chat",
    "game_intro_without_chat": "game.intro_without_chat",
    "new_associate": "game.new_associate",
    "game_of": "common.game_of",
    "points_total": "payment.points_total",
    "decision_prompt": "game.decision_prompt",
    "welcome_terms": "intro.welcome_terms",
    "norm_intro": "questionnaire.norm_intro",
    "norm_game_WC": "questionnaire.norm_game_WC",
    "norm_game_WoC": "questionnaire.norm_game_WoC",
}
# Texts only some designs show, as key prefixes: what shows them.
_CHAT_PAGES = ("game.message_", "game.read_title", "game.associate_wrote", "game.associate_no_message",
               "game.you_wrote", "game.you_no_message", "game.message.", "game.decision.messages")
_PAGE_TEXTS = {
    "norm_estimates": ("questionnaire.interval", "payment.norm_", "payment.bonus"),
    "perception": ("questionnaire.perception_",),
    "communication_quality": ("questionnaire.c7_",),
    "believed_human": ("questionnaire.believed_human",),
    "familiarity": ("questionnaire.familiarity_",),
    "social_value_orientation": ("questionnaire.svo_",),
    "demographics": ("questionnaire.age", "questionnaire.gender", "questionnaire.major"),
}
_LIKERT_PAGES = ("perception", "communication_quality", "believed_human")
_LIKERT_TEXTS = ("questionnaire.likert_",)
_QUESTIONNAIRE_TEXTS = ("questionnaire.title",)


def flat_key(key: str) -> str:
    """A TOML path as the apps look texts up: "game.message.send" -> "game_message_send"."""
    return key.replace(".", "_")


def read_locale(path: Path) -> dict[str, str]:
    """A locale file's texts by TOML path. OSError or tomllib.TOMLDecodeError if it cannot be read."""
    with open(path, "rb") as f:
        return _flatten(tomllib.load(f))


def _flatten(tree: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _paper_labels(design: Design) -> bool:
    """Whether the choices are labelled A and B, in this order, in every language (the paper's texts say so;
    a label a language lacks is coherence.py's problem, not a difference)."""
    first, second = design.game.choices
    return all(first.label.get(language, PAPER_LABELS[0]) == PAPER_LABELS[0]
               and second.label.get(language, PAPER_LABELS[1]) == PAPER_LABELS[1] for language in design.languages)


def _paper_cooperation(design: Design) -> bool:
    """Whether cooperation is the first choice, labelled A (the paper's norm-estimate texts ask for A)."""
    first = design.game.choices[0]
    return (design.game.cooperative_choice == first.id
            and all(first.label.get(language, PAPER_LABELS[0]) == PAPER_LABELS[0] for language in design.languages))


def text_keys(design: Design, norm_bonus: float | None = None) -> dict[str, str]:
    """The locale key of each slot the design shows: slot name -> TOML path. ``norm_bonus``: a
    session's own bonus (its config may set another than the file's; 0 announces none)."""
    labels, games, exchanges = _paper_labels(design), len(design.games), chat_exchanges(design)
    without_chat = any(not game.chat_exchanges for game in design.games)
    strangers = design.matching == "perfect_strangers"
    bonus = bool(design.payment.norm_bonus if norm_bonus is None else norm_bonus)

    def slot(name: str, is_papers: bool, variant: str) -> str:
        return SLOT_KEYS[name] if is_papers else f"{VARIANTS}.{variant}"

    keys = {
        "rules_body": slot("rules_body", games == 2 and strangers and labels,
                           f"rules_body_games{games}_{design.matching}"),
        "rules_body_after": slot("rules_body_after", exchanges == 2 and without_chat and labels,
                                 f"rules_body_after_chat{exchanges}_games{games}"),
        "new_associate": slot("new_associate", strangers, f"new_associate_{design.matching}"),
        "game_of": slot("game_of", games == 2, f"game_of_games{games}"),
        "points_total": slot("points_total", games == 2, f"points_total_games{games}"),
        "decision_prompt": slot("decision_prompt", labels, "decision_prompt"),
        "welcome_terms": slot("welcome_terms", bonus, "welcome_terms_no_bonus"),
    }
    if exchanges:
        keys["game_intro_with_chat"] = slot("game_intro_with_chat", exchanges == 2 and labels,
                                            f"game_intro_with_chat_exchanges{exchanges}")
    if without_chat:
        keys["game_intro_without_chat"] = slot("game_intro_without_chat", labels, "game_intro_without_chat")
    if "norm_estimates" in design.questionnaires.pages:
        cooperation = _paper_cooperation(design)
        keys["norm_intro"] = slot("norm_intro", bonus and cooperation,
                                  "norm_intro_" + ("bonus" if bonus else "no_bonus"))
        for game in design.games:
            keys[f"norm_game_{game.game_id}"] = slot(f"norm_game_{game.game_id}", cooperation,
                                                     f"norm_game_{game.game_id}")
    return keys


def session_bonus_problem(design: Design, norm_bonus: float, language: str, locale_dir: Path) -> str | None:
    """Why a session of ``design`` cannot run with its config's ``norm_bonus``: a bonus without the norm
    estimates page, or a bonus turned on or off (0) where the file's is not, whose texts its language's
    locale lacks (the check made sure of the file's own); None: it can."""
    if norm_bonus and "norm_estimates" not in design.questionnaires.pages:
        return "the file asks no norm estimate, which it would pay: set it to 0"
    if bool(norm_bonus) == bool(design.payment.norm_bonus):
        return None
    texts = read_locale(locale_dir / f"{language}.toml")
    missing = [key for key in text_keys(design, norm_bonus).values() if key not in texts]
    if missing:
        return (f"its bonus is {design.payment.norm_bonus:g}, and locale/{language}.toml lacks the texts of a "
                f"session {'with' if norm_bonus else 'without'} one ({', '.join(missing)}): write them, or keep "
                "the file's bonus on or off")
    return None


def _starts(key: str, prefixes) -> bool:
    return any(key.startswith(prefix) for prefix in prefixes)


def required_keys(design: Design, reference_keys) -> list[str]:
    """Every locale key the design's pages show, in the reference's order, then the design's slots."""
    pages = design.questionnaires.pages
    not_shown = [VARIANTS + ".", *GIVEN_BY_THE_EXPERIMENT, *SLOT_KEYS.values()]
    if not chat_exchanges(design):
        not_shown += _CHAT_PAGES
    for page, prefixes in _PAGE_TEXTS.items():
        if page not in pages:
            not_shown += prefixes
    if not any(page in pages for page in _LIKERT_PAGES):
        not_shown += _LIKERT_TEXTS
    if not pages:
        not_shown += _QUESTIONNAIRE_TEXTS
    informed = {design.labels[name].informed for name in design.treatments.label_settings if name in design.labels}
    not_shown += [f"game.associates_{'informed' if flag else 'uninformed'}" for flag in (True, False)
                  if flag not in informed]
    keys = [key for key in reference_keys if not _starts(key, not_shown)]
    return keys + [key for key in text_keys(design).values() if key not in keys]


def placeholders(text: str) -> set[str]:
    """The {names} a text asks to be filled in."""
    try:
        return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text) if name}
    except ValueError:  # an unmatched brace: the text is shown as it is written
        return set()


def allowed_placeholders(design: Design, key: str, reference: dict[str, str]) -> set[str]:
    """What the page showing ``key`` fills in: the session's values (SESSION_PLACEHOLDERS, the stages
    only of the design's stages), the choices', and what the page fills in the paper's text of the key
    (of a variant: the paper's key of its slot, such as {game_index})."""
    names = set(SESSION_PLACEHOLDERS) | set(CHOICE_PLACEHOLDERS)
    key = {variant: SLOT_KEYS[slot] for slot, variant in text_keys(design).items()}.get(key, key)
    if key in reference and not key.startswith(VARIANTS + "."):
        names |= placeholders(reference[key])
    return (names - set(STAGE_ORDER)) | set(needed_stages(design))


@dataclass(frozen=True)
class TextProblem:
    language: str
    key: str | None  # None: the whole locale file
    message: str


def text_problems(design: Design, locale_dir: Path, *, each_key: bool = True) -> list[TextProblem]:
    """The texts each offered language lacks, or fills with placeholders no page of the design fills;
    ``each_key`` False: only the languages without a locale file (a design with problems of its own
    may need other texts once they are fixed)."""
    found: list[TextProblem] = []
    try:
        reference = read_locale(locale_dir / f"{REFERENCE_LANGUAGE}.toml")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return [TextProblem(REFERENCE_LANGUAGE, None, f"the reference locale cannot be read ({exc}): every language is "
                                                      "checked against its keys")]
    needed = required_keys(design, reference)
    for language in design.languages:
        path = locale_dir / f"{language}.toml"
        if not path.exists():
            found.append(TextProblem(language, None, (
                f"is missing: a language needs its participant texts; copy locale/{REFERENCE_LANGUAGE}.toml to "
                f"locale/{language}.toml and translate it (docs/experiment-file.md, A language is files). This design "
                f"needs these {len(needed)} keys: {', '.join(needed)}")))
            continue
        if not each_key:
            continue
        try:
            texts = read_locale(path)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            found.append(TextProblem(language, None, f"cannot be read: {exc}"))
            continue
        for key in needed:
            if key not in texts:
                source = (f"locale/{REFERENCE_LANGUAGE}.toml has it in English" if key in reference else
                          "docs/experiment-file.md, Texts, says what it tells and which placeholders it may use")
                found.append(TextProblem(language, key, f"is missing, and this design shows it: write it ({source})"))
            elif not isinstance(texts[key], str) or not texts[key].strip() and reference.get(key, "x").strip():
                found.append(TextProblem(language, key, "is empty or not text: write the text participants read"))
            else:
                allowed = allowed_placeholders(design, key, reference)
                unknown = sorted(placeholders(texts[key]) - allowed)
                if unknown:
                    names = ", ".join("{" + name + "}" for name in unknown)
                    found.append(TextProblem(language, key, (
                        f"asks for {names}, which its page does not fill in for this design (it would show as "
                        f"written): remove it or correct its name (its placeholders: {', '.join(sorted(allowed))})")))
    return found
