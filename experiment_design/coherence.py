"""How an experiment's values fit together, checked without reading any other file: every problem
found, each as (field, message). The shape of each value is schema.py's."""

from __future__ import annotations

import re
import unicodedata
from typing import Iterator, Mapping

from experiment_design.problems import field_path
from experiment_design.schema import HUMAN, NAME_PATTERN, Design, shown
from experiment_design.sizes import session_size_problem

Found = Iterator[tuple[str, str]]
# What frames an agent's answer or message, in any width (agents/parsing.py): no choice label holds one.
BRACKETS = re.compile(r"[\[\]<>(){}［］＜＞（）｛｝【】〈〉⟨⟩「」『』]")
STAGE_ORDER = ("message_1", "read_1", "message_2", "read_2", "decision", "result")


def chat_exchanges(design: Design) -> int:
    """Message exchanges of the game with chat (0: no game has chat)."""
    return max(game.chat_exchanges for game in design.games)


def needed_stages(design: Design) -> tuple[str, ...]:
    """The stages some game of the design has, in the order a round runs them."""
    exchanges = chat_exchanges(design)
    return tuple(stage for stage in STAGE_ORDER
                 if not stage[-1].isdigit() or int(stage[-1]) <= exchanges)


def problems(design: Design) -> list[tuple[str, str]]:
    found = []
    for check in (_names, _languages, _choices, _payoffs, _games, _stage_limits, _messages, _treatments, _labels,
                  _personas, _agents, _questionnaires, _demo_sizes):
        found.extend(check(design))
    return found


def _duplicates(values) -> list:
    seen, repeated = set(), []
    for value in values:
        if value in seen and value not in repeated:
            repeated.append(value)
        seen.add(value)
    return repeated


def _per_language(design: Design, field: str, texts: Mapping, what: str) -> Found:
    """A table of one entry per language: every offered language, no other."""
    for language in design.languages:
        if language not in texts:
            yield field, f"lacks {language}, which languages offers: add {language} = {what}"
    for language in texts:
        if language not in design.languages:
            yield (f"{field}.{language}", f"is for a language the experiment does not offer (languages: "
                                          f"{', '.join(design.languages)}): remove it, or add {language} to languages")


def _names(design: Design) -> Found:
    """Personas and label settings are named in session configs and their names: names of one form."""
    for table, names in (("personas", design.personas), ("labels", design.labels)):
        for name in names:
            if not re.fullmatch(NAME_PATTERN, name):
                yield (field_path((table, name)), f"{shown(name)} is not a name of lower-case letters, digits and _, "
                                                  "starting with a letter: rename it (session config names carry it)")


def _languages(design: Design) -> Found:
    for language in _duplicates(design.languages):
        yield "languages", f"lists {language} twice: list each language once"


def _choices(design: Design) -> Found:
    game = design.game
    ids = [choice.id for choice in game.choices]
    if ids[0] == ids[1]:
        yield "game.choices[2].id", f"is {shown(ids[1])}, the id of the first choice too: give each choice its own id"
    for number, choice in enumerate(game.choices, 1):
        yield from _per_language(design, f"game.choices[{number}].label", choice.label, "\"...\"")
    yield from _labels_told_apart(design)
    if game.cooperative_choice is not None and game.cooperative_choice not in ids:
        yield ("game.cooperative_choice", f"is {shown(game.cooperative_choice)}, which is not a choice (the choices: "
                                          f"{', '.join(ids)}): write one of them, or remove the key (no cooperation "
                                          "rate)")


def _label_key(label: str) -> str:
    """A label as the agents' parser compares it (agents/parsing.py: NFKC, any case)."""
    return unicodedata.normalize("NFKC", label).casefold()


def _labels_told_apart(design: Design) -> Found:
    """The agents answer with the labels of the session's language (I DECIDE TO CHOOSE [label]) and the
    parser maps the label back to its choice: each language's two labels must be told apart in any case,
    neither within the other ("Stag", "Stag hunt"), and without the brackets that frame the answer."""
    first, second = design.game.choices
    for language in design.languages:
        labels = [choice.label.get(language) for choice in (first, second)]
        for number, label in enumerate(labels, 1):
            if label is not None and BRACKETS.search(label):
                yield (f"game.choices[{number}].label.{language}",
                       f"is {shown(label)}, with a bracket: the agents answer I DECIDE TO CHOOSE [label] and write "
                       "their messages inside <>, so a label has no brackets; write it without")
        if None in labels or any(BRACKETS.search(label) for label in labels):
            continue
        one, other = (_label_key(label) for label in labels)
        if one == other:
            yield (f"game.choices[2].label.{language}",
                   f"is {shown(labels[1])}, the label of the first choice too (in any case): participants and agents "
                   "could not tell the choices apart; give each choice its own label")
        elif one.strip() in other or other.strip() in one:
            yield (f"game.choices[2].label.{language}",
                   f"is {shown(labels[1])} and the first choice's {shown(labels[0])}: one holds the other (in any "
                   "case), so an agent's answer could not be told apart; give labels neither of which is within the "
                   "other")


