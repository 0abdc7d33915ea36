"""An experiment: its file's text, its name and its design, and what the running code asks of it.

``load_text`` is the one way in (``load`` reads a file and calls it): the same text gives the same
Experiment object, cached by the text, so a session may ask its experiment on every request. The
object is immutable. Nothing here reads any file but the experiment's own (prompt files and
locale texts are check.py's).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from pydantic import ValidationError

from experiment_design import coherence, configs, texts
from experiment_design.problems import UNREADABLE, ExperimentError, Problem, schema_problems
from experiment_design.schema import HUMAN, NAME_PATTERN, Design, LabelSetting, Persona
from experiment_design.sizes import least_human_participants, session_size_problem

PROJECT_DIR = Path(__file__).resolve().parent.parent  # the folder of experiments/, locale/ and prompts/
EXPERIMENTS_DIR = PROJECT_DIR / "experiments"
# The tests' own experiment files, which a server reads only when LAB_TEST_EXPERIMENTS=1 and never in
# production (OTREE_PRODUCTION): a lab's create page never offers them.
TEST_EXPERIMENTS_DIR = PROJECT_DIR / "tests" / "data" / "experiments"
TEST_EXPERIMENTS_VARIABLE = "LAB_TEST_EXPERIMENTS"
SUFFIX = ".toml"
BYTE_ORDER_MARK = "\ufeff"


@dataclass(frozen=True)
class Treatment:
    """What a session config fixes: who the associates are, what participants are told, the games' order."""

    associate_type: str  # "human" or a persona's name
    label_setting: str
    game_order: tuple[str, ...]  # game ids, such as ("WC", "WoC")
    code: str  # H-H, H-F, ...
    informed: bool

    @property
    def with_agents(self) -> bool:
        return self.associate_type != HUMAN


