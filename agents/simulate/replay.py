"""Counterfactual replay: the human side of recorded lab conversations against another agent.

For every agent of a lab export (WC game, human-agent conversations), a fresh agent of the
chosen model (and persona, by default the recorded agent's own) plays the same rounds in order:
it writes its own message 1, is shown the human's recorded message 1, writes message 2, is
shown the human's recorded message 2 and decides; then it learns the human's recorded choice.
The humans' side is fixed, so the comparison shows how the agents' side would have changed
(the humans could not react to the new messages: a replay, not a new experiment).

Every replay writes a folder of its own, ``{run folder}/replays/{started}-{export}-{persona}/``
(``replay.json`` says what was replayed with what), and in it per model (the config's label) the
tidy tables with ``source=replay`` (the replayed agents' decisions, both sides' messages, the
calls) and ``comparison.csv``, one row per conversation: recorded vs replayed agent choice. No
replay overwrites another's tables. Answered calls are cached per model (cache.arm_scope): a rerun
sends none of them again, and two models with the same settings each get their own answers.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any, Optional

import pandas as pd

import protocol

from agents.config import ConfigError
from agents.types import CallStatus, TurnStatus

from . import tables
from .backend import Backend, agents_backend
from .cache import CachedModel, ResponseCache, arm_scope, cache_scope, current_cache_scope
from .config import SimulationConfig
from .estimate import EstimatingModel, ModelEstimate, Tally, current_tally, price_source
from .runner import BudgetExceeded, BudgetExhausted, Plan, RunResult, _settings_of
from .store import RunStore
from .tournament import PROVIDER_FAILURES, stable_int

# replayed_status: the decision turn's status (ok, reasked, fallback, or "not played");
# replayed_random: the replayed choice is the random fallback, not the model's; fallback_reasons:
# of the round's three turns; excluded: a turn got no answer from the model (provider failure,
# budget) or an earlier round did: not a result (``changed`` empty), replayed again by a rerun.
COMPARISON_COLUMNS = [
    "session_code", "conversation_id", "round", "original_agent", "human_code", "original_persona",
    "replay_persona", "replay_model", "original_choice", "replayed_choice", "human_choice", "changed",
    "replayed_status", "replayed_random", "fallback_reasons", "excluded",
]


def read_lab_export(export: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The decisions and messages tables of a lab export, recognised by their columns: a data
    package as downloaded (zip) or unzipped, or a folder of CSVs, as the analysis reads them
    (analysis/inputs.py). Earlier replays' rows (``source=replay``) are not replayed again."""
    from analysis.inputs import collect

    found = collect([export])
    if found.refusal():
        raise ConfigError(found.refusal())
    decisions, messages = [], []
    for source in found.sources:
        try:
            text = source.read().decode("utf-8-sig")
            columns = set(pd.read_csv(io.StringIO(text), nrows=0).columns)
        except (OSError, UnicodeDecodeError, ValueError):
            continue  # not a table (an empty or unreadable file): the refusal below names what is missing
        if {"choice", "round", "player_code"} <= columns:
            decisions.append(pd.read_csv(io.StringIO(text), dtype={"choice": str, "associate_choice": str}))
        elif {"text", "stage", "sender_code"} <= columns:
            messages.append(pd.read_csv(io.StringIO(text), dtype={"text": str}, keep_default_na=False))
    if not decisions or not messages:
        raise ConfigError(f"{export}: needs a decisions and a messages table (docs/DATA.md)")
    decisions = pd.concat(decisions, ignore_index=True)
    if "source" in decisions:
        decisions = decisions[decisions["source"] != "replay"]
    return decisions, pd.concat(messages, ignore_index=True)


def check_persona(persona: Optional[str]) -> None:
    """An unknown ``--persona`` is refused before anything is read or sent."""
    if persona is not None and persona not in protocol.PERSONAS:
        raise ConfigError(f"unknown persona {persona!r}: the personas are {', '.join(protocol.PERSONAS)} "
                          "(or none: each recorded agent's own)")


def check_replayable(export: str | Path, decisions: pd.DataFrame, recorded: list[dict[str, Any]]) -> None:
    """An export without an agent's WC round against a human (an H-H session) is refused."""
    if recorded:
        return
    agents = decisions["player_kind"].eq("agent").any() if "player_kind" in decisions else False
    what = ("its agents played no WC round against a human with the human's choice recorded" if agents
            else "no agent played in it (an H-H session?)")
    raise ConfigError(f"{export}: nothing to replay: {what}; give the export of a session with agents "
                      "(H-F, H-C or H-S)")


