"""The similarity testbed's config: one validated TOML file says what to run.

Models are ``agents.config.ModelConfig`` tables plus a ``label`` (read through the simulation
lab's ``ModelEntry``), so a run selects, limits and prices providers exactly like the lab. A
model with ``provider = "simulated"`` is this package's offline similarity model and takes a
``[models.similarity_response]`` table (see ``SimilarityResponse``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .threshold import PrisonersDilemma, PublicGoodsGame

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_QUESTIONS = PACKAGE_DIR / "questions.toml"

Framing = Literal["similar", "dissimilar", "noise"]
EndogenousView = Literal["answers", "answers_and_reasoning"]


class SimilarityResponse(BaseModel):
    """How the offline simulated model answers: P(cooperate) as a function of the stated score.

    Logistic in the similarity s (percent): 1 / (1 + exp(−slope·(s − midpoint))), or, when
    ``table`` is given, linear interpolation in that {percent: probability} table.
    """

    model_config = ConfigDict(extra="forbid")

    midpoint: float = 65.0
    slope: float = Field(0.2, ge=0)
    table: Optional[dict[float, float]] = None
    baseline_cooperation: float = Field(0.02, ge=0, le=1)  # no similarity signal at all
    # Multiplies P(cooperate) under the "X % different" framing: 1 = reads it as 100 − X similar.
    dissimilar_scale: float = Field(1.0, ge=0, le=1)
    # How much a score disclosed as random noise moves it: 0 = ignores it, 1 = like a real score.
    noise_weight: float = Field(0.0, ge=0, le=1)
    pgg_scale: float = Field(0.6, ge=0, le=1)  # multiplies P(contribute) in the public goods game
    # Questions: probability of the "common" answer (shared by all simulated models), else random.
    common_answer_rate: float = Field(0.6, ge=0, le=1)
    # Endogenous rating = 100 × agreement with its own answers + this bias (overrating > 0).
    rating_bias: float = 15.0

    @field_validator("table")
    @classmethod
    def _probabilities(cls, value: Optional[dict[float, float]]) -> Optional[dict[float, float]]:
        if value is not None:
            if len(value) < 2 or not all(0 <= p <= 1 for p in value.values()):
                raise ValueError("table needs >= 2 points with probabilities in [0, 1]")
        return value


class ModelSpec(BaseModel):
    """One model of the run: label (name in tables), the agents package's config table, and
    for the simulated provider its similarity response."""

    model_config = ConfigDict(extra="forbid")

    label: str
    table: dict[str, Any]
    similarity_response: Optional[SimilarityResponse] = None

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> "ModelSpec":
        table = dict(table)
        response = table.pop("similarity_response", None)
        label = table.pop("label", None) or table.get("model")
        if not label:
            raise ValueError(f"a model needs a label or a model name: {table}")
        if table.get("provider") == "simulated":
            response = SimilarityResponse(**(response or {}))
        elif response is not None:
            raise ValueError(f"{label}: similarity_response is for provider = 'simulated' only")
        return cls(label=label, table=table, similarity_response=response)

    @property
    def is_simulated(self) -> bool:
        return self.table.get("provider") == "simulated"


def _model_specs(value: Any) -> Any:
    if isinstance(value, list):
        return [ModelSpec.from_table(v) if isinstance(v, dict) else v for v in value]
    if isinstance(value, dict):
        return ModelSpec.from_table(value)
    return value


class PayoffTable(BaseModel):
    """R, S, T, P of the prisoner's dilemma; omitted = the paper's table from protocol.py."""

    model_config = ConfigDict(extra="forbid")

    R: float
    S: float
    T: float
    P: float

    def game(self) -> PrisonersDilemma:
        return PrisonersDilemma(R=self.R, S=self.S, T=self.T, P=self.P)


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: float = Field(10.0, gt=0, le=100)  # percent between sweep points, from 0 to 100
    framings: list[Framing] = Field(default_factory=lambda: ["similar", "dissimilar", "noise"])
    baseline: bool = True  # the no-signal condition

    def scores(self) -> list[float]:
        points, score = [], 0.0
        while score < 100.0 - 1e-9:
            points.append(round(score, 6))
            score += self.step
        return points + [100.0]


class GroundingConfig(BaseModel):
    """Exogenous (agreement on the question set) and endogenous (rated) similarity, each fed
    into a game between the two models."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    questions_path: Path = DEFAULT_QUESTIONS
    answer_samples: int = Field(2, ge=2)  # >= 2 so a model's agreement with itself is defined
    pairs: Literal["all", "cross", "self"] = "all"
    endogenous_views: list[EndogenousView] = Field(
        default_factory=lambda: ["answers", "answers_and_reasoning"]
    )
    rating_samples: int = Field(1, ge=1)


