"""The simulation config: one validated TOML file says what to run.

The models are ``agents.config.ModelConfig`` tables plus an optional ``label`` (the name in
tables and figures), so a simulation selects and limits a provider exactly like the lab does.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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
    seed: int = 0  # part of every cache key: change it to draw fresh samples of the same design
    # Stage limits as in the lab; off by default so that queueing behind a provider's
    # concurrency limit never turns into a timed-out turn.
    use_stage_limits: bool = False
    budget_usd: Optional[float] = Field(None, ge=0)
    # Cost estimate: tokens of one call (prompt with history, and reply).
    estimated_input_tokens: int = Field(1500, ge=0)
    estimated_output_tokens: int = Field(300, ge=0)
    cache_path: Optional[Path] = None  # default: cache.sqlite in the run folder
    # A model that annotates the conversations' agreements (SI Note 2) for Figure S23.
    annotation: Optional[ModelEntry] = None

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
        labels = [m.label for m in self.models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"model labels must be unique: {labels}")
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


def load_config(path: str | Path, **overrides: Any) -> SimulationConfig:
    """Read and validate a TOML config; relative paths in it are relative to the working dir."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    data.update(overrides)
    return SimulationConfig(**data)