def recorded_agents(decisions: pd.DataFrame, messages: pd.DataFrame) -> list[dict[str, Any]]:
    """Per recorded agent, its WC rounds with the human's messages and choice, in order."""
    # Rounds without the human's recorded choice (a broken export) cannot be settled: left out.
    agent_rows = decisions[(decisions["player_kind"] == "agent") & (decisions["game"] == "WC")
                           & (decisions["associate_kind"] == "human")
                           & decisions["associate_choice"].isin(protocol.CHOICES)]
    human_messages = messages[messages["sender_kind"] == "human"]
    sent = {(row.conversation_id, int(row.stage)): row.text if _truthy(row.sent_in_time) else None
            for row in human_messages.itertuples()}
    agents = []
    for (session_code, agent_code), rows in agent_rows.groupby(["session_code", "player_code"], sort=True):
        first = rows.iloc[0]
        agents.append({
            "session_code": session_code, "agent_code": agent_code, "persona": first["persona"],
            "keys": {k: first[k] for k in tables.SESSION_KEYS},
            "rounds": [{"round": int(row["round"]), "conversation_id": row["conversation_id"],
                        "human_code": row["associate_code"], "original_choice": row["choice"],
                        "human_choice": row["associate_choice"],
                        "human_message_1": sent.get((row["conversation_id"], 1)),
                        "human_message_2": sent.get((row["conversation_id"], 2))}
                       for _, row in rows.sort_values("round").iterrows()],
        })
    return agents


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1")


async def replay_agent(recorded: dict[str, Any], agent: Any, model_label: str,
                       rows: Optional[tables.TableRows], comparison: list[dict[str, Any]], persona: str) -> bool:
    """Replay one recorded agent's rounds in order. After a round in which a turn got no answer
    from the model (provider failure, budget) the agent stops: later rounds would build on it.
    Those rounds are in ``comparison`` flagged ``excluded``. Returns False when it stopped."""
    keys = {**recorded["keys"], "source": "replay"}
    stopped_at: Optional[int] = None
    for played in recorded["rounds"]:
        r, conversation_id = played["round"], played["conversation_id"]
        row = {
            "session_code": recorded["session_code"], "conversation_id": conversation_id, "round": r,
            "original_agent": recorded["agent_code"], "human_code": played["human_code"],
            "original_persona": recorded["persona"], "replay_persona": persona,
            "replay_model": model_label, "original_choice": played["original_choice"],
            "human_choice": played["human_choice"],
        }
        if stopped_at is not None:
            comparison.append({**row, "replayed_choice": None, "changed": None, "replayed_status": "not played",
                               "replayed_random": None, "fallback_reasons": "", "excluded": True})
            continue
        call = (model_label, "replay", conversation_id, recorded["agent_code"], persona)  # and the turn
        with cache_scope(arm_scope(*call, "message_1")):
            first = await agent.message_1(r, deadline=None)
        with cache_scope(arm_scope(*call, "message_2")):
            second = await agent.message_2(r, associate_message_1=played["human_message_1"], deadline=None)
        with cache_scope(arm_scope(*call, "decision")):
            decision = await agent.decide(r, associate_message_2=played["human_message_2"], deadline=None)
        agent.record_outcome(r, decision.choice, played["human_choice"])
        turns = (first, second, decision)
        reasons = sorted({t.fallback_reason for t in turns if getattr(t, "fallback_reason", None)})
        failed = any(reason in PROVIDER_FAILURES for reason in reasons)
        random_choice = getattr(decision, "status", "ok") == TurnStatus.FALLBACK.value
        comparison.append({
            **row, "replayed_choice": decision.choice,
            "changed": None if failed else played["original_choice"] != decision.choice,
            "replayed_status": getattr(decision, "status", "ok"), "replayed_random": random_choice,
            "fallback_reasons": ",".join(reasons), "excluded": failed,
        })
        if failed:
            stopped_at = r
        if rows is None:
            continue
        extra = {"model": model_label, "original_agent": recorded["agent_code"],
                 "original_persona": recorded["persona"]}
        rows.add_side(keys=keys, game="WC", round_number=r, conversation_id=conversation_id,
                      player=agent.agent_id, persona=persona, associate=played["human_code"],
                      associate_kind="human", turns=[t.to_dict() for t in turns],
                      associate_choice=played["human_choice"], extra=extra, excluded=failed)
        if failed:
            continue
        for stage in (1, 2):
            rows.add_message(keys=keys, game="WC", round_number=r, conversation_id=conversation_id,
                             stage=stage, sender=played["human_code"], sender_kind="human",
                             receiver=agent.agent_id, receiver_kind="agent",
                             text=played[f"human_message_{stage}"], started_at=None, sent_at=None,
                             extra=extra)
    return stopped_at is None


