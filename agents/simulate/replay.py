"""Counterfactual replay: the human side of recorded lab conversations against another agent.

For every agent of a lab export (WC game, human-agent conversations), a fresh agent of the
chosen model (and persona, by default the recorded agent's own) plays the same rounds in order:
it writes its own message 1, is shown the human's recorded message 1, writes message 2, is
shown the human's recorded message 2 and decides; then it learns the human's recorded choice.
The humans' side is fixed, so the comparison shows how the agents' side would have changed
(the humans could not react to the new messages: a replay, not a new experiment).

Outputs (in ``{run folder}/replay-{model}-{persona}/``): the tidy tables with ``source=replay``
(the replayed agents' decisions, both sides' messages, the calls) and ``comparison.csv``, one
row per conversation: recorded vs replayed agent choice. Reruns are served from the cache.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Optional

import pandas as pd

import protocol

from . import tables
from .backend import Backend, agents_backend
from .cache import CachedModel, ResponseCache, cache_scope
from .config import SimulationConfig
from .runner import stable_int

COMPARISON_COLUMNS = [
    "session_code", "conversation_id", "round", "original_agent", "human_code", "original_persona",
    "replay_persona", "replay_model", "original_choice", "replayed_choice", "human_choice", "changed",
]


def read_lab_export(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The decisions and messages tables of every CSV in ``folder``, recognised by columns."""
    decisions, messages = [], []
    for path in sorted(Path(folder).glob("*.csv")):
        columns = set(pd.read_csv(path, nrows=0).columns)
        if {"choice", "round", "player_code"} <= columns:
            decisions.append(pd.read_csv(path, dtype={"choice": str, "associate_choice": str}))
        elif {"text", "stage", "sender_code"} <= columns:
            messages.append(pd.read_csv(path, dtype={"text": str}, keep_default_na=False))
    if not decisions or not messages:
        raise ValueError(f"{folder}: needs a decisions and a messages table (docs/DATA.md)")
    return pd.concat(decisions, ignore_index=True), pd.concat(messages, ignore_index=True)


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
                       rows: tables.TableRows, comparison: list[dict[str, Any]], persona: str) -> None:
    keys = {**recorded["keys"], "source": "replay"}
    for played in recorded["rounds"]:
        r, conversation_id = played["round"], played["conversation_id"]
        scope = f"replay|{conversation_id}|{recorded['agent_code']}|{persona}"
        with cache_scope(f"{scope}|message_1"):
            first = await agent.message_1(r, deadline=None)
        with cache_scope(f"{scope}|message_2"):
            second = await agent.message_2(r, associate_message_1=played["human_message_1"], deadline=None)
        with cache_scope(f"{scope}|decision"):
            decision = await agent.decide(r, associate_message_2=played["human_message_2"], deadline=None)
        agent.record_outcome(r, decision.choice, played["human_choice"])
        extra = {"model": model_label, "original_agent": recorded["agent_code"],
                 "original_persona": recorded["persona"]}
        rows.add_side(keys=keys, game="WC", round_number=r, conversation_id=conversation_id,
                      player=agent.agent_id, persona=persona, associate=played["human_code"],
                      associate_kind="human", turns=[t.to_dict() for t in (first, second, decision)],
                      associate_choice=played["human_choice"], extra=extra)
        for stage in (1, 2):
            rows.add_message(keys=keys, game="WC", round_number=r, conversation_id=conversation_id,
                             stage=stage, sender=played["human_code"], sender_kind="human",
                             receiver=agent.agent_id, receiver_kind="agent",
                             text=played[f"human_message_{stage}"], started_at=None, sent_at=None,
                             extra=extra)
        comparison.append({
            "session_code": recorded["session_code"], "conversation_id": conversation_id, "round": r,
            "original_agent": recorded["agent_code"], "human_code": played["human_code"],
            "original_persona": recorded["persona"], "replay_persona": persona,
            "replay_model": model_label, "original_choice": played["original_choice"],
            "replayed_choice": decision.choice, "human_choice": played["human_choice"],
            "changed": played["original_choice"] != decision.choice,
        })


async def replay_export(config: SimulationConfig, export_dir: str | Path, *, persona: Optional[str] = None,
                        backend: Optional[Backend] = None, show_progress: bool = True) -> dict[str, Path]:
    """Replay every recorded agent of ``export_dir`` with every model of ``config``."""
    from tqdm import tqdm

    backend = backend or agents_backend()
    recorded = recorded_agents(*read_lab_export(export_dir))
    cache = ResponseCache(config.resolved_cache_path)
    budget = backend.new_budget(config.budget_usd)
    outputs: dict[str, Path] = {}
    try:
        for entry in config.models:
            model = CachedModel(backend.build_model(entry.config, budget), cache, namespace=f"seed={config.seed}")
            out = config.run_dir / f"replay-{entry.label}-{persona or 'own-persona'}"
            rows, comparison = tables.TableRows(out), []
            progress = tqdm(total=len(recorded), unit="agent", disable=not show_progress, desc=entry.label)

            async def one(agent_record: dict[str, Any]) -> None:
                replay_persona = persona or agent_record["persona"]
                agent = backend.new_agent(f"replay-{agent_record['agent_code']}", replay_persona, model,
                                          language=config.language, with_communication=True,
                                          seed=stable_int(f"{config.seed}|{agent_record['agent_code']}"))
                await replay_agent(agent_record, agent, entry.label, rows, comparison, replay_persona)
                progress.update()

            await asyncio.gather(*(one(a) for a in recorded))
            progress.close()
            written = rows.write(["session_code", "original_agent", "round", "conversation_id"])
            path = out / "comparison.csv"
            (pd.DataFrame(comparison, columns=COMPARISON_COLUMNS)
             .sort_values(["session_code", "original_agent", "round"]).to_csv(path, index=False))
            outputs.update({f"{entry.label}:{name}": p for name, p in written.items()})
            outputs[f"{entry.label}:comparison"] = path
    finally:
        cache.close()
    return outputs


def run_replay(config: SimulationConfig, export_dir: str | Path, **kwargs: Any) -> dict[str, Path]:
    return asyncio.run(replay_export(config, export_dir, **kwargs))
