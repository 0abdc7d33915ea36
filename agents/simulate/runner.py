"""A simulation run: its plan, then its tournament, tables, figures and annotations.

``run_tournament`` prints the plan first (``estimate_plan``: the remaining games played dry
against estimating models, see estimate.py), refuses a run whose estimate is above the budget
left, then plays the games (agents/simulate/tournament.py) and writes what the run produced.
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

from . import design
from .backend import Backend, agents_backend
from .cache import CachedModel, ResponseCache, current_cache_scope
from .config import SimulationConfig, load_config
from .estimate import (EstimatingModel, ModelEstimate, Tally, current_tally, describe_overshoot,
                       price_source)
from .store import RunStore
from .tournament import Tournament, _Progress

# ModelConfig fields that change how fast or where a model is asked, not what it answers.
OPERATIONAL_MODEL_FIELDS = {
    "base_url", "api_key_env", "request_timeout", "max_retries", "retry_base_delay", "retry_max_delay",
    "concurrency", "requests_per_minute", "price_input_per_mtok", "price_output_per_mtok",
    "simulated_latency",
}


ANNOTATION_INPUT_TOKENS, ANNOTATION_OUTPUT_TOKENS = 500, 80


class BudgetExhausted(RuntimeError):
    pass


class BudgetExceeded(RuntimeError):
    """The cost estimate of the remaining games is above what is left of the budget."""


@dataclass
class Plan:
    """What a (re)run will do; printed before anything is sent."""

    games_total: int
    games_done: int
    calls_remaining: int  # first asks not served by the cache; re-asks come on top
    cost_estimate: Optional[float]  # USD for the remaining calls; None when a price is unknown
    spent_before: float  # USD spent by earlier attempts of this run
    budget_left: Optional[float]
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    games_to_retry: int = 0  # written with provider failures by earlier attempts
    cache_hits: int = 0  # first asks the cache will serve
    reply_tokens: int = 0
    estimates: list[ModelEstimate] = field(default_factory=list)

    replay: bool = False  # a counterfactual replay: rounds, not games

    def describe(self) -> str:
        first = (f"replayed rounds: {self.games_total} (recorded rounds x models)" if self.replay else
                 f"games: {self.games_total} ({self.games_done} already played"
                 + (f", {self.games_to_retry} to play again after provider failures" if self.games_to_retry else "")
                 + ")")
        lines = [first,
                 f"model calls to make: {self.calls_remaining} (+ re-asks of malformed replies)"
                 + (f"; {self.cache_hits} more served from the cache" if self.cache_hits else ""),
                 f"estimate: the prompts as the agents will render them, replies of {self.reply_tokens} tokens"]
        for label, m in self.per_model.items():
            cost = "unknown price" if m["cost"] is None else f"~${m['cost']:.2f}"
            tokens = (f", {m['input_tokens']:,} tokens in (largest prompt {m['max_input_tokens']:,}), "
                      f"{m['output_tokens']:,} out" if "input_tokens" in m else "")
            source = f" [prices: {m['price_source']}]" if m.get("price_source") else ""
            lines.append(f"  {label}: {m['calls']} calls{tokens}, {cost}{source}")
        cost = "unknown (a price is missing)" if self.cost_estimate is None else f"~${self.cost_estimate:.2f}"
        lines.append(f"estimated cost: {cost}; spent by earlier attempts: ${self.spent_before:.2f}")
        if self.budget_left is not None:
            overshoot = describe_overshoot(self.estimates)
            lines.append(f"budget left: ${self.budget_left:.2f}" + (f"; {overshoot}" if overshoot else ""))
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
    games_excluded: int = 0  # of the design, not in the tables: failed, or waiting for a failed one
    games_failed: int = 0  # of those, written with provider failures (a rerun plays them again)
    plan: Optional[Plan] = None
    actual: dict[str, dict[str, Any]] = field(default_factory=dict)  # per model, calls not from the cache
    fallbacks: dict[str, tuple[int, int]] = field(default_factory=dict)  # per arm: (random fallbacks, decisions)
    max_fallback_share: float = 0.2

    def fallback_lines(self) -> list[str]:
        """Per arm: the decisions its model made (what the tables and figures count) and the random
        fallbacks left out, marked where they are more than ``max_fallback_share``."""
        lines = []
        for arm, (fell, total) in self.fallbacks.items():
            share = fell / total if total else 0.0
            over = (f": more than max_fallback_share {self.max_fallback_share:.0%}, not the model's behaviour"
                    if share > self.max_fallback_share else "")
            lines.append(f"{arm}: {total - fell} decisions made by the model counted; {fell} of {total} ({share:.0%}) "
                         f"were random fallbacks, left out{over}")
        return lines

    def fallbacks_exceeded(self) -> list[str]:
        return [arm for arm, (fell, total) in self.fallbacks.items()
                if total and fell / total > self.max_fallback_share]

    def excluded_line(self) -> Optional[str]:
        if not self.games_excluded:
            return None
        return (f"games excluded: {self.games_excluded} of {self.plan.games_total if self.plan else '?'} "
                f"are not in the tables and figures ({self.games_failed} with provider failures, "
                f"{self.games_excluded - self.games_failed} not played after them in their repeat); "
                f"rerun the same command to play them")

    def estimate_vs_actual(self) -> list[str]:
        """Per model: estimated vs actual calls, tokens and cost of the calls not served from the cache."""
        if self.plan is None:
            return []
        lines = ["estimated vs actual (calls not served from the cache):"]
        for label, actual in self.actual.items():
            planned = self.plan.per_model.get(label, {})
            est_cost = planned.get("cost")
            lines.append(
                f"  {label}: calls {planned.get('calls', 0)} vs {actual['calls']}; "
                f"tokens in {planned.get('input_tokens', 0):,} vs {actual['input_tokens']:,}; "
                f"out {planned.get('output_tokens', 0):,} vs {actual['output_tokens']:,}; "
                f"cost {'unknown' if est_cost is None else f'${est_cost:.4f}'} vs ${actual['cost']:.4f}")
        return lines


def fingerprints(config: SimulationConfig) -> dict[str, str]:
    """Per model, a hash of everything that shapes its answers (not speed limits or URLs)."""
    game_design = config.model_dump(include={"personas", "group_size", "rounds", "self_play", "game",
                                             "language", "seed", "use_stage_limits"})
    if config.experiment is not None:  # the paper's runs keep the fingerprints they had
        game_design["experiment"] = config.design.canonical_hash
    result = {}
    for entry in config.models:
        model = {k: v for k, v in entry.config.model_dump(mode="json").items()
                 if k not in OPERATIONAL_MODEL_FIELDS}
        blob = json.dumps({"design": game_design, "model": model}, sort_keys=True, default=str)
        result[entry.label] = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return result


EXPERIMENT_RECORD = "experiment.json"


def write_experiment_record(config: SimulationConfig) -> Path:
    """The run's experiment in its folder: name, title, both hashes and the file's text as it ran."""
    experiment = config.design
    path = config.run_dir / EXPERIMENT_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"name": experiment.name, "title": experiment.design.title,
              "file": None if config.experiment is None else str(config.experiment),
              "text_sha256": experiment.text_sha256, "canonical_hash": experiment.canonical_hash,
              "cooperative_choice": experiment.cooperative_choice, "matching": experiment.matching,
              "game": config.game, "chat_exchanges": config.chat_exchanges, "text": experiment.text}
    path.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def _settings_of(backend: Backend, cfg: Any) -> Any:
    """What the real model will send (its settings are part of every cache key)."""
    if backend.settings_of is not None:
        return backend.settings_of(cfg)
    return backend.build_model(cfg, None).settings


def _all_games(config: SimulationConfig) -> list[design.Game]:
    return [g for u in design.units(config) for r in range(1, config.rounds + 1)
            for g in design.games_of_round(u, r, config.group_size, config.matching, config.seed)]


async def estimate_plan(config: SimulationConfig, backend: Backend, store: RunStore) -> Plan:
    """The plan of a (re)run, its estimate from the remaining games played dry (see estimate.py)."""
    done = {r["key"] for r in store.read_games()}
    failed = {r["key"] for r in store.read_games(failed=True) if r.get("failed")} - done
    all_games = _all_games(config)
    cache = ResponseCache(config.resolved_cache_path, read_only=True)
    try:
        stored = cache.stored_scopes()
        estimates = await _dry_run(config, backend, store, cache, set(stored.get(f"seed={config.seed}", ())))
    finally:
        cache.close()
    cached_annotations = sum(stored.get("annotation", {}).values())
    per_model: dict[str, dict[str, Any]] = {}
    for e in estimates:
        per_model[e.label] = {"calls": e.tally.calls, "cost": e.cost, "input_tokens": e.tally.input_tokens,
                              "output_tokens": e.tally.output_tokens, "max_input_tokens": e.tally.max_input_tokens,
                              "cache_hits": e.tally.cache_hits, "price_source": e.price_source}
    if config.annotation is not None and config.game == "WC":
        # One call per conversation (all are annotated again; the cache serves the earlier ones).
        remaining = max(0, len(all_games) - cached_annotations)
        unit_cost = backend.cost_of(config.annotation.config, ANNOTATION_INPUT_TOKENS, ANNOTATION_OUTPUT_TOKENS)
        label = f"annotation ({config.annotation.label})"
        per_model[label] = {
            "calls": remaining, "cost": None if unit_cost is None else remaining * unit_cost,
            "price_source": price_source(config.annotation.config)}
        dearest = backend.cost_of(config.annotation.config, ANNOTATION_INPUT_TOKENS,
                                  getattr(config.annotation.config, "max_tokens", ANNOTATION_OUTPUT_TOKENS))
        estimates.append(ModelEstimate(label, Tally(), per_model[label]["price_source"],
                                       dearest_call=dearest if remaining else 0.0,
                                       concurrency=getattr(config.annotation.config, "concurrency", 1) or 1))
    costs = [m["cost"] for m in per_model.values()]
    spent_before = store.spent()
    return Plan(
        games_total=len(all_games),
        games_done=sum(1 for g in all_games if g.key in done),
        calls_remaining=sum(per_model[e.label]["calls"] for e in config.models),
        cost_estimate=None if None in costs else sum(costs),
        spent_before=spent_before,
        budget_left=None if config.budget_usd is None else max(0.0, config.budget_usd - spent_before),
        per_model=per_model,
        games_to_retry=sum(1 for g in all_games if g.key in failed),
        cache_hits=sum(e.tally.cache_hits for e in estimates if e.label in {m.label for m in config.models}),
        reply_tokens=config.estimated_output_tokens,
        estimates=estimates,
    )


def plan_run(config: SimulationConfig, backend: Backend, store: RunStore) -> Plan:
    """``estimate_plan`` outside an event loop (``--estimate``, tests)."""
    return asyncio.run(estimate_plan(config, backend, store))


class _NoProgress:
    calls = failures = tokens = cache_hits = 0
    spent = 0.0

    def add(self, turn: Any) -> None:
        pass


class _DryStore:
    """The run's store for reading; writes nothing."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    def read_games(self, **kwargs: Any):
        return self._store.read_games(**kwargs)

    def append_game(self, record: dict[str, Any]) -> None:
        pass


