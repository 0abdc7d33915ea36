"""The simulation config: one validated TOML file says what to run.

The models are ``agents.config.ModelConfig`` tables plus an optional ``label`` (the name in
tables and figures), so a simulation selects and limits a provider exactly like the lab does.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import protocol


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
    personas: list[str] = Field(default_factory=lambda: list(protocol.PERSONAS))
    group_size: int = Field(10, ge=1)
    repeats: int = Field(5, ge=1)
    rounds: int = Field(protocol.ROUNDS_PER_GAME, ge=1)
    self_play: bool = True
    game: Literal["WC", "WoC"] = "WC"
    language: Literal["en", "zh"] = "en"
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

    @field_validator("personas")
    @classmethod
    def _known_personas(cls, value: list[str]) -> list[str]:
        unknown = [p for p in value if p not in protocol.PERSONAS]
        if unknown:
            raise ValueError(f"unknown personas {unknown}; known: {list(protocol.PERSONAS)}")
        if len(set(value)) != len(value):
            raise ValueError("personas must not repeat")
        return value

    @model_validator(mode="after")
    def _check(self) -> "SimulationConfig":
        if not self.models:
            raise ValueError("at least one model is needed")
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
        if self.rounds > self.group_size:
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

    Raises ``agents.config.ConfigError`` with a plain message (file, key, what is wrong)."""
    from agents.config import ConfigError

    data = read_toml(path)
    data.update(overrides)
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