def _payoffs(design: Design) -> Found:
    ids = [choice.id for choice in design.game.choices]
    if len(set(ids)) < len(ids):
        return  # the table's keys cannot be told apart before the choices can (_choices says so)
    payoffs = design.game.payoffs
    example = ", ".join(f"{other} = [own, other]" for other in ids)
    for own in ids:
        if own not in payoffs:
            yield ("game.payoffs", f"lacks the row {own} (the points when you choose {own}): add "
                                   f"{own} = {{ {example} }} (a 2x2 table of [own points, other's points])")
            continue
        for other in ids:
            if other not in payoffs[own]:
                yield (f"game.payoffs.{own}", f"lacks {other} (the points when you choose {own} and the other "
                                              f"{other}): add {other} = [own points, other's points]")
        for other in payoffs[own]:
            if other not in ids:
                yield (f"game.payoffs.{own}.{other}", f"{other} is not a choice (the choices: {', '.join(ids)}): "
                                                      "remove it or correct the id")
    for own in payoffs:
        if own not in ids:
            yield (f"game.payoffs.{own}", f"{own} is not a choice (the choices: {', '.join(ids)}): remove it or "
                                          "correct the id")


def _games(design: Design) -> Found:
    with_chat = [game for game in design.games if game.chat_exchanges]
    if len(with_chat) > 1:
        yield ("games", "has two games with chat: a session can hold one game with chat and one without (each runs "
                        "in its own oTree app, and an app appears once in a session); set one game's chat_exchanges "
                        "to 0, or remove it")
    if len(design.games) - len(with_chat) > 1:
        yield ("games", "has two games without chat: a session can hold one game with chat and one without (each "
                        "runs in its own oTree app, and an app appears once in a session); give one chat_exchanges "
                        "1 or 2, or remove it")


def _stage_limits(design: Design) -> Found:
    needed = needed_stages(design)
    limits = design.stage_limits
    for stage in STAGE_ORDER:
        value = getattr(limits, stage)
        if stage in needed and value is None:
            yield (f"stage_limits.{stage}", f"is missing: a game with {chat_exchanges(design)} message exchange(s) "
                                            f"has this stage; add {stage} = <seconds>")
        elif stage not in needed and value is not None:
            why = ("no game has chat" if not chat_exchanges(design) else
                   f"the game with chat has {chat_exchanges(design)} message exchange(s)")
            yield f"stage_limits.{stage}", f"is set, but {why}: remove it"


def _messages(design: Design) -> Found:
    if chat_exchanges(design) and design.messages is None:
        yield "messages", "is missing: a game has chat; add [messages] with max_chars and agent_max_words"
    if not chat_exchanges(design) and design.messages is not None:
        yield "messages", "is set, but no game has chat: remove [messages]"


def _treatments(design: Design) -> Found:
    treatments = design.treatments
    for name in _duplicates(treatments.associate_types):
        yield "treatments.associate_types", f"lists {name} twice: list each associate type once"
    for name in treatments.associate_types:
        if name != HUMAN and name not in design.personas:
            known = ", ".join([HUMAN, *design.personas])
            yield ("treatments.associate_types", f"names {shown(name)}, which is neither human nor a persona of "
                                                 f"[personas] (known: {known}): define [personas.{name}] or correct "
                                                 "the name")
    for name in _duplicates(treatments.label_settings):
        yield "treatments.label_settings", f"lists {name} twice: list each label setting once"
    for name in treatments.label_settings:
        if name not in design.labels:
            yield ("treatments.label_settings", f"names {shown(name)}, which has no [labels.{name}] table (known: "
                                                f"{', '.join(design.labels) or 'none'}): add it or correct the name")
    game_ids = sorted(game.game_id for game in design.games)
    for number, order in enumerate(treatments.game_orders, 1):
        if sorted(order) != game_ids:
            yield (f"treatments.game_orders[{number}]", f"is {list(order)}: an order lists each game of [[games]] "
                                                        f"once ({', '.join(game_ids)})")
    for order in _duplicates(treatments.game_orders):
        yield "treatments.game_orders", f"lists {list(order)} twice: list each order once"