@dataclass(frozen=True, eq=False)
class Experiment:
    name: str  # the file's name without .toml; session configs carry it (key "experiment")
    text: str  # the file as written: the record frozen into each session
    design: Design

    # --- the record ----------------------------------------------------------------------------
    @functools.cached_property
    def text_sha256(self) -> str:
        """sha256 of the file's bytes (UTF-8): any edit, a comment's included, changes it; anyone can
        recompute it with `sha256sum` from the frozen text."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @functools.cached_property
    def canonical_hash(self) -> str:
        """sha256 of the design as data (every value, defaults filled in, keys sorted, as JSON): two
        files that differ only in comments, spacing or key order have the same; any value changed
        changes it. The analysis groups sessions of one design by it."""
        data = json.dumps(self.design.model_dump(mode="json"), sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(data.encode("utf-8")).hexdigest()

    def referenced_files(self) -> tuple[str, ...]:
        """Every file the design names (prompts), relative to the project folder, each once."""
        design, found = self.design, []
        for persona in design.personas.values():
            found += persona.roleplay.values()
        if design.agents is not None:
            found += [*design.agents.system_prompt.values(), *design.agents.example_dialogues.values()]
        return tuple(dict.fromkeys(found))

    # --- the game ------------------------------------------------------------------------------
    @property
    def choice_ids(self) -> tuple[str, str]:
        return tuple(choice.id for choice in self.design.game.choices)

    def choice_label(self, choice_id: str, language: str) -> str:
        return next(choice for choice in self.design.game.choices if choice.id == choice_id).label[language]

    @property
    def cooperative_choice(self) -> str | None:
        """The choice the analysis counts as cooperation; None: no cooperation rate."""
        return self.design.game.cooperative_choice

    @functools.cached_property
    def payoff_matrix(self) -> Mapping[tuple[str, str], tuple[float, float]]:
        """(own choice, other's choice) -> (own points, other's points), as protocol.PAYOFFS."""
        payoffs = self.design.game.payoffs
        return {(own, other): tuple(payoffs[own][other]) for own in self.choice_ids for other in self.choice_ids}

    def payoff(self, own: str, other: str) -> float:
        """Points for a player choosing ``own`` against ``other``."""
        return self.payoff_matrix[(own, other)][0]

    @property
    def rounds_per_game(self) -> int:
        return self.design.game.rounds_per_game

    @property
    def game_ids(self) -> tuple[str, ...]:
        """The games as [[games]] lists them: "WC" (with chat) and/or "WoC" (without)."""
        return tuple(game.game_id for game in self.design.games)

    def chat_exchanges(self, game_id: str) -> int:
        return next(game.chat_exchanges for game in self.design.games if game.game_id == game_id)

    def stage_limits(self, game_id: str | None = None) -> dict[str, float]:
        """Seconds per stage, in the order a round runs them: of the game ``game_id`` (its message and
        read stages only with chat), or of every stage of the design (None)."""
        limits = self.design.stage_limits
        stages = coherence.needed_stages(self.design)
        if game_id is not None:
            exchanges = self.chat_exchanges(game_id)
            stages = tuple(stage for stage in stages if not stage[-1].isdigit() or int(stage[-1]) <= exchanges)
        return {stage: getattr(limits, stage) for stage in stages}

    @property
    def message_max_chars(self) -> int | None:
        return self.design.messages.max_chars if self.design.messages else None

    @property
    def agent_message_max_words(self) -> int | None:
        return self.design.messages.agent_max_words if self.design.messages else None

    @property
    def matching(self) -> str:
        return self.design.matching

    @property
    def can_meet_same_associate_again(self) -> bool:
        """The answer to the quiz's "can you meet the same associate twice within one game?"."""
        return self.design.matching != "perfect_strangers"

    def session_size_problem(self, associate_type: str, num_participants: int) -> str | None:
        """Why a session of this size cannot run (its matching cannot pair it), or None."""
        return session_size_problem(self.design, associate_type, num_participants)

    @property
    def least_human_participants(self) -> int:
        return least_human_participants(self.design)

    # --- treatments ----------------------------------------------------------------------------
    @functools.cached_property
    def game_orders(self) -> Mapping[str, tuple[str, ...]]:
        """Order name -> game ids, as protocol.GAME_ORDERS: {"WC-WoC": ("WC", "WoC"), ...}."""
        return {"-".join(order): tuple(order) for order in self.design.treatments.game_orders}

    def treatment_code(self, associate_type: str) -> str:
        """H-H for humans, H-<persona's code> for agents."""
        return "H-" + ("H" if associate_type == HUMAN else self.design.personas[associate_type].code)

    def treatment(self, config: Mapping) -> Treatment:
        """The treatment of a session config (its associate_type, label_setting, game_order); ValueError
        names a value this experiment does not have."""
        t = self.design.treatments
        values = {key: config.get(key) for key in ("associate_type", "label_setting", "game_order")}
        allowed = {"associate_type": t.associate_types, "label_setting": t.label_settings,
                   "game_order": tuple(self.game_orders)}
        for key, value in values.items():
            if value not in allowed[key]:
                raise ValueError(f"Session config '{key}' is {value!r}; experiment {self.name} has "
                                 f"{', '.join(allowed[key])}.")
        return Treatment(values["associate_type"], values["label_setting"], self.game_orders[values["game_order"]],
                         self.treatment_code(values["associate_type"]),
                         self.design.labels[values["label_setting"]].informed)

    def label_setting(self, name: str) -> LabelSetting:
        return self.design.labels[name]

    def associate_words(self, label_setting: str, associate_type: str, language: str) -> str:
        """How participants are told who their associates are ("humans", "intelligent machines", ...)."""
        setting = self.design.labels[label_setting]
        return (setting.human if associate_type == HUMAN else setting.agent)[language]

    # --- personas and agents -------------------------------------------------------------------
    def persona(self, name: str) -> Persona:
        return self.design.personas[name]

    def persona_prompt_name(self, name: str) -> str:
        return self.design.personas[name].prompt_name

    def roleplay_file(self, name: str, language: str) -> str:
        """The persona's role-play prompt file for a session language, relative to the project folder."""
        return self.design.personas[name].roleplay[language]

    # --- texts ---------------------------------------------------------------------------------
    @functools.cached_property
    def text_keys(self) -> Mapping[str, str]:
        """Slot -> the locale key (TOML path) of the text the design shows there (texts.py)."""
        return texts.text_keys(self.design)

    def session_text_keys(self, norm_bonus: float) -> Mapping[str, str]:
        """``text_keys`` of a session whose norm bonus is ``norm_bonus`` (its config's: 0 announces none)."""
        if bool(norm_bonus) == bool(self.design.payment.norm_bonus):
            return self.text_keys
        return texts.text_keys(self.design, norm_bonus)

    def text_key(self, slot: str) -> str:
        """The locale key as the apps look it up (flattened): ``text_key("rules_body")``."""
        return texts.flat_key(self.text_keys[slot])

    def text_params(self, language: str) -> dict[str, str]:
        """The choices' placeholders of the design's texts in ``language``."""
        first, second = self.choice_ids
        params = {"choice_1": self.choice_label(first, language), "choice_2": self.choice_label(second, language)}
        if self.cooperative_choice is not None:
            params["cooperative_choice"] = self.choice_label(self.cooperative_choice, language)
        return params

    # --- session configs -----------------------------------------------------------------------
    @property
    def session_config_prefix(self) -> str:
        prefix = self.design.session_config_prefix
        return f"{self.name}_" if prefix is None else prefix

    def session_configs(self, *, server_language: str | None = None,
                        max_rounds_per_game: int | None = None) -> list[dict]:
        """The oTree session configs of the experiment (configs.py)."""
        return configs.session_configs(self, server_language=server_language, max_rounds_per_game=max_rounds_per_game)