async def _dry_run(config: SimulationConfig, backend: Backend, store: RunStore, cache: ResponseCache,
                   cached_scopes: set[str]) -> list[ModelEstimate]:
    """The remaining games against estimating models (estimate.py); per model, what they cost."""
    namespace = f"seed={config.seed}"
    models, estimates = {}, []
    for entry in config.models:
        cfg = entry.config
        stand_in = EstimatingModel(_settings_of(backend, cfg), config.estimated_output_tokens,
                                   lambda i, o, cfg=cfg: backend.cost_of(cfg, i, o))
        models[entry.label] = CachedModel(stand_in, cache, namespace=namespace, read_only=True)
        estimates.append(ModelEstimate(entry.label, price_source=price_source(cfg),
                                       concurrency=getattr(cfg, "concurrency", 1) or 1))
    # A scope is "<game key>|<side>|<turn>", a game key "<unit id>|r<round>|p<pair>".
    cached_units = {scope.rsplit("|", 4)[0] for scope in cached_scopes}
    tournament = _DryTournament(config, backend, _DryStore(store), models, _NoProgress(), "estimate")
    tournament.cached_units = cached_units
    await tournament.run()
    by_label = {e.label: e for e in estimates}
    for label, tally in tournament.model_tallies().items():
        by_label[label].tally = tally
    for entry in config.models:
        e = by_label[entry.label]
        e.tally.cache_hits = models[entry.label].hits
        if e.tally.calls:
            max_tokens = getattr(entry.config, "max_tokens", config.estimated_output_tokens)
            e.dearest_call = backend.cost_of(entry.config, e.tally.max_input_tokens, max_tokens)
        else:
            e.dearest_call = 0.0
    return estimates


