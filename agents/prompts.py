"""The agents' prompts (SI Note 5), rendered from ``prompts/*.j2`` with an experiment and game state.

The templates hold the text word for word; this module only fills the placeholders, from the
session's experiment (``experiment_design``): the choices and payoffs of the game rules, the
matching and the number of message exchanges, the persona's name and role-play file, the system
prompt, example dialogues and chat language of each language, and the message word limit; then
the round's messages and the agent's past rounds. No experiment means the paper's
(``experiments/paper.toml``), whose prompts are the paper's text. ``prompt_version()`` is a content
hash of every template (and of an experiment's prompt files outside ``prompts/``), recorded with
each call, so a data set says exactly which prompts produced it.

Jinja2 is held at 2.11 by oTree's MarkupSafe pin: the templates use nothing newer.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import jinja2

import experiment_design as ed
import protocol

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
PAPER_EXPERIMENT_FILE = ed.EXPERIMENTS_DIR / "paper.toml"
# The agents name the paper's languages "zh" and "en" (lab/base/i18n.py's AGENT_LANGUAGE);
# an experiment names a language as its locale file does ("zh_hans"). Any other code is the experiment's own.
LANGUAGE_CODES = {"zh": "zh_hans"}


@dataclass(frozen=True)
class PastRound:
    """One line of the decision prompt's history."""

    round_number: int
    own_choice: str
    associate_choice: str
    own_payoff: int
    associate_payoff: int


@functools.lru_cache(maxsize=1)
def paper_experiment() -> ed.Experiment:
    """The paper's experiment: the prompts of a call without an experiment."""
    return ed.load(PAPER_EXPERIMENT_FILE)


def _experiment_language(language: str) -> str:
    return LANGUAGE_CODES.get(language, language)


def _paper_table(table: dict[str, str]) -> dict[str, str]:
    """A per-language table of the paper's file, keyed by the agents' language codes."""
    return {agent: table[_experiment_language(agent)] for agent in ("zh", "en")}


LANGUAGES = tuple(_paper_table(paper_experiment().design.agents.chat_language))  # the paper's: ("zh", "en")
# The persona names the paper's prompts use ("Remember that you are a {PERSONA_NAME} human").
PERSONA_NAMES = {name: persona.prompt_name for name, persona in paper_experiment().design.personas.items()}
CHAT_LANGUAGE_NAMES = _paper_table(paper_experiment().design.agents.chat_language)


@functools.lru_cache(maxsize=1)
def _template_sources() -> dict[str, str]:
    """Every agent template, read once: what is rendered is exactly what ``prompt_version`` hashes."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(PROMPTS_DIR.glob("*.j2"))}


def _template_name(path: str) -> str:
    """The template of a prompt file an experiment names (relative to the project folder): a file of
    ``prompts/`` by its name, any other by its path."""
    parts = path.split("/")
    return parts[1] if len(parts) == 2 and parts[0] == PROMPTS_DIR.name else path


@functools.lru_cache(maxsize=64)
def _project_file(name: str) -> Optional[str]:
    """The text of a prompt file outside ``prompts/`` that an experiment names, read once."""
    path = ed.PROJECT_DIR / name
    return path.read_text(encoding="utf-8") if "/" in name and path.is_file() else None


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.DictLoader(_template_sources()), jinja2.FunctionLoader(_project_file)]),
        undefined=jinja2.StrictUndefined,  # a missing placeholder is an error, never blank text
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,  # an included file ends its line
        autoescape=False,
    )


def points(value: float) -> int | float:
    """A whole number of points as the prompts print it: 70, not 70.0."""
    return int(value) if float(value).is_integer() else value


def choice_labels(experiment: Optional[ed.Experiment] = None, language: Optional[str] = None) -> dict[str, str]:
    """Each choice's id -> how the agents' prompts name it and the agents answer with it: its label in the
    session's ``language`` (the participants', whom they chat with); without a language, its id. The
    paper's labels are its ids, A and B."""
    experiment = experiment or paper_experiment()
    if language is None:
        return {choice: choice for choice in experiment.choice_ids}
    return {choice: experiment.choice_label(choice, _experiment_language(language)) for choice in experiment.choice_ids}


@functools.lru_cache(maxsize=16)
def game_variables(experiment: Optional[ed.Experiment] = None, language: Optional[str] = None) -> dict[str, object]:
    """What the templates say of the game: its choices (their labels in ``language``, which the agents
    answer with: ``choice_labels``), the payoffs, the matching, the message exchanges of the game with
    chat and the message word limit."""
    experiment = experiment or paper_experiment()
    first, second = experiment.choice_ids
    labels = choice_labels(experiment, language)
    matrix = experiment.payoff_matrix
    for choice in (first, second):
        own, other = matrix[(choice, choice)]
        if own != other:
            raise ValueError(f"experiment {experiment.name}: the agents' rules say both receive the same when both "
                             f"choose {choice}, but the payoffs are {own} and {other}")
    with_chat = [game for game in experiment.game_ids if experiment.chat_exchanges(game)]
    return dict(
        choice_1=labels[first], choice_2=labels[second], matching=experiment.matching,
        chat_exchanges=experiment.chat_exchanges(with_chat[0]) if with_chat else 0,
        max_words=experiment.agent_message_max_words,
        payoff_aa=points(matrix[(first, first)][0]), payoff_bb=points(matrix[(second, second)][0]),
        payoff_ab_own=points(matrix[(first, second)][0]), payoff_ab_other=points(matrix[(first, second)][1]),
        payoff_ba_own=points(matrix[(second, first)][0]), payoff_ba_other=points(matrix[(second, first)][1]),
    )