class JudgeCategory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str


class JudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    model: Optional[ModelSpec] = None
    categories: list[JudgeCategory] = Field(default_factory=list)
    max_decisions: Optional[int] = Field(None, ge=1)  # a seeded sample caps the judge's cost

    @field_validator("model", mode="before")
    @classmethod
    def _build_model(cls, value: Any) -> Any:
        return _model_specs(value)

    @model_validator(mode="after")
    def _check(self) -> "JudgeConfig":
        if self.enabled:
            if self.model is None:
                raise ValueError("judge.model is needed when the judge is enabled")
            if not self.categories:
                raise ValueError("judge.categories must list the justification categories")
            names = [c.name for c in self.categories]
            if len(set(names)) != len(names):
                raise ValueError(f"judge category names must be unique: {names}")
        return self


class PublicGoodsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    players: int = Field(3, ge=2)
    multiplier: float = 2.0
    endowment: float = Field(20.0, gt=0)
    step: float = Field(20.0, gt=0, le=100)
    framings: list[Framing] = Field(default_factory=lambda: ["similar"])
    baseline: bool = True
    groups: Optional[int] = Field(None, ge=1)  # groups per point; default: the run's samples

    def game(self) -> PublicGoodsGame:
        return PublicGoodsGame(self.players, self.multiplier, self.endowment)

    def scores(self) -> list[float]:
        return SweepConfig(step=self.step).scores()


class SimilarityConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    samples: int = Field(10, ge=1)  # per point and model
    # every player's temperature; "per_model" = each model's own (its table or provider default)
    temperature: Union[float, Literal["per_model"]] = 1.0
    seed: int = 0  # part of every cache key: change it to draw fresh samples
    call_timeout_s: float = Field(180.0, gt=0)
    cache: bool = True
    cache_path: Optional[Path] = None  # default: cache.sqlite in the output folder
    budget_usd: Optional[float] = Field(None, ge=0)
    models: list[ModelSpec]
    payoffs: Optional[PayoffTable] = None
    sweep: SweepConfig = Field(default_factory=SweepConfig)
    grounding: GroundingConfig = Field(default_factory=GroundingConfig)
    judge: JudgeConfig = Field(default_factory=lambda: JudgeConfig(enabled=False))
    public_goods: PublicGoodsConfig = Field(default_factory=PublicGoodsConfig)

    @field_validator("models", mode="before")
    @classmethod
    def _build_models(cls, value: Any) -> Any:
        return _model_specs(value)

    @model_validator(mode="after")
    def _check(self) -> "SimilarityConfig":
        if not self.models:
            raise ValueError("at least one model is needed")
        if isinstance(self.temperature, float) and not 0 <= self.temperature <= 2:
            raise ValueError("temperature must be in [0, 2] or \"per_model\"")
        labels = [m.label for m in self.models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"model labels must be unique: {labels}")
        self.pd_game()  # raises if the payoffs are not a prisoner's dilemma
        if self.public_goods.enabled:
            self.public_goods.game()
        if self.budget_usd is not None:
            self._check_prices()
        return self

    def _check_prices(self) -> None:
        """A budget cannot hold when a call's cost is unknown: every model needs a price."""
        from agents.config import ModelConfig

        specs = list(self.models) + ([self.judge.model] if self.judge.enabled and self.judge.model else [])
        missing = []
        for spec in specs:
            try:
                prices = ModelConfig.build(**spec.table).prices()
            except ValueError:
                continue  # the model's own error is reported when it is built
            if None in prices:
                missing.append(f"{spec.label} ({spec.table.get('model', '')})")
        if missing:
            raise ValueError(f"budget_usd is set but {', '.join(missing)} has no price in agents/prices.toml, "
                             f"so the budget could not hold: give price_input_per_mtok and "
                             f"price_output_per_mtok (USD per million tokens) in its model table, or "
                             f"remove budget_usd")

    def pd_game(self) -> PrisonersDilemma:
        return self.payoffs.game() if self.payoffs else PrisonersDilemma.from_protocol()


def load_config(path: str | Path) -> SimilarityConfig:
    """Read and validate a TOML config; ``agents.config.ConfigError`` (one line) when it cannot."""
    from agents.config import ConfigError
    from agents.simulate.config import describe_errors, read_toml

    data = read_toml(path)
    try:
        return SimilarityConfig(**data)
    except ValidationError as error:
        raise ConfigError(f"{path}: {describe_errors(error)}") from None