class _DryTournament(Tournament):
    """The tournament played against estimating models (estimate.py): counts, sends nothing.

    Units that start fresh and have nothing in the cache play alike: one per model and matchup
    is played, and counted for all of them."""

    cached_units: set[str] = set()

    def units_to_run(self) -> list[design.Unit]:
        self.tallies: list[tuple[str, Tally, int]] = []  # (model label, tally, units it stands for)
        started = ({key.rsplit("|", 2)[0] for key in self.finished}
                   | {unit_id for (unit_id, _, _) in self.latest_states} | self.cached_units)
        self.weights: dict[str, int] = {}
        representative: dict[tuple[str, str], str] = {}
        for unit in design.units(self.config):
            if unit.id in started:
                self.weights[unit.id] = 1
                continue
            kind = (unit.model_label, unit.matchup.id)
            representative.setdefault(kind, unit.id)
            self.weights[representative[kind]] = self.weights.get(representative[kind], 0) + 1
        return [u for u in design.units(self.config) if u.id in self.weights]

    async def run_unit(self, unit: design.Unit) -> None:
        tally = Tally()
        current_tally.set(tally)  # this task's own context: the unit's calls count here
        await super().run_unit(unit)
        self.tallies.append((unit.model_label, tally, self.weights[unit.id]))

    def model_tallies(self) -> dict[str, Tally]:
        totals: dict[str, Tally] = {}
        for label, tally, times in self.tallies:
            totals.setdefault(label, Tally()).merge(tally, times)
        return totals


