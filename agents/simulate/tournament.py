"""The tournament engine: every unit (one repeat of one matchup) at once, rounds in order.

Concurrency is bounded where it belongs, inside each provider's model wrapper (concurrency and
requests-per-minute limits of ``agents.models``): the engine just starts everything. A game whose
turn got no answer from the model (``PROVIDER_FAILURES``) is written as failed, not as a result.
What a run plans, plays and writes around it: agents/simulate/runner.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from tqdm import tqdm

import protocol
from agents.types import CallStatus, TurnKind

from . import design
from .backend import Backend
from .cache import CachedModel, cache_scope
from .config import SimulationConfig
from .store import RunStore

# A turn that fell back for one of these reasons did not get an answer from the model: its game
# is not a result. It is kept out of the tables and played again by a rerun.
PROVIDER_FAILURES = {CallStatus.PROVIDER_ERROR.value, CallStatus.TIMEOUT.value, CallStatus.RATE_LIMITED.value,
                     CallStatus.BUDGET.value, CallStatus.CANCELLED.value, CallStatus.CONFIG_ERROR.value}


class ProviderConfigError(RuntimeError):
    pass


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
        self.games_failed = 0
        self.with_communication = config.game == "WC"
        self.chat_exchanges = config.chat_exchanges
        # The paper's agents are made as before; another experiment's know it (prompts, payoffs).
        self.experiment = {} if config.experiment is None else {"experiment": config.design}
        # With the lab's stage limits a turn that runs out of its stage falls back as in the lab
        # (the stage's random choice, no message): part of the result, as a late agent's turn is
        # in a session; without them a timeout is the provider's failure and the game is replayed.
        self.failure_reasons = (PROVIDER_FAILURES - {CallStatus.TIMEOUT.value} if config.use_stage_limits
                                else PROVIDER_FAILURES)
        self.budget_spent = False

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tasks:  # one failing unit (bad key) stops all
                for unit in self.units_to_run():
                    tasks.create_task(self.run_unit(unit))
        except ExceptionGroup as group:
            ours = [e for e in group.exceptions if isinstance(e, ProviderConfigError)]
            if ours:
                raise ours[0] from None
            raise

    def units_to_run(self) -> list[design.Unit]:
        return design.units(self.config)

    async def run_unit(self, unit: design.Unit) -> None:
        """A unit's rounds in order. After a round in which a game failed (provider errors, the
        budget) the unit stops: its agents' next rounds would build on a turn that never got an
        answer. Calls already sent finish into the cache, so a rerun never pays for them again."""
        agents = self._agents_of(unit)
        for round_number in range(1, self.config.rounds + 1):
            games = [g for g in design.games_of_round(unit, round_number, self.config.group_size,
                                                      self.config.matching, self.config.seed)
                     if g.key not in self.finished]
            outcomes = await asyncio.gather(*(self.play(g, agents[("a", g.pair)], agents[("b", g.index_b)])
                                              for g in games), return_exceptions=True)
            _raise_first(outcomes)
            if not all(outcomes):
                return

    def _agents_of(self, unit: design.Unit) -> dict[tuple[str, int], Any]:
        """Fresh agents for a new unit; for a resumed one, each from its latest game."""
        model = self.models[unit.model_label]
        agents = {}
        for side in ("a", "b"):
            persona = unit.matchup.persona_a if side == "a" else unit.matchup.persona_b
            for index in range(self.config.group_size):
                latest = self.latest_states.pop((unit.id, side, index), None)
                if latest is not None:
                    agents[(side, index)] = self.backend.restore_agent(latest[1], model, **self.experiment)
                else:
                    agents[(side, index)] = self.backend.new_agent(
                        unit.agent_id(side, index), persona, model, language=self.config.language,
                        with_communication=self.with_communication,
                        seed=stable_int(f"{self.config.seed}|{unit.id}|{side}{index}"), **self.experiment)
        return agents

    async def play(self, game: design.Game, agent_a: Any, agent_b: Any) -> bool:
        """One game; False when a turn got no answer from the model (see PROVIDER_FAILURES)."""
        r = game.round_number
        turns: dict[str, list[Any]] = {"a": [], "b": []}

        async def both(kind: TurnKind, call_a, call_b) -> tuple[Any, Any]:
            results = await asyncio.gather(self._turn(game, "a", kind, call_a),
                                           self._turn(game, "b", kind, call_b), return_exceptions=True)
            _raise_first(results)
            turns["a"].append(results[0])
            turns["b"].append(results[1])
            return results

        first_a = first_b = second_a = second_b = None
        if self.with_communication:
            first_a, first_b = await both(
                TurnKind.MESSAGE_1,
                lambda d: agent_a.message_1(r, deadline=d), lambda d: agent_b.message_1(r, deadline=d))
        if self.with_communication and self.chat_exchanges == 2:
            second_a, second_b = await both(
                TurnKind.MESSAGE_2,
                lambda d: agent_a.message_2(r, associate_message_1=first_b.text, deadline=d),
                lambda d: agent_b.message_2(r, associate_message_1=first_a.text, deadline=d))
        # With one exchange the decision is told the associate's only message.
        only_a, only_b = ({"associate_message_1": first_b.text}, {"associate_message_1": first_a.text}) \
            if self.with_communication and self.chat_exchanges == 1 else ({}, {})
        decision_a, decision_b = await both(
            TurnKind.DECISION,
            lambda d: agent_a.decide(r, associate_message_2=second_b and second_b.text, deadline=d, **only_a),
            lambda d: agent_b.decide(r, associate_message_2=second_a and second_a.text, deadline=d, **only_b))
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
        failures = sorted({t.fallback_reason for ts in turns.values() for t in ts
                           if getattr(t, "fallback_reason", None) in self.failure_reasons})
        if failures:
            # On the record (every call is), but not a result: not finished, not an agent state
            # to resume from. A rerun plays the game again; its answered calls come from the cache.
            record["failed"] = failures
            self.store.append_game(record)
            self.games_failed += 1
            return False
        self.store.append_game(record)
        self.finished.add(game.key)
        self.games_played += 1
        return True

    async def _turn(self, game: design.Game, side: str, kind: TurnKind, call) -> Any:
        deadline = (time.monotonic() + protocol.STAGE_LIMITS[kind.value]
                    if self.config.use_stage_limits else None)
        with cache_scope(f"{game.key}|{side}|{kind.value}"):
            result = await call(deadline)
        self.progress.add(result)
        statuses = {c.status for c in result.calls}
        if CallStatus.BUDGET.value in statuses or result.fallback_reason == CallStatus.BUDGET.value:
            self.budget_spent = True
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

