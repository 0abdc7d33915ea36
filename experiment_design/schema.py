"""The shape of an experiment file (docs/experiment-file.md): pydantic models, one per TOML table.

Each field says what it is, what it takes and, where it may be left out, its default. What a single
value can be is checked here (a number that is finite and positive, a name of the right form); how
the values fit together (a payoff for every pair of choices, a persona each treatment names) is
``coherence.py``'s. Unknown keys are refused. The models are frozen and their tables immutable
(``FrozenDict``): one Experiment serves every session of its file.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Mapping, Optional

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError

SCHEMA_VERSION = 1
MATCHING_RULES = ("perfect_strangers", "fixed_partner", "random")
# The paper's questionnaire pages (the questionnaire app's), by the names an experiment lists them.
QUESTIONNAIRE_PAGES = ("norm_estimates", "perception", "communication_quality", "believed_human", "familiarity",
                       "social_value_orientation", "demographics")
HUMAN = "human"  # the associate type of human-human treatments; every other associate type is a persona
# Characters no text of a session may hold (PostgreSQL cannot store NUL); line breaks and tabs may.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class FrozenDict(dict):
    """A dict that refuses to change: an experiment's tables, shared by every session of its file."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("an experiment is immutable: copy the table (dict(...)) to change it")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __hash__(self):
        return hash(tuple(self.items()))