def resolve_constrained_output(config: SimulationConfig, log=print) -> None:
    """Each model's ``constrained_output`` as the lab's model check resolves it: auto is probed
    once per openai_compatible server (the grammar it obeys), off for every other provider."""
    from agents.models import inspect_server, resolve_constrained_output as resolve

    for entry in config.models:
        cfg = entry.config
        inspection = None
        if cfg.provider == "openai_compatible" and cfg.constrained_output != "off":
            inspection = inspect_server(cfg)
            log(f"{entry.label}: grammar {inspection.grammar_format or 'none'} ({'; '.join(inspection.notes)})")
            if cfg.constrained_output == "on" and inspection.grammar_format is None:
                raise ValueError(f"{entry.label}: constrained_output is on, but {cfg.base_url} obeyed no grammar")
        if cfg.provider != "simulated":
            entry.config = resolve(cfg, inspection)


async def run_tournament(config: SimulationConfig, *, backend: Optional[Backend] = None,
                         show_progress: bool = True, log=print) -> RunResult:
    """Play (or continue) the run of ``config``; write tables and figures when it is complete."""
    from .annotate import annotate_run
    from .figures import write_figures
    from .tables import decision_fallbacks, write_tables

    backend = backend or agents_backend()
    resolve_constrained_output(config, log)
    store = RunStore(config.run_dir)
    plan = await estimate_plan(config, backend, store)
    log(plan.describe())
    if (plan.budget_left is not None and plan.cost_estimate is not None
            and plan.cost_estimate > plan.budget_left):
        raise BudgetExceeded(f"estimated ${plan.cost_estimate:.2f} > budget left ${plan.budget_left:.2f}")

    budget = backend.new_budget(plan.budget_left)
    # A missing API key fails here, before anything is written.
    providers = {e.label: backend.build_model(e.config, budget) for e in config.models}
    store.check_fingerprints(fingerprints(config))
    cache = ResponseCache(config.resolved_cache_path)
    attempt = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]

    def spending_log(label: str):
        return lambda reply: store.record_call(attempt, label, reply, current_cache_scope())

    models = {label: CachedModel(model, cache, namespace=f"seed={config.seed}", on_reply=spending_log(label))
              for label, model in providers.items()}
    progress = _Progress(plan.calls_remaining, budget, list(models.values()), show_progress)
    tournament = Tournament(config, backend, store, models, progress, attempt)
    started = time.monotonic()
    try:
        await tournament.run()
    finally:
        progress.close()
        store.close()
        cache.close()
    result = RunResult(config.run_dir, tournament.games_played, plan.games_done, progress.calls,
                       progress.failures, progress.cache_hits, progress.spent, time.monotonic() - started,
                       plan=plan)
    result.actual = {label: {"calls": m.misses, "input_tokens": m.sent_input_tokens,
                             "output_tokens": m.sent_output_tokens, "cost": m.sent_cost}
                     for label, m in models.items()}
    finished = {r["key"] for r in store.read_games()}
    failed = {r["key"] for r in store.read_games(failed=True) if r.get("failed")} - finished
    all_keys = [g.key for g in _all_games(config)]
    result.games_excluded = sum(1 for k in all_keys if k not in finished)
    result.games_failed = sum(1 for k in all_keys if k in failed)
    for line in result.estimate_vs_actual():
        log(line)
    result.outputs["experiment"] = write_experiment_record(config)
    result.outputs.update(write_tables(config, store.read_games(failed=True), config.run_dir))
    result.fallbacks = decision_fallbacks(result.outputs.get("decisions"))
    result.max_fallback_share = config.max_fallback_share
    try:
        if config.annotation is not None and config.game == "WC":
            # machine_annotate runs its own event loop: give it a thread.
            result.outputs["annotations"] = await asyncio.to_thread(
                annotate_run, config, backend.build_model, budget, spending_log(f"annotation ({config.annotation.label})"))
    finally:
        store.close()
    result.outputs.update(write_figures(config.run_dir, config.run_dir, model_order=[m.label for m in config.models],
                                        games_excluded=result.games_excluded,
                                        cooperative_choice=config.cooperative_choice))
    if config.cooperative_choice is None:
        log(f"no cooperation rate: experiment {config.design.name} names no cooperative choice (no Figure S22)")
    for line in result.fallback_lines():
        log(line)
    if result.excluded_line():
        log(result.excluded_line())
    if tournament.budget_spent:
        raise BudgetExhausted(f"the budget is spent (${store.spent():.4f} of ${config.budget_usd:.2f}); "
                              f"raise budget_usd and rerun to continue")
    return result


def run_simulation(config: SimulationConfig | str | Path, **kwargs: Any) -> RunResult:
    """The function API: ``run_simulation("configs/simulation_quick.toml")``."""
    if not isinstance(config, SimulationConfig):
        config = load_config(config)
    return asyncio.run(run_tournament(config, **kwargs))