def render(template_name: str, experiment: Optional[ed.Experiment] = None, *, language: Optional[str] = None,
           **variables: object) -> str:
    """Render one template by file name with explicit variables (used by the tests too); what of the
    game they do not give comes from ``experiment`` (default: the paper's), its choices named as
    ``language`` labels them."""
    return _environment().get_template(template_name).render(
        {**game_variables(experiment, language), **variables}).strip("\n")


@functools.lru_cache(maxsize=16)
def prompt_version(experiment: Optional[ed.Experiment] = None) -> str:
    """Content hash of the agent templates (``prompts/*.j2``) as loaded, and of the prompt files of
    ``experiment`` outside ``prompts/`` (none for the paper's), 12 hex digits."""
    sources = dict(_template_sources())
    for path in experiment.referenced_files() if experiment is not None else ():
        name = _template_name(path)
        if name not in sources and (text := _project_file(name)) is not None:
            sources[name] = text
    digest = hashlib.sha256()
    for name, source in sources.items():
        digest.update(name.encode("utf-8") + b"\0" + source.encode("utf-8") + b"\0")
    return digest.hexdigest()[:12]


def check(persona: Optional[str] = None, language: Optional[str] = None,
          experiment: Optional[ed.Experiment] = None) -> ed.Experiment:
    """The experiment the prompts come from (default: the paper's); ValueError for a persona or a
    language it does not have."""
    experiment = experiment or paper_experiment()
    personas = tuple(experiment.design.personas)
    if persona is not None and persona not in personas:
        raise ValueError(f"persona must be one of {personas} (experiment {experiment.name}), not {persona!r}")
    if language is not None and _experiment_language(language) not in experiment.design.languages:
        known = tuple(experiment.design.languages)
        raise ValueError(f"language must be one of {known} (experiment {experiment.name}), not {language!r}")
    return experiment


def _file(path: str, experiment: ed.Experiment, language: str, **variables: object) -> str:
    return render(_template_name(path), experiment, language=language, **variables)


@functools.lru_cache(maxsize=64)
def system_prompt(persona: str, language: str = "zh", *, with_communication: bool = True,
                  experiment: Optional[ed.Experiment] = None) -> str:
    experiment = check(persona, language, experiment)
    code, agents = _experiment_language(language), experiment.design.agents
    return _file(
        agents.system_prompt[code], experiment, language,
        example_dialogues=_file(agents.example_dialogues[code], experiment, language),
        roleplay=_file(experiment.roleplay_file(persona, code), experiment, language),
        with_communication=with_communication,
    )


def _chat_language(language: str, experiment: ed.Experiment) -> str:
    return experiment.design.agents.chat_language[_experiment_language(language)]


def message_1_prompt(round_number: int, persona: str, language: str = "zh", *,
                     experiment: Optional[ed.Experiment] = None) -> str:
    experiment = check(persona, language, experiment)
    return render("message_1.j2", experiment, language=language, round_number=round_number,
                  persona_name=experiment.persona_prompt_name(persona),
                  chat_language=_chat_language(language, experiment))


def message_2_prompt(own_message_1: Optional[str], associate_message_1: Optional[str], language: str = "zh", *,
                     experiment: Optional[ed.Experiment] = None) -> str:
    """None for a message = it was not sent in time; the prompt says so plainly."""
    experiment = check(language=language, experiment=experiment)
    return render("message_2.j2", experiment, language=language, own_message_1=own_message_1,
                  associate_message_1=associate_message_1,
                  chat_language=_chat_language(language, experiment))


def decision_prompt(
    round_number: int,
    persona: str,
    *,
    history: list[PastRound],
    total_payoff: int,
    with_communication: bool = True,
    own_message_1: Optional[str] = None,
    associate_message_1: Optional[str] = None,
    own_message_2: Optional[str] = None,
    associate_message_2: Optional[str] = None,
    experiment: Optional[ed.Experiment] = None,
    language: Optional[str] = None,
) -> str:
    """``history``'s choices are ids; the prompt names them as ``language`` labels them (``choice_labels``)."""
    experiment = check(persona, language, experiment)
    labels = choice_labels(experiment, language)
    shown = [dataclasses.replace(past, own_choice=labels.get(past.own_choice, past.own_choice),
                                 associate_choice=labels.get(past.associate_choice, past.associate_choice))
             for past in history]
    common = dict(round_number=round_number, persona_name=experiment.persona_prompt_name(persona), history=shown,
                  total_payoff=total_payoff)
    if not with_communication:
        return render("decision_woc.j2", experiment, language=language, **common)
    return render("decision.j2", experiment, language=language, own_message_1=own_message_1,
                  associate_message_1=associate_message_1,
                  own_message_2=own_message_2, associate_message_2=associate_message_2, **common)


def reask_prompt(is_decision: bool, *, too_long: bool = False, max_chars: int = protocol.MESSAGE_MAX_CHARS,
                 problem: Optional[str] = None, experiment: Optional[ed.Experiment] = None,
                 language: Optional[str] = None) -> str:
    """Our one-time re-ask after a malformed reply, or a message over the limit (not in the paper);
    ``problem`` (what the parser found wrong) is appended as one line, so the re-ask is never the
    request that failed."""
    if too_long and not is_decision:
        text = render("reask_message_shorter.j2", experiment, language=language, max_chars=max_chars)
    else:
        text = render("reask_decision.j2" if is_decision else "reask_message.j2", experiment, language=language)
    if problem:
        text += "\n" + render("reask_problem.j2", experiment, language=language,
                               problem=" ".join(problem.split()).rstrip("."))
    return text
