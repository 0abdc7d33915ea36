"""The simulation lab: agent-vs-agent tournaments of SI Note 4, and counterfactual replays.

    from agents.simulate import load_config, run_simulation
    result = run_simulation(load_config("configs/simulation_quick.toml"))

See docs/simulation.md.
"""

from .cache import CachedModel, ResponseCache, cache_scope
from .config import SimulationConfig, load_config
from .runner import (BudgetExceeded, BudgetExhausted, Plan, RunResult, plan_run, run_simulation,
                     run_tournament)

__all__ = [
    "BudgetExceeded", "BudgetExhausted", "CachedModel", "Plan", "ResponseCache", "RunResult",
    "SimulationConfig", "cache_scope", "load_config", "plan_run", "run_simulation", "run_tournament",
]
