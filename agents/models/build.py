"""Building a model: the provider's adapter inside its layers (``build_model``)."""

from __future__ import annotations

from typing import Optional

from ..config import ConfigError, ModelConfig
from ..types import LanguageModel, ModelSettings
from .budget import Budget, BudgetedModel, unanswered_cost
from .layers import DeadlineGuard, RateLimitedModel, RetryingModel
from .providers import AnthropicModel, OpenAIChatModel


def model_settings(cfg: ModelConfig) -> ModelSettings:
    """What is sent: Anthropic has no seed, so none is recorded for it."""
    return ModelSettings(provider=cfg.provider, model=cfg.model, temperature=cfg.temperature,
                         max_tokens=cfg.max_tokens, seed=None if cfg.provider == "anthropic" else cfg.seed,
                         context_window=cfg.resolved_context_window(), memory=cfg.memory,
                         grammar=cfg.grammar(), chinese_messages=cfg.requires_chinese())


def build_adapter(cfg: ModelConfig) -> LanguageModel:
    """The bare provider adapter (one attempt per call, no limits). Prefer ``build_model``."""
    settings = model_settings(cfg)
    if cfg.provider == "simulated":
        from ..simulated import SimulatedModel

        return SimulatedModel(cfg)
    if cfg.api_key_env and not cfg.api_key():  # openai_compatible names none unless its server needs one
        raise ConfigError(f"api_key_env: the environment variable {cfg.api_key_env} is not set "
                          f"(provider {cfg.provider!r} needs an API key)")
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