class ReplayResult(dict):
    """The files written (name -> path), plus what the replay did."""

    plan: Optional[Plan] = None
    folder: Optional[Path] = None  # this replay's own folder (None: an estimate only)
    replays_excluded: int = 0  # rounds flagged ``excluded`` in the comparisons
    rounds_total: int = 0
    spent: float = 0.0
    budget_spent: bool = False
    actual: dict[str, dict[str, Any]] = {}

    @property
    def outputs(self) -> dict[str, Path]:
        return self

    fallbacks: dict[str, tuple[int, int]] = {}
    max_fallback_share: float = 0.2
    fallback_lines = RunResult.fallback_lines
    fallbacks_exceeded = RunResult.fallbacks_exceeded

    def excluded_line(self) -> Optional[str]:
        if not self.replays_excluded:
            return None
        return (f"replayed rounds excluded: {self.replays_excluded} of {self.rounds_total} got no answer from "
                f"the model or followed one that did not (flagged `excluded` in comparison.csv, not in "
                f"the decisions and messages tables); rerun the same command to play them")


def _new_replay_agent(backend: Backend, config: SimulationConfig, agent_record: dict[str, Any], model: Any,
                      persona: Optional[str]) -> Any:
    replay_persona = persona or agent_record["persona"]
    return backend.new_agent(f"replay-{agent_record['agent_code']}", replay_persona, model,
                             language=config.language, with_communication=True,
                             seed=stable_int(f"{config.seed}|{agent_record['agent_code']}"))


async def estimate_replay(config: SimulationConfig, recorded: list[dict[str, Any]], persona: Optional[str],
                          backend: Backend, store: RunStore) -> Plan:
    """The replay played dry (estimate.py): every prompt rendered, the cache consulted."""
    cache = ResponseCache(config.resolved_cache_path, read_only=True)
    per_model, estimates = {}, []
    try:
        for entry in config.models:
            cfg = entry.config
            tally = Tally()
            stand_in = EstimatingModel(_settings_of(backend, cfg), config.estimated_output_tokens,
                                       lambda i, o, cfg=cfg: backend.cost_of(cfg, i, o))
            model = CachedModel(stand_in, cache, namespace=f"seed={config.seed}", read_only=True)

            async def one(agent_record: dict[str, Any]) -> None:
                current_tally.set(tally)
                agent = _new_replay_agent(backend, config, agent_record, model, persona)
                await replay_agent(agent_record, agent, entry.label, None, [],
                                   persona or agent_record["persona"])

            await asyncio.gather(*(one(a) for a in recorded))
            tally.cache_hits = model.hits
            estimate = ModelEstimate(entry.label, tally, price_source(cfg), concurrency=getattr(cfg, "concurrency", 1))
            estimate.dearest_call = (backend.cost_of(cfg, tally.max_input_tokens,
                                                     getattr(cfg, "max_tokens", config.estimated_output_tokens))
                                     if tally.calls else 0.0)
            estimates.append(estimate)
            per_model[entry.label] = {"calls": tally.calls, "cost": tally.cost, "input_tokens": tally.input_tokens,
                                      "output_tokens": tally.output_tokens, "max_input_tokens": tally.max_input_tokens,
                                      "price_source": estimate.price_source}
    finally:
        cache.close()
    costs = [m["cost"] for m in per_model.values()]
    spent_before = store.spent()
    rounds = sum(len(a["rounds"]) for a in recorded)
    return Plan(games_total=rounds * len(config.models), games_done=0,
                calls_remaining=sum(m["calls"] for m in per_model.values()),
                cost_estimate=None if None in costs else sum(costs), spent_before=spent_before,
                budget_left=None if config.budget_usd is None else max(0.0, config.budget_usd - spent_before),
                per_model=per_model, cache_hits=sum(e.tally.cache_hits for e in estimates),
                reply_tokens=config.estimated_output_tokens, estimates=estimates, replay=True)


