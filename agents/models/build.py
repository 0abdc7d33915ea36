"""Building a model: the provider's adapter inside its layers (``build_model``)."""

from __future__ import annotations

import time
from typing import Optional

from ..config import ConfigError, ModelConfig
from ..types import NO_OPTIONS, CallOptions, CallStatus, LanguageModel, ModelReply, ModelSettings
from .budget import Budget, BudgetedModel, unanswered_cost
from .layers import DeadlineGuard, RateLimitedModel, RetryingModel
from .providers import AnthropicModel, OpenAIChatModel


def model_settings(cfg: ModelConfig) -> ModelSettings:
    """What is sent: Anthropic has no seed, so none is recorded for it."""
    return ModelSettings(provider=cfg.provider, model=cfg.model, temperature=cfg.temperature,
                         max_tokens=cfg.max_tokens, seed=None if cfg.provider == "anthropic" else cfg.seed,
                         context_window=cfg.resolved_context_window(), memory=cfg.memory,
                         grammar=cfg.grammar(), chinese_messages=cfg.requires_chinese(),
                         reasks=cfg.reasks)


def serving_problem(cfg: ModelConfig) -> Optional[str]:
    """Why this process cannot call the model (None: it can): the variable naming its key is not
    set here (openai_compatible names none unless its server needs one)."""
    if cfg.provider != "simulated" and cfg.api_key_env and not cfg.api_key():
        return (f"api_key_env: the environment variable {cfg.api_key_env} is not set "
                f"(provider {cfg.provider!r} needs an API key)")
    return None


class UnavailableModel:
    """A model this process cannot call (``serving_problem``): every call answers ``config_error``
    with the problem at once and sends nothing, so each turn falls back, flagged."""

    def __init__(self, settings: ModelSettings, problem: str) -> None:
        self.settings, self.problem = settings, problem

    async def complete(self, messages, *, deadline: float, options: CallOptions = NO_OPTIONS) -> ModelReply:
        now = time.time()
        return ModelReply(status=CallStatus.CONFIG_ERROR.value, error=self.problem, time_sent=now, time_done=now,
                          retryable=False)


def build_adapter(cfg: ModelConfig) -> LanguageModel:
    """The bare provider adapter (one attempt per call, no limits). Prefer ``build_model``."""
    settings = model_settings(cfg)
    if cfg.provider == "simulated":
        from ..simulated import SimulatedModel

        return SimulatedModel(cfg)
    problem = serving_problem(cfg)
    if problem:
        raise ConfigError(problem)
    if cfg.provider == "anthropic":
        return AnthropicModel(cfg, settings)
    return OpenAIChatModel(cfg, settings)


def build_model(cfg: ModelConfig, *, budget: Optional[Budget] = None,
                charge_unanswered: bool = False) -> LanguageModel:
    """The provider adapter with retries, rate limits, the budget and the deadline guard.

    ``charge_unanswered``: a request sent and never answered is charged to ``budget`` as its
    prompt plus a full reply (``unanswered_cost``) instead of nothing.
    Raises ``ConfigError`` now (at session creation) for a missing API key; everything that can
    go wrong later is a status in a ``ModelReply``.
    """
    model: LanguageModel = build_adapter(cfg)
    if budget is not None:
        # Innermost: checked when the request is sent, not when it joins the queue (a queued call
        # passing a check made before the wait would overshoot the budget by the whole queue).
        model = BudgetedModel(model, budget, estimate=unanswered_cost(cfg) if charge_unanswered else None)
    if cfg.provider != "simulated":  # no provider to protect, nothing that could pass on a retry
        model = RateLimitedModel(model, concurrency=cfg.concurrency, requests_per_minute=cfg.requests_per_minute)
        model = RetryingModel(model, max_retries=cfg.max_retries, base_delay=cfg.retry_base_delay,
                              max_delay=cfg.retry_max_delay)
    return DeadlineGuard(model)
