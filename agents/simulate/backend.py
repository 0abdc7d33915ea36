"""What the simulation needs from the agents package, in one place.

The runner talks to models and agents only through a ``Backend``, so tests can swap in a
stand-in and the rest of the package never depends on how ``agents`` builds things.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass
class Backend:
    # (model entry's ModelConfig, budget) -> LanguageModel with retry/concurrency/RPM inside
    build_model: Callable[[Any, Any], Any]
    # limit in USD or None -> an object with ``.spent``
    new_budget: Callable[[Optional[float]], Any]
    # (agent_id, persona, model, language, with_communication, seed[, experiment]) -> agent
    new_agent: Callable[..., Any]
    # (state, model[, experiment]) -> agent
    restore_agent: Callable[[dict, Any], Any]
    # (ModelConfig, input_tokens, output_tokens) -> USD, or None when the price is unknown
    cost_of: Callable[[Any, int, int], Optional[float]]
    # ModelConfig -> the ModelSettings its model sends (part of every cache key), without
    # building a client (estimates need no API key). None: ``build_model(cfg, None).settings``.
    settings_of: Optional[Callable[[Any], Any]] = None


def agents_backend() -> Backend:
    """The real thing: ``agents.models`` and ``agents.agent``."""
    from agents.agent import PersonaAgent
    from agents.models import Budget, build_adapter, build_model, model_settings

    def settings_of(cfg):
        # The offline model records its own settings; the others send model_settings(cfg).
        return build_adapter(cfg).settings if cfg.provider == "simulated" else model_settings(cfg)

    def new_agent(agent_id, persona, model, *, language, with_communication, seed, experiment=None):
        return PersonaAgent(agent_id, persona, model, language=language,
                            with_communication=with_communication, seed=seed, experiment=experiment)

    return Backend(
        build_model=lambda cfg, budget: build_model(cfg, budget=budget),
        new_budget=lambda limit: Budget(limit),
        new_agent=new_agent,
        restore_agent=PersonaAgent.from_state,
        cost_of=lambda cfg, input_tokens, output_tokens: cfg.cost(input_tokens, output_tokens),
        settings_of=settings_of,
    )