async def replay_export(config: SimulationConfig, export_dir: str | Path, *, persona: Optional[str] = None,
                        backend: Optional[Backend] = None, show_progress: bool = True,
                        estimate_only: bool = False, log=print) -> ReplayResult:
    """Replay every recorded agent of ``export_dir`` with every model of ``config``.

    Like a simulation run: the estimate is printed first and checked against the budget left
    (the run folder's, shared with its simulation), every paid call is logged to the run
    folder's spending log as it arrives, and a spent budget stops the replay (BudgetExhausted,
    after writing what was replayed)."""
    from tqdm import tqdm

    check_persona(persona)
    backend = backend or agents_backend()
    decisions, messages = read_lab_export(export_dir)
    recorded = recorded_agents(decisions, messages)
    check_replayable(export_dir, decisions, recorded)
    store = RunStore(config.run_dir)
    plan = await estimate_replay(config, recorded, persona, backend, store)
    log(plan.describe())
    result = ReplayResult()
    result.plan = plan
    if estimate_only:
        return result
    if plan.budget_left is not None and plan.cost_estimate is not None and plan.cost_estimate > plan.budget_left:
        raise BudgetExceeded(f"estimated ${plan.cost_estimate:.2f} > budget left ${plan.budget_left:.2f}")
    cache = ResponseCache(config.resolved_cache_path)
    budget = backend.new_budget(plan.budget_left)
    attempt = time.strftime("%Y%m%dT%H%M%S") + "-replay-" + uuid.uuid4().hex[:6]
    result.folder = new_replay_folder(config, export_dir, persona, attempt)
    result.actual = {}
    comparisons_all: list[dict[str, Any]] = []
    try:
        for entry in config.models:
            on_reply = (lambda label: lambda reply: store.record_call(attempt, label, reply, current_cache_scope()))(
                f"replay:{entry.label}")
            model = CachedModel(backend.build_model(entry.config, budget), cache, namespace=f"seed={config.seed}",
                                on_reply=on_reply)
            out = result.folder / entry.label
            rows, comparison = tables.TableRows(out), []
            progress = tqdm(total=len(recorded), unit="agent", disable=not show_progress, desc=entry.label)

            async def one(agent_record: dict[str, Any]) -> None:
                agent = _new_replay_agent(backend, config, agent_record, model, persona)
                await replay_agent(agent_record, agent, entry.label, rows, comparison,
                                   persona or agent_record["persona"])
                progress.update()

            await asyncio.gather(*(one(a) for a in recorded))
            progress.close()
            written = rows.write(["session_code", "original_agent", "round", "conversation_id"])
            path = out / "comparison.csv"
            (pd.DataFrame(comparison, columns=COMPARISON_COLUMNS)
             .sort_values(["session_code", "original_agent", "round"]).to_csv(path, index=False))
            result.update({f"{entry.label}:{name}": p for name, p in written.items()})
            result.fallbacks = {**result.fallbacks, **tables.decision_fallbacks(written.get("decisions"))}
            result[f"{entry.label}:comparison"] = path
            comparisons_all += comparison
            result.actual[entry.label] = {"calls": model.misses, "input_tokens": model.sent_input_tokens,
                                          "output_tokens": model.sent_output_tokens, "cost": model.sent_cost}
    finally:
        cache.close()
        store.close()
    result.rounds_total = len(comparisons_all)
    result.replays_excluded = sum(1 for row in comparisons_all if row["excluded"])
    result.spent = float(budget.spent)
    result.budget_spent = any(CallStatus.BUDGET.value in (row["fallback_reasons"] or "") for row in comparisons_all)
    result.max_fallback_share = config.max_fallback_share
    for line in RunResult.estimate_vs_actual(result) + result.fallback_lines():  # as a simulation run's
        log(line)
    if result.excluded_line():
        log(result.excluded_line())
    if result.budget_spent:
        raise BudgetExhausted(f"the budget is spent (${store.spent():.4f} of ${config.budget_usd:.2f}); "
                              f"raise budget_usd and rerun to continue")
    return result


def new_replay_folder(config: SimulationConfig, export: str | Path, persona: Optional[str], attempt: str) -> Path:
    """``{run folder}/replays/{YYYYmmdd-HHMMSS}-{export's name}-{persona or own-persona}/``, new for
    every replay (another started in the same second gets the attempt's random suffix too), with
    ``replay.json``: what was replayed, with which models and persona, when."""
    export_name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(export).name.removesuffix(".zip")) or "export"
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{export_name}-{persona or 'own-persona'}"
    parent = config.run_dir / "replays"
    parent.mkdir(parents=True, exist_ok=True)
    folder = parent / stem
    try:
        folder.mkdir()
    except FileExistsError:
        folder = parent / f"{stem}-{attempt.rsplit('-', 1)[-1]}"
        folder.mkdir()
    described = {"export": str(Path(export).resolve()), "persona": persona or "each recorded agent's own",
                 "models": {e.label: e.config.model_dump(mode="json") for e in config.models},
                 "language": config.language, "seed": config.seed, "attempt": attempt, "started_at": time.time()}
    (folder / "replay.json").write_text(json.dumps(described, indent=1, default=str), encoding="utf-8")
    return folder


def run_replay(config: SimulationConfig, export_dir: str | Path, **kwargs: Any) -> ReplayResult:
    return asyncio.run(replay_export(config, export_dir, **kwargs))
