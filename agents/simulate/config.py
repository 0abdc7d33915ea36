"""The simulation config: one validated TOML file says what to run.

The models are ``agents.config.ModelConfig`` tables plus an optional ``label`` (the name in
tables and figures), so a simulation selects and limits a provider exactly like the lab does.
The design the agents play is an experiment file's (``experiment``, default the paper's): its
personas, payoffs, rounds, game, message exchanges and matching; the config may narrow the
personas or rounds for a pilot.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import experiment_design as ed


class ModelEntry(BaseModel):
    """One backbone of the run: a label and the agents package's model config."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    label: str
    config: Any  # agents.config.ModelConfig, validated in ``from_table``

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> "ModelEntry":
        from agents.config import ModelConfig

        table = dict(table)
        label = table.pop("label", None) or table.get("model")
        return cls(label=label, config=ModelConfig(**table))


class SimulationConfig(BaseModel):
    """SI Note 4 by default; every number can be changed for a pilot."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(description="run id: the folder under output_dir and the session code prefix")
    output_dir: Path = Path("sim_runs")
    models: list[ModelEntry]
    # The experiment file of the design (checked by load_config); None: the paper's, experiments/paper.toml.
    experiment: Optional[Path] = None
    # Default: the experiment's personas (those of its treatments) and rounds per game.
    personas: Optional[list[str]] = None
    group_size: int = Field(10, ge=1)
    repeats: int = Field(5, ge=1)
    rounds: Optional[int] = Field(None, ge=1)
    self_play: bool = True
    game: Optional[Literal["WC", "WoC"]] = None  # default: the experiment's game with chat, else without
    language: str = "en"  # the agents' language: "en", "zh" (the paper's Chinese chat), or the experiment's
    # What each agent re-sends: "round" (the paper's: this round + the history lines)
    # or "game" (every earlier round too); a model table's own `memory` wins.
    llm_memory: Literal["round", "game"] = "round"
    # The paper's reply format told to the server's sampler, as the lab's
    # llm_constrained_output; a model table's own `constrained_output` wins. auto: probed at the
    # start of the run (agents.models.inspect_server), on where an openai_compatible server obeys.
    llm_constrained_output: Literal["auto", "on", "off"] = "auto"
    seed: int = 0  # part of every cache key: change it to draw fresh samples of the same design
    # Stage limits as in the lab; off by default so that queueing behind a provider's
    # concurrency limit never turns into a timed-out turn.
    use_stage_limits: bool = False
    budget_usd: Optional[float] = Field(None, ge=0)
    # An arm whose agents' decisions were random fallbacks (no usable answer from the model) more
    # often than this makes the run exit 4: its figures count only the decisions the model made.
    max_fallback_share: float = Field(0.2, ge=0, le=1)
    # The stated reply length (tokens) of the cost estimate; the prompts are rendered, not guessed.
    estimated_output_tokens: int = Field(300, ge=0)
    cache_path: Optional[Path] = None  # default: cache.sqlite in the run folder
    # A model that annotates the conversations' agreements (SI Note 2) for Figure S23.
    annotation: Optional[ModelEntry] = None

    @model_validator(mode="before")
    @classmethod
    def _retired_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "estimated_input_tokens" in data:
            raise ValueError("estimated_input_tokens is no longer used: the estimate renders every prompt "
                             "as the agents will send it; remove the key (estimated_output_tokens is "
                             "the stated reply length)")
        return data

    @field_validator("models", mode="before")
    @classmethod
    def _build_models(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [ModelEntry.from_table(v) if isinstance(v, dict) else v for v in value]
        return value

    @field_validator("annotation", mode="before")
    @classmethod
    def _build_annotation_model(cls, value: Any) -> Any:
        return ModelEntry.from_table(value) if isinstance(value, dict) else value

    @functools.cached_property
    def design(self) -> ed.Experiment:
        """The experiment the agents play (the paper's without ``experiment``)."""
        from agents.prompts import paper_experiment

        return paper_experiment() if self.experiment is None else ed.load(self.experiment)

    def payoff(self, own: str, other: str) -> int | float:
        from agents.prompts import points

        return points(self.design.payoff(own, other))

    @property
    def matching(self) -> str:
        return self.design.matching

    @property
    def chat_exchanges(self) -> int:
        return self.design.chat_exchanges(self.game)

    @property
    def cooperative_choice(self) -> Optional[str]:
        """The choice the cooperation rate counts; None: the experiment has none (no cooperation rate)."""
        return self.design.cooperative_choice

    def _from_experiment(self) -> None:
        """The design's values the config leaves out, and the config's checked against the design."""
        from agents import prompts

        experiment = self.design
        known = [p for p in experiment.design.treatments.associate_types if p != ed.HUMAN] \
            or list(experiment.design.personas)
        if self.personas is None:
            self.personas = known
        unknown = [p for p in self.personas if p not in experiment.design.personas]
        if unknown:
            raise ValueError(f"unknown personas {unknown}; known: {known} (experiment {experiment.name})")
        if len(set(self.personas)) != len(self.personas):
            raise ValueError("personas must not repeat")
        if self.rounds is None:
            self.rounds = experiment.rounds_per_game
        if self.game is None:
            self.game = "WC" if "WC" in experiment.game_ids else "WoC"
        elif self.game not in experiment.game_ids:
            raise ValueError(f"game {self.game} is not a game of experiment {experiment.name}: "
                             f"{', '.join(experiment.game_ids)}")
        prompts.check(language=self.language, experiment=experiment)  # ValueError names the languages

    @model_validator(mode="after")
    def _check(self) -> "SimulationConfig":
        if not self.models:
            raise ValueError("at least one model is needed")
        self._from_experiment()
        for entry in self.models:  # the agents read their memory from their model's settings
            if "memory" not in entry.config.model_fields_set:
                entry.config = entry.config.model_copy(update={"memory": self.llm_memory})
            if "constrained_output" not in entry.config.model_fields_set:
                entry.config = entry.config.model_copy(update={"constrained_output": self.llm_constrained_output})
        labels = [m.label for m in self.models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"model labels must be unique: {labels}")
        if self.budget_usd is not None:
            from .estimate import unpriced

            entries = self.models + ([self.annotation] if self.annotation is not None else [])
            missing = [f"{e.label} ({e.config.model})" for e in entries if unpriced(e.config)]
            if missing:
                raise ValueError(
                    f"budget_usd is set but {', '.join(missing)} has no price in agents/prices.toml, so "
                    f"the budget could not hold: give price_input_per_mtok and price_output_per_mtok "
                    f"(USD per million tokens) in its model table, or remove budget_usd")
        if self.rounds > self.group_size and self.matching == "perfect_strangers":
            # The rotation pairs agent i with (i + r) mod group_size: beyond group_size rounds
            # an agent would meet the same associate twice within one matchup.
            raise ValueError("rounds must not exceed group_size (each agent meets any other once)")
        return self

    @property
    def run_dir(self) -> Path:
        return self.output_dir / self.name

    @property
    def resolved_cache_path(self) -> Path:
        return self.cache_path or self.run_dir / "cache.sqlite"


def read_toml(path: str | Path) -> dict:
    """A config file's table; ``agents.config.ConfigError`` (one line) when it cannot be read."""
    from agents.config import ConfigError

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None


def load_config(path: str | Path, **overrides: Any) -> SimulationConfig:
    """Read and validate a TOML config; relative paths in it are relative to the working dir.

    Raises ``agents.config.ConfigError`` with a plain message (file, key, what is wrong), or with
    every problem the experiment file's check finds, one a line."""
    from agents.config import ConfigError

    data = read_toml(path)
    data.update({key: value for key, value in overrides.items() if value is not None})
    if data.get("experiment") is not None:
        problems = ed.check(data["experiment"])
        if problems:
            raise ConfigError("the experiment file has these problems (python -m labserver check-experiment checks "
                              "it):\n" + "\n".join(str(problem) for problem in problems))
    try:
        return SimulationConfig(**data)
    except ValidationError as error:
        raise ConfigError(f"{path}: {describe_errors(error)}") from None


def describe_errors(error: ValidationError) -> str:
    """pydantic's errors as one line per problem: ``key: message``."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)