def _labels(design: Design) -> Found:
    for name, setting in design.labels.items():
        for kind in ("human", "agent"):
            yield from _per_language(design, f"labels.{name}.{kind}", getattr(setting, kind), "\"...\"")
        if not setting.informed:
            for language in sorted(set(setting.human) & set(setting.agent)):
                if setting.human[language] != setting.agent[language]:
                    yield (f"labels.{name}.agent", f"names agents {shown(setting.agent[language])} and humans "
                                                   f"{shown(setting.human[language])} ({language}) in an uninformed "
                                                   "setting, which would tell participants who their associates are: "
                                                   "give both the same words")


def _personas(design: Design) -> Found:
    if HUMAN in design.personas:
        yield ("personas.human", "\"human\" is the associate type of human-human treatments: give the persona another "
                                 "name")
    codes = [persona.code for persona in design.personas.values()]
    for code in _duplicates(codes):
        names = [name for name, persona in design.personas.items() if persona.code == code]
        yield (f"personas.{names[-1]}.code", f"is {shown(code)}, the code of {names[0]} too: give each persona its own "
                                             "code (the treatment codes and session config names tell them apart)")
    for name, persona in design.personas.items():
        yield from _per_language(design, f"personas.{name}.roleplay", persona.roleplay, "\"prompts/<file>.j2\"")


def _agents(design: Design) -> Found:
    if design.personas and design.agents is None:
        yield ("agents", "is missing: personas need their prompts; add [agents] with system_prompt, example_dialogues "
                         "and chat_language per language")
    if design.agents is not None:
        for key in ("system_prompt", "example_dialogues", "chat_language"):
            yield from _per_language(design, f"agents.{key}", getattr(design.agents, key), "...")


def _questionnaires(design: Design) -> Found:
    q = design.questionnaires
    for page in _duplicates(q.pages):
        yield "questionnaires.pages", f"lists {page} twice: list each page once"
    if "norm_estimates" in q.pages and design.game.cooperative_choice is None:
        yield ("questionnaires.pages", "lists norm_estimates, which asks for the others' cooperation rate, but "
                                       "game.cooperative_choice is absent: set it, or remove norm_estimates")
    if "communication_quality" in q.pages and not chat_exchanges(design):
        yield ("questionnaires.pages", "lists communication_quality (about the messages), but no game has chat: "
                                       "remove it")
    used = [design.labels.get(name) for name in design.treatments.label_settings]
    if "believed_human" in q.pages and all(setting is not None and setting.informed for setting in used):
        yield ("questionnaires.pages", "lists believed_human, which only label-uninformed sessions show, but no label "
                                       "setting of the treatments is uninformed: remove it")
    if design.payment.norm_bonus and "norm_estimates" not in q.pages:
        yield ("payment.norm_bonus", f"is {shown(design.payment.norm_bonus)}, but questionnaires.pages has no "
                                     "norm_estimates to pay it for: add the page, or set norm_bonus = 0")
    if "norm_estimates" in q.pages and q.norm_intervals is None:
        yield ("questionnaires.norm_intervals", "is missing: norm_estimates asks for an interval; add norm_intervals = "
                                                "[[0, 20], [20, 40], ...]")
    if "norm_estimates" not in q.pages and q.norm_intervals is not None:
        yield "questionnaires.norm_intervals", "is set, but questionnaires.pages has no norm_estimates: remove it"
    if q.norm_intervals is not None:
        bounds = [bound for interval in q.norm_intervals for bound in interval]
        joined = all(q.norm_intervals[i][1] == q.norm_intervals[i + 1][0] for i in range(len(q.norm_intervals) - 1))
        if (len(q.norm_intervals) < 2 or bounds[0] != 0 or bounds[-1] != 100 or not joined
                or any(lo >= hi for lo, hi in q.norm_intervals)):
            yield ("questionnaires.norm_intervals", "must be at least two intervals [lo, hi], each ending where the "
                                                    "next begins, from 0 to 100, such as [[0, 50], [50, 100]]")


def _demo_sizes(design: Design) -> Found:
    with_humans = HUMAN in design.treatments.associate_types
    if with_humans:
        problem = session_size_problem(design, HUMAN, design.demo_participants.human)
        if problem:
            yield "demo_participants.human", f"is {design.demo_participants.human}: {problem}"
