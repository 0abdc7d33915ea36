"""The tournament engine: every unit (one repeat of one matchup) at once, rounds in order.

Concurrency is bounded where it belongs, inside each provider's model wrapper (concurrency and
requests-per-minute limits of ``agents.models``): the engine just starts everything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tqdm import tqdm

import protocol
from agents.types import CallStatus, TurnKind

from . import design
from .backend import Backend, agents_backend
from .cache import CachedModel, ResponseCache, cache_scope
from .config import SimulationConfig, load_config
from .store import RunStore

# ModelConfig fields that change how fast or where a model is asked, not what it answers.
OPERATIONAL_MODEL_FIELDS = {
    "base_url", "api_key_env", "request_timeout", "max_retries", "retry_base_delay", "retry_max_delay",
    "concurrency", "requests_per_minute", "price_input_per_mtok", "price_output_per_mtok",
    "simulated_latency",
}


ANNOTATION_INPUT_TOKENS, ANNOTATION_OUTPUT_TOKENS = 500, 80


class _BudgetStop(Exception):
    """Inside a run: this unit stops at the budget; calls already in flight still finish."""


class BudgetExhausted(RuntimeError):
    pass


class ProviderConfigError(RuntimeError):
    pass


class BudgetExceeded(RuntimeError):
    """The cost estimate of the remaining games is above what is left of the budget."""


@dataclass
class Plan:
    """What a (re)run will do; printed before anything is sent."""

    games_total: int
    games_done: int
    calls_remaining: int  # first asks; re-asks of malformed replies come on top
    cost_estimate: Optional[float]  # USD for the remaining calls; None when a price is unknown
    spent_before: float  # USD spent by earlier attempts of this run
    budget_left: Optional[float]
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"games: {self.games_total} ({self.games_done} already played)",
                 f"model calls to make: {self.calls_remaining} (+ re-asks of malformed replies)"]
        for label, m in self.per_model.items():
            cost = "unknown price" if m["cost"] is None else f"~${m['cost']:.2f}"
            lines.append(f"  {label}: {m['calls']} calls, {cost}")
        cost = "unknown (a price is missing)" if self.cost_estimate is None else f"~${self.cost_estimate:.2f}"
        lines.append(f"estimated cost: {cost}; spent by earlier attempts: ${self.spent_before:.2f}")
        if self.budget_left is not None:
            lines.append(f"budget left: ${self.budget_left:.2f}")
        return "\n".join(lines)


@dataclass
class RunResult:
    run_dir: Path
    games_played: int  # in this attempt
    games_skipped: int  # finished by earlier attempts
    calls: int
    failures: int
    cache_hits: int
    spent: float  # USD spent by this attempt (cache hits cost nothing)
    play_seconds: float  # wall time of the games (without writing tables and figures)
    outputs: dict[str, Path] = field(default_factory=dict)


def fingerprints(config: SimulationConfig) -> dict[str, str]:
    """Per model, a hash of everything that shapes its answers (not speed limits or URLs)."""
    game_design = config.model_dump(include={"personas", "group_size", "rounds", "self_play", "game",
                                             "language", "seed", "use_stage_limits"})
    result = {}
    for entry in config.models:
        model = {k: v for k, v in entry.config.model_dump(mode="json").items()
                 if k not in OPERATIONAL_MODEL_FIELDS}
        blob = json.dumps({"design": game_design, "model": model}, sort_keys=True, default=str)
        result[entry.label] = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return result


def plan_run(config: SimulationConfig, backend: Backend, store: RunStore) -> Plan:
    done = {r["key"] for r in store.read_games()}
    all_games = [g for u in design.units(config) for r in range(1, config.rounds + 1)
                 for g in design.games_of_round(u, r, config.group_size)]
    per_call = design.calls_per_game(config.game)
    per_model: dict[str, dict[str, Any]] = {}
    for entry in config.models:
        remaining = sum(1 for g in all_games if g.unit.model_label == entry.label and g.key not in done)
        calls = remaining * per_call
        unit_cost = backend.cost_of(entry.config, config.estimated_input_tokens,
                                    config.estimated_output_tokens)
        per_model[entry.label] = {"calls": calls, "cost": None if unit_cost is None else calls * unit_cost}
    if config.annotation is not None and config.game == "WC":
        # One call per new conversation; the prompt is the four messages and the instructions.
        remaining = sum(1 for g in all_games if g.key not in done)
        unit_cost = backend.cost_of(config.annotation.config, ANNOTATION_INPUT_TOKENS, ANNOTATION_OUTPUT_TOKENS)
        per_model[f"annotation ({config.annotation.label})"] = {
            "calls": remaining, "cost": None if unit_cost is None else remaining * unit_cost}
    costs = [m["cost"] for m in per_model.values()]
    spent_before = sum(store.spending().values())
    return Plan(
        games_total=len(all_games),
        games_done=sum(1 for g in all_games if g.key in done),
        calls_remaining=sum(per_model[e.label]["calls"] for e in config.models),
        cost_estimate=None if None in costs else sum(costs),
        spent_before=spent_before,
        budget_left=None if config.budget_usd is None else max(0.0, config.budget_usd - spent_before),
        per_model=per_model,
    )


class _Progress:
    """The progress bar: calls done, failures, tokens, money spent, cache hits."""

    def __init__(self, total_calls: int, budget: Any, models: list[CachedModel], show: bool):
        self.bar = tqdm(total=total_calls, unit="call", disable=not show, dynamic_ncols=True)
        self.budget = budget
        self.models = models
        self.calls = self.failures = self.tokens = 0

    def add(self, turn: Any) -> None:
        self.calls += len(turn.calls)
        self.failures += sum(1 for c in turn.calls if c.status != CallStatus.OK.value)
        self.tokens += sum((c.input_tokens or 0) + (c.output_tokens or 0) for c in turn.calls)
        self.bar.update(len(turn.calls))
        self.bar.set_postfix(failed=self.failures, tokens=self.tokens, cost=f"${self.spent:.2f}",
                             cached=self.cache_hits, refresh=False)

    @property
    def spent(self) -> float:
        return float(self.budget.spent)

    @property
    def cache_hits(self) -> int:
        return sum(m.hits for m in self.models)

    def close(self) -> None:
        self.bar.close()


class Tournament:
    def __init__(self, config: SimulationConfig, backend: Backend, store: RunStore,
                 models: dict[str, CachedModel], progress: _Progress, attempt: str):
        self.config = config
        self.attempt = attempt
        self.backend = backend
        self.store = store
        self.models = models
        self.progress = progress
        # Only keys and each agent's latest state stay in memory: records hold every prompt.
        self.finished: set[str] = set()
        self.latest_states: dict[tuple[str, str, int], tuple[int, dict]] = {}
        for record in store.read_games():
            self.finished.add(record["key"])
            for side, index in (("a", record["pair"]), ("b", record["index_b"])):
                agent = (record["unit"], side, index)
                if self.latest_states.get(agent, (0,))[0] < record["round"]:
                    self.latest_states[agent] = (record["round"], record["states"][side])
        self.games_played = 0
        self.with_communication = config.game == "WC"
        self.budget_spent = False

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tasks:  # one failing unit (bad key) stops all
                for unit in design.units(self.config):
                    tasks.create_task(self.run_unit(unit))
        except ExceptionGroup as group:
            ours = [e for e in group.exceptions if isinstance(e, ProviderConfigError)]
            if ours:
                raise ours[0] from None
            raise
        if self.budget_spent:
            raise BudgetExhausted("the budget is spent; raise budget_usd and rerun to continue")

    async def run_unit(self, unit: design.Unit) -> None:
        """A unit's rounds in order. At the budget it stops quietly, letting the calls already
        sent (and paid) finish into the cache, so that a rerun never pays for them again."""
        agents = self._agents_of(unit)
        for round_number in range(1, self.config.rounds + 1):
            games = [g for g in design.games_of_round(unit, round_number, self.config.group_size)
                     if g.key not in self.finished]
            outcomes = await asyncio.gather(*(self.play(g, agents[("a", g.pair)], agents[("b", g.index_b)])
                                              for g in games), return_exceptions=True)
            if any(isinstance(outcome, _BudgetStop) for outcome in outcomes):
                return
            _raise_first(outcomes)

    def _agents_of(self, unit: design.Unit) -> dict[tuple[str, int], Any]:
        """Fresh agents for a new unit; for a resumed one, each from its latest game."""
        model = self.models[unit.model_label]
        agents = {}
        for side in ("a", "b"):
            persona = unit.matchup.persona_a if side == "a" else unit.matchup.persona_b
            for index in range(self.config.group_size):
                latest = self.latest_states.pop((unit.id, side, index), None)
                if latest is not None:
                    agents[(side, index)] = self.backend.restore_agent(latest[1], model)
                else:
                    agents[(side, index)] = self.backend.new_agent(
                        unit.agent_id(side, index), persona, model, language=self.config.language,
                        with_communication=self.with_communication,
                        seed=stable_int(f"{self.config.seed}|{unit.id}|{side}{index}"))
        return agents

    async def play(self, game: design.Game, agent_a: Any, agent_b: Any) -> None:
        r = game.round_number
        turns: dict[str, list[Any]] = {"a": [], "b": []}

        async def both(kind: TurnKind, call_a, call_b) -> tuple[Any, Any]:
            results = await asyncio.gather(self._turn(game, "a", kind, call_a),
                                           self._turn(game, "b", kind, call_b), return_exceptions=True)
            _raise_first(results)
            turns["a"].append(results[0])
            turns["b"].append(results[1])
            return results

        second_a = second_b = None
        if self.with_communication:
            first_a, first_b = await both(
                TurnKind.MESSAGE_1,
                lambda d: agent_a.message_1(r, deadline=d), lambda d: agent_b.message_1(r, deadline=d))
            second_a, second_b = await both(
                TurnKind.MESSAGE_2,
                lambda d: agent_a.message_2(r, associate_message_1=first_b.text, deadline=d),
                lambda d: agent_b.message_2(r, associate_message_1=first_a.text, deadline=d))
        decision_a, decision_b = await both(
            TurnKind.DECISION,
            lambda d: agent_a.decide(r, associate_message_2=second_b and second_b.text, deadline=d),
            lambda d: agent_b.decide(r, associate_message_2=second_a and second_a.text, deadline=d))
        agent_a.record_outcome(r, decision_a.choice, decision_b.choice)
        agent_b.record_outcome(r, decision_b.choice, decision_a.choice)
        record = {
            "key": game.key, "unit": game.unit.id, "model": game.unit.model_label,
            "matchup": game.unit.matchup.id, "repeat": game.unit.repeat, "round": r,
            "pair": game.pair, "index_b": game.index_b,
            "agent_a": agent_a_id(game), "agent_b": agent_b_id(game),
            "persona_a": game.unit.matchup.persona_a, "persona_b": game.unit.matchup.persona_b,
            "turns": {side: [t.to_dict() for t in ts] for side, ts in turns.items()},
            "states": {"a": agent_a.to_state(), "b": agent_b.to_state()},
            "finished_at": time.time(),
        }
        self.store.append_game(record)
        # Kept up to date so that a hard kill loses no spending from the budget's account.
        self.store.record_spending(self.attempt, self.progress.spent)
        self.finished.add(game.key)
        self.games_played += 1

    async def _turn(self, game: design.Game, side: str, kind: TurnKind, call) -> Any:
        deadline = (time.monotonic() + protocol.STAGE_LIMITS[kind.value]
                    if self.config.use_stage_limits else None)
        with cache_scope(f"{game.key}|{side}|{kind.value}"):
            result = await call(deadline)
        self.progress.add(result)
        statuses = {c.status for c in result.calls}
        if CallStatus.BUDGET.value in statuses or result.fallback_reason == CallStatus.BUDGET.value:
            # The game is not written: a rerun with a larger budget plays it properly.
            self.budget_spent = True
            raise _BudgetStop()
        if CallStatus.CONFIG_ERROR.value in statuses:
            error = next(c.error for c in result.calls if c.status == CallStatus.CONFIG_ERROR.value)
            raise ProviderConfigError(f"{game.unit.model_label}: {error}")
        return result


def _raise_first(outcomes: list) -> None:
    """After a gather with return_exceptions: every sibling has finished; now fail like gather."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def agent_a_id(game: design.Game) -> str:
    return game.unit.agent_id("a", game.pair)


