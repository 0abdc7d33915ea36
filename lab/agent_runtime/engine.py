"""The agent engine: a thread with its own asyncio loop, where every agent turn runs.

Owns ``AgentEngine`` and the process's one ``ENGINE``: the turns' futures (keyed, so that a turn
is never started twice), their answers as they come in, the calls of each running turn, and one
model and one budget per session. oTree's event loop and its global lock never wait for it: a
page only submits a turn and reads what it has published. Knows nothing of oTree's database.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import sys
import threading
from typing import Any, Callable, Optional

from agents.agent import PENDING
from agents.config import ConfigError, ModelConfig
from agents.models import Budget, UnavailableModel, build_model, model_settings
from agents.types import CallRecord

logger = logging.getLogger("lab.agents")

# Python's GIL switch interval once the engine runs (see AgentEngine._ensure_loop); default 5 ms.
ENGINE_SWITCH_INTERVAL_SECONDS = 0.0005


class AgentEngine:
    """Runs agent turns off oTree's loop. Futures are keyed so that a turn is never started twice."""

    def __init__(self) -> None:
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._lock = threading.Lock()
        self._futures: dict[str, concurrent.futures.Future] = {}
        self._models: dict[str, Any] = {}
        self._budgets: dict[str, Budget] = {}
        # The calls of each running turn: turn key -> call_id -> [journal state, record dict].
        self._turn_calls: dict[str, dict[str, list]] = {}
        # Calls abandoned in flight (call_id -> the estimate charged), until they come back.
        self._abandoned: dict[str, float] = {}
        self._outcomes: dict[str, tuple] = {}  # turn key -> (TurnResult, memory), see publish

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                # With the engine's thread busy (72 replies arriving together), a page's thread,
                # which lets go of the GIL at every database call, waited up to Python's switch
                # interval (5 ms) to get it back each time. Measured in bench/lab_load.py, two
                # interleaved repetitions each: H-F page p95 0.54/0.51 s -> 0.41/0.44 s (instant
                # agents) and 0.59/0.35 -> 0.39/0.32 s (5 s agents), CPU 5-10 % lower. Only
                # once agents run: without them (H-H) it cost a few percent of CPU.
                sys.setswitchinterval(ENGINE_SWITCH_INTERVAL_SECONDS)
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="agent-engine", daemon=True).start()
                self._loop = loop
            return self._loop

    def submit(self, key: str, make_coroutine: Callable[[], Any]) -> concurrent.futures.Future:
        loop = self._ensure_loop()
        with self._lock:
            future = self._futures.get(key)
            if future is None:
                future = asyncio.run_coroutine_threadsafe(make_coroutine(), loop)
                self._futures[key] = future
            return future

    # The two reads below take no lock: a page asks them while it holds oTree's lock, and a lock
    # the engine thread holds hands the GIL over and waits for it back, up to Python's switch
    # interval (0.3 ms a call on average in a settling page's profile, bench/lab_load.py --trace). One dict read
    # is atomic in CPython; ``outcome`` tolerates the entry changing between its two reads.
    def future(self, key: str) -> Optional[concurrent.futures.Future]:
        return self._futures.get(key)

    def forget(self, key: str) -> None:
        with self._lock:
            self._futures.pop(key, None)
            self._turn_calls.pop(key, None)
            self._outcomes.pop(key, None)

    def publish(self, key: str, outcome: tuple) -> None:
        """On the engine thread, the moment a turn has its answer: pages see it at once, not
        when the event loop gets round to completing the turn's future (behind every other turn
        whose reply came in at the same moment, as at a round start)."""
        with self._lock:
            if key in self._futures:
                self._outcomes[key] = outcome

    def outcome(self, key: str) -> Optional[tuple]:
        """A running turn's (TurnResult, memory as JSON) once it has its answer, else None."""
        found = self._outcomes.get(key)
        if found is not None:
            return found
        future = self._futures.get(key)
        return future.result() if future is not None and future.done() else None

    # --- the calls of running turns (written on the engine thread, read by the pages) ----------
    def call_started(self, key: str, record: CallRecord) -> None:
        with self._lock:
            self._turn_calls.setdefault(key, {})[record.call_id] = [PENDING, record.to_dict()]

    def call_finished(self, key: str, session_code: str, record: CallRecord) -> bool:
        """On the engine thread, as a call returns. False if the call was abandoned meanwhile:
        its record (the estimate) stands, and what ``BudgetedModel`` charged for its reply is
        taken back, so that the budget counts it once, as its record does."""
        with self._lock:
            if record.call_id in self._abandoned:
                del self._abandoned[record.call_id]
                budget = self._budgets.get(session_code)
                if budget is not None and record.cost:
                    budget.charge(-record.cost)
                return False
            calls = self._turn_calls.get(key)
            if calls is not None:
                calls[record.call_id] = ["done", record.to_dict()]
            return True

    def abandon_calls(self, key: str, session_code: str,
                      estimate: Callable[[dict], Optional[float]]) -> list[tuple[str, dict, Optional[float]]]:
        """The page settles the turn by the fallback: its calls, (state, record, estimate). Each
        one still in flight is charged its estimate now (an upper bound: prompt + a full reply),
        before anything else can be sent, whether or not its reply ever comes back."""
        with self._lock:
            calls = self._turn_calls.pop(key, {})
            budget = self._budgets.get(session_code)
            taken = []
            for call_id, (state, record) in calls.items():
                cost = None
                if state == PENDING:
                    cost = estimate(record)
                    self._abandoned[call_id] = cost or 0.0
                    if budget is not None:
                        budget.charge(cost)
                taken.append((state, record, cost))
            return taken

    def model(self, session_code: str, config: ModelConfig, budget_limit: Optional[float],
              spent_so_far: Callable[[], float]):
        """One model (client, limits) and one budget per session, shared by all its agents. A model
        this server cannot call (its key's variable unset here, as after a restart in another
        environment) is said in the log and answers every call config_error: the turns fall back."""
        with self._lock:
            if session_code not in self._models:
                budget = Budget(budget_limit)
                budget.charge(spent_so_far())  # after a restart: what the session already spent
                self._budgets[session_code] = budget
                try:
                    self._models[session_code] = build_model(config, budget=budget, charge_unanswered=True)
                except ConfigError as problem:
                    logger.error("Session %s: this server cannot call its model %s / %s: %s. Its agents' turns "
                                 "fall back (flagged config_error) until the server is started with it.",
                                 session_code, config.provider, config.model, problem)
                    self._models[session_code] = UnavailableModel(model_settings(config), str(problem))
                gc.freeze()  # the provider's SDK and client live as long as the server (see freeze_heap)
            return self._models[session_code]

    def session_model(self, session_code: str):
        """The session's model once built, else None (no config parsed on every turn)."""
        with self._lock:
            return self._models.get(session_code)

    def forget_cut_off_calls(self, session_code: str) -> int:
        """The session's model forgets its calls cut off unanswered (``RateLimitedModel``;
        a model without that layer has nothing to forget). Returns how many."""
        layer = self.session_model(session_code)
        while layer is not None and not hasattr(layer, "forget_cut_off_calls"):
            layer = getattr(layer, "inner", None)
        return 0 if layer is None else layer.forget_cut_off_calls()

    def budget(self, session_code: str) -> Optional[Budget]:
        with self._lock:
            return self._budgets.get(session_code)


ENGINE = AgentEngine()