def shown(value: Any) -> str:
    """A value as the experiment file writes it, for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return str(value)


def _error(value: Any, problem: str, expected: str):
    return PydanticCustomError("design", "is {value}{problem}: write {expected}",
                               {"value": shown(value), "problem": problem, "expected": expected})


def number(expected: str, *, least: float | None = None, above: float | None = None, most: float | None = None,
           integer: bool = False):
    """A number type: int or float as written (a whole number stays an int: the prompts and the
    exports print 70, not 70.0), never text, a boolean, NaN or infinity; ``least``, ``above`` and
    ``most`` bound it."""

    def check(value: Any) -> Any:
        if isinstance(value, str):
            raise _error(value, " (text in quotes), not a number", expected)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _error(value, ", not a number", expected)
        if not math.isfinite(value):
            raise _error(value, ", not a finite number", expected)
        if integer and not isinstance(value, int):
            raise _error(value, ", not a whole number", expected)
        if (least is not None and value < least or above is not None and value <= above
                or most is not None and value > most):
            raise _error(value, "", expected)
        return value

    return Annotated[Any, BeforeValidator(check)]


def text_rule(pattern: str, expected: str):
    """A string type of the form ``pattern`` (a name, a code, a path)."""
    compiled = re.compile(pattern)

    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise _error(value, ", not text", expected)
        if not compiled.fullmatch(value):
            raise _error(value, "", expected)
        return value

    return Annotated[Any, BeforeValidator(check)]


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _error(value, ", not text", "the text in quotes")
    if not value.strip():
        raise _error(value, " (empty)", "the text participants read")
    if CONTROL_CHARACTERS.search(value):
        raise _error(value, " (it holds a control character such as NUL)", "the text without it")
    return value


def _relative_path(value: Any) -> str:
    expected = "a file's path relative to the project folder, such as \"prompts/roleplay_fair.j2\""
    if not isinstance(value, str):
        raise _error(value, ", not text", expected)
    parts = value.split("/")
    if not value or value.startswith("/") or "\\" in value or ":" in value or ".." in parts or "" in parts:
        raise _error(value, " (not inside the project folder, or not with / between folders)", expected)
    return value


def _frozen(value: Mapping) -> FrozenDict:
    return FrozenDict(value)


Text = Annotated[Any, BeforeValidator(_text)]
RelativePath = Annotated[Any, BeforeValidator(_relative_path)]
NAME_PATTERN = r"[a-z][a-z0-9_]{0,39}"
Name = text_rule(NAME_PATTERN, "a name of lower-case letters, digits and _, starting with a letter "
                                           "(such as \"fair\")")
ChoiceId = text_rule(r"[A-Z][A-Za-z0-9]{0,7}", "a choice id: up to 8 letters and digits starting with a capital "
                                               "(such as \"A\")")
LanguageCode = text_rule(r"[a-z]{2,3}(_[a-z]{2,4})?", "a language code as the locale files are named "
                                                      "(such as \"en\", \"zh_hans\", \"de\")")
Seconds = number("a positive number of seconds", above=0)
Count = number("a whole number of at least 1", least=1, integer=True)
Points = number("a number of points, such as 70")
Percent = number("a percentage from 0 to 100", least=0, most=100)


def frozen_table(value_type):
    return Annotated[Mapping[str, value_type], AfterValidator(_frozen)]


Texts = frozen_table(Text)  # language -> text
Paths = frozen_table(RelativePath)  # language -> file


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Choice(Model):
    id: ChoiceId = Field(description="the choice as the data record it, such as \"A\"")
    label: Texts = Field(description="the choice as participants see it, per language: { en = \"A\", ... }")


PointsPair = Annotated[tuple[Points, Points], Field(description="[own points, other's points]")]


class StageGame(Model):
    choices: tuple[Choice, Choice] = Field(description="the two choices, as [[game.choices]] tables, in the order "
                                                       "of the payoff table's rows and columns")
    payoffs: frozen_table(frozen_table(PointsPair)) = Field(
        description="payoffs.<own choice>.<other's choice> = [own points, other's points], for all four pairs")
    cooperative_choice: Optional[ChoiceId] = Field(
        None, description="the choice the analysis counts as cooperation (absent: none, and no cooperation rate)")
    rounds_per_game: Count = Field(description="rounds of each game, such as 10")


class PlayedGame(Model):
    chat_exchanges: number("0 (the game without chat), 1 or 2 message exchanges per round", least=0, most=2,
                           integer=True) = Field(description="message exchanges before each round's decision: 0, 1 "
                                                             "or 2")

    @property
    def game_id(self) -> str:
        """WC (with communication) or WoC (without), as the data and the game orders name games."""
        return "WC" if self.chat_exchanges else "WoC"


class StageLimits(Model):
    message_1: Optional[Seconds] = Field(None, description="seconds to write message 1 (games with chat)")
    read_1: Optional[Seconds] = Field(None, description="seconds to read message 1 (games with chat)")
    message_2: Optional[Seconds] = Field(None, description="seconds to write message 2 (2 exchanges)")
    read_2: Optional[Seconds] = Field(None, description="seconds to read message 2 (2 exchanges)")
    decision: Seconds = Field(description="seconds to choose, such as 40")
    result: Seconds = Field(description="seconds the round's result is shown, such as 30")


class Messages(Model):
    max_chars: Count = Field(description="the longest message a participant may send, in characters, such as 300")
    agent_max_words: Count = Field(description="the longest message the agents' prompts ask for, in words, "
                                               "such as 20")


class Payment(Model):
    show_up_fee: number("0 or more, such as 15", least=0) = Field(description="paid to everyone who takes part")
    currency_per_point: number("more than 0, such as 0.06", above=0) = Field(
        description="money per point of all games")
    currency: text_rule(r"[A-Z]{3}", "a currency's three-letter code, such as \"CNY\" or \"EUR\"") = Field(
        description="the ISO 4217 code of the money paid")
    norm_bonus: number("0 (off) or more, such as 10", least=0) = Field(
        0, description="money per correct norm estimate (0 or absent: off)")


class Treatments(Model):
    associate_types: tuple[Name, ...] = Field(min_length=1, description="\"human\" and/or persona names")
    label_settings: tuple[Name, ...] = Field(min_length=1, description="names of [labels.<name>] tables")
    game_orders: tuple[tuple[text_rule(r"WC|WoC", "\"WC\" or \"WoC\""), ...], ...] = Field(
        min_length=1, description="each order of the games, such as [\"WC\", \"WoC\"]")


class DemoParticipants(Model):
    human: Count = Field(description="participants of a human-human demo session (even, enough for the matching)")
    agents: Count = Field(description="participants of a demo session with agents")


class LabelSetting(Model):
    informed: StrictBool = Field(description="true: participants are told what their associates are; false: that "
                                             "they may be either")
    human: Texts = Field(description="the words naming human associates, per language")
    agent: Texts = Field(description="the words naming agent associates, per language")


class Persona(Model):
    code: text_rule(r"[A-GI-Z][A-Z0-9]?", "one or two capitals (not H), such as \"F\": the treatment code H-F") = Field(
        description="the letter of its treatment code (H-F) and session config names (hf_...)")
    prompt_name: Text = Field(description="how its prompts name it (\"Remember that you are a FAIR-MINDED human\")")
    roleplay: Paths = Field(description="its role-play paragraph, a prompt file per language")


class Agents(Model):
    system_prompt: Paths = Field(description="the agents' system prompt, a file per language")
    example_dialogues: Paths = Field(description="example dialogues in the chat language, a file per language")
    chat_language: Texts = Field(description="the language's name in the prompts (\"Chinese\"), per language")


class Questionnaires(Model):
    pages: tuple[text_rule("|".join(QUESTIONNAIRE_PAGES), "one of " + ", ".join(QUESTIONNAIRE_PAGES)), ...] = Field(
        description="the questionnaire pages in their order (payment always comes last)")
    norm_intervals: Optional[tuple[tuple[Percent, Percent], ...]] = Field(
        None, description="the norm estimate's intervals of the cooperation rate, [lo, hi] in percent, covering 0-100 "
                          "(with norm_estimates)")


class Design(Model):
    """One experiment file."""

    schema_version: number(f"{SCHEMA_VERSION} (the version this platform reads)", least=SCHEMA_VERSION,
                           most=SCHEMA_VERSION, integer=True) = Field(
        description=f"the version of this format: {SCHEMA_VERSION}")
    title: Text = Field(description="the experiment's title, shown in session config names on the create page")
    session_config_prefix: Optional[text_rule(r"(|[a-z][a-z0-9_]{0,30}_)", "\"\" or lower-case letters, digits "
                                                                          "and _ ending in _, such as \"stag_hunt_\"")
                                    ] = Field(
        None, description="put before each session config name (absent: the file's name and _)")
    languages: tuple[LanguageCode, ...] = Field(min_length=1, description="the languages sessions may run in")
    game: StageGame = Field(description="the [game] table: choices, payoffs, cooperation, rounds")
    games: tuple[PlayedGame, ...] = Field(min_length=1, max_length=2,
                                          description="the games each participant plays, as [[games]] tables")
    stage_limits: StageLimits = Field(description="the [stage_limits] table, seconds")
    messages: Optional[Messages] = Field(None, description="the [messages] table (with a chat game)")
    matching: text_rule("|".join(MATCHING_RULES), "one of " + ", ".join(MATCHING_RULES)) = Field(
        description="who meets whom: perfect_strangers, fixed_partner or random")
    payment: Payment = Field(description="the [payment] table")
    treatments: Treatments = Field(description="the [treatments] table")
    demo_participants: DemoParticipants = Field(description="the [demo_participants] table")
    labels: frozen_table(LabelSetting) = Field(description="[labels.<setting>] tables")
    personas: frozen_table(Persona) = Field(default_factory=FrozenDict,
                                            description="[personas.<name>] tables (absent: none)")
    agents: Optional[Agents] = Field(None, description="the [agents] table (with personas)")
    questionnaires: Questionnaires = Field(description="the [questionnaires] table")