def name_problem(name: str) -> str | None:
    if not re.fullmatch(NAME_PATTERN, name):
        return (f"the file's name {name!r} is not a name session configs can carry: rename the file to lower-case "
                "letters, digits and _, starting with a letter, such as stag_hunt.toml")
    return None


def parse(text: str, name: str, file: str | None = None) -> tuple[Experiment | None, list[Problem]]:
    """The experiment of ``text`` and every problem of its form and coherence (no other file read)."""
    file = file or f"{name}{SUFFIX}"
    problems = []
    if (problem := name_problem(name)) is not None:
        problems.append(Problem(file, "", problem, "design"))
    if text.startswith(BYTE_ORDER_MARK):
        return None, problems + [Problem(file, "", "starts with a byte-order mark (BOM): save it as UTF-8 without "
                                                   "BOM", "toml")]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, problems + [Problem(file, "", f"is not valid TOML: {exc}", "toml")]
    try:
        design = Design.model_validate(data)
    except ValidationError as exc:
        return None, problems + schema_problems(file, exc)
    problems += [Problem(file, field, message, "design") for field, message in coherence.problems(design)]
    return Experiment(name, text, design), problems


@functools.lru_cache(maxsize=64)
@functools.lru_cache(maxsize=64)
def load_text(text: str, name: str) -> Experiment:
    """The experiment of a file's text (as frozen in a session's manifest); ExperimentError lists every
    problem of its form and coherence. Parsed once per text and name (an Experiment is immutable):
    a session's creation asks for it every round, and a changed file is a new text."""
    experiment, problems = parse(text, name)
    if problems:
        raise ExperimentError(problems)
    return experiment


def read_text(path: Path) -> str:
    """The file's text exactly as its bytes (no newline translation: the hash is of the bytes).
    OSError if it cannot be read, ExperimentError if it is not UTF-8."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExperimentError([Problem(str(path), "", f"is not UTF-8 text ({exc.reason} at byte {exc.start}): save "
                                                      "it as UTF-8", "toml")]) from None


def load(path: Path | str) -> Experiment:
    """The experiment of a file; OSError if it cannot be read, ExperimentError for its problems."""
    path = Path(path)
    return load_text(read_text(path), path.stem)


def test_experiments_enabled(environ: Mapping[str, str]) -> bool:
    """Whether a process of this environment reads the tests' experiment files too
    (TEST_EXPERIMENTS_VARIABLE, never in production)."""
    return environ.get(TEST_EXPERIMENTS_VARIABLE) == "1" and environ.get("OTREE_PRODUCTION", "") in ("", "0")


def experiment_files(directory: Path | None = None) -> list[Path]:
    """Every experiment file of ``directory`` (experiments/), by name."""
    return sorted((directory or EXPERIMENTS_DIR).glob(f"*{SUFFIX}"))


def unreadable(path: Path, exc: OSError) -> Problem:
    return Problem(str(path), "", f"cannot be read: {exc.strerror or exc}", UNREADABLE)