def agent_b_id(game: design.Game) -> str:
    return game.unit.agent_id("b", game.index_b)


def stable_int(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


async def run_tournament(config: SimulationConfig, *, backend: Optional[Backend] = None,
                         show_progress: bool = True, log=print) -> RunResult:
    """Play (or continue) the run of ``config``; write tables and figures when it is complete."""
    from .annotate import annotate_run
    from .figures import write_figures
    from .tables import write_tables

    backend = backend or agents_backend()
    store = RunStore(config.run_dir)
    plan = plan_run(config, backend, store)
    log(plan.describe())
    if (plan.budget_left is not None and plan.cost_estimate is not None
            and plan.cost_estimate > plan.budget_left):
        raise BudgetExceeded(f"estimated ${plan.cost_estimate:.2f} > budget left ${plan.budget_left:.2f}")

    budget = backend.new_budget(plan.budget_left)
    # A missing API key fails here, before anything is written.
    providers = {e.label: backend.build_model(e.config, budget) for e in config.models}
    store.check_fingerprints(fingerprints(config))
    cache = ResponseCache(config.resolved_cache_path)
    models = {label: CachedModel(model, cache, namespace=f"seed={config.seed}")
              for label, model in providers.items()}
    progress = _Progress(plan.calls_remaining, budget, list(models.values()), show_progress)
    attempt = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    tournament = Tournament(config, backend, store, models, progress, attempt)
    started = time.monotonic()
    try:
        await tournament.run()
    finally:
        progress.close()
        store.record_spending(attempt, progress.spent)
        store.close()
        cache.close()
    result = RunResult(config.run_dir, tournament.games_played, plan.games_done, progress.calls,
                       progress.failures, progress.cache_hits, progress.spent, time.monotonic() - started)
    result.outputs.update(write_tables(config, store.read_games(), config.run_dir))
    if config.annotation is not None and config.game == "WC":
        # machine_annotate runs its own event loop: give it a thread.
        result.outputs["annotations"] = await asyncio.to_thread(annotate_run, config, backend.build_model,
                                                                budget)
    result.outputs.update(write_figures(config.run_dir, config.run_dir))
    return result


def run_simulation(config: SimulationConfig | str | Path, **kwargs: Any) -> RunResult:
    """The function API: ``run_simulation("configs/simulation_quick.toml")``."""
    if not isinstance(config, SimulationConfig):
        config = load_config(config)
    return asyncio.run(run_tournament(config, **kwargs))
