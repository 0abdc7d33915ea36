"""Conversation annotation (SI Note 2): the template, the import, the resolution, the kappa.

Two annotators label every conversation independently: each player's preferred strategy, the
strategy each wants from the other, and whether both agree on mutual A. Where they differ a
third (``annotator = resolver``) decides. Annotators see the four messages with the players
anonymised as player 1 and player 2, and nothing of the treatment.

An LLM can fill the same columns (``machine_annotate``); its rows are labelled
``machine:<model>`` and are used only for conversations no human annotated.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.load import LABEL_COLUMNS, to_bool
from analysis.stats import cohens_kappa
from analysis.tidy import message_columns

RESOLVER = "resolver"
MACHINE_PREFIX = "machine:"
NO_MESSAGE = "(no message)"
# The weakest source used in a row names the row's label source.
SOURCE_RANK = ["annotators", "single annotator", "resolver", "machine", "unresolved"]
TEMPLATE_COLUMNS = ["conversation_id", *message_columns(), "annotator", *LABEL_COLUMNS]


def template(conversations: pd.DataFrame) -> pd.DataFrame:
    """One row per WC conversation, messages anonymised, label columns empty."""
    rows = conversations.sort_values("conversation_id")
    filled = pd.DataFrame({"conversation_id": rows["conversation_id"]})
    for column in message_columns():
        filled[column] = rows[column].replace("", NO_MESSAGE)
    for column in ["annotator", *LABEL_COLUMNS]:
        filled[column] = ""
    return filled.reset_index(drop=True)


def write_template(conversations: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    template(conversations).to_csv(path, index=False, encoding="utf-8")
    return path


def _kind(annotator: str) -> str:
    if annotator == RESOLVER:
        return "resolver"
    return "machine" if annotator.startswith(MACHINE_PREFIX) else "human"


def _prepared(annotations: pd.DataFrame) -> pd.DataFrame:
    rows = annotations.copy()
    rows["_kind"] = rows["annotator"].map(_kind)
    rows["agreement"] = to_bool(rows["agreement"])  # machine rows arrive as "True"/"False" text
    return rows


def _as_label(column: str, values: pd.Series) -> pd.Series:
    if column == "agreement":
        return values.map(lambda v: "" if pd.isna(v) else str(bool(v)))
    return values.fillna("").astype(str)


def resolve(annotations: pd.DataFrame) -> pd.DataFrame:
    """The label of each conversation and column: the annotators' when they agree, else the
    resolver's. Human annotators come first; machine rows label only what no human did.

    Returns one row per conversation with the label columns, ``label_source`` (``annotators``,
    ``resolver``, ``single annotator``, ``machine``, ``unresolved``) naming the weakest source
    used in the row, and ``annotator_count``.
    """
    if annotations.empty:
        return pd.DataFrame(columns=["conversation_id", *LABEL_COLUMNS, "label_source", "annotator_count"])
    rows = _prepared(annotations)
    for column in LABEL_COLUMNS:
        rows[column] = _as_label(column, rows[column])
    human_annotated = set(rows.loc[rows["_kind"] == "human", "conversation_id"])
    machine_only = ~rows["conversation_id"].isin(human_annotated)
    raters = rows[(rows["_kind"] == "human") | ((rows["_kind"] == "machine") & machine_only)]
    resolver = rows[rows["_kind"] == "resolver"].drop_duplicates("conversation_id").set_index("conversation_id")
    ids = pd.Index(sorted(set(rows["conversation_id"])), name="conversation_id")
    grouped = raters.groupby("conversation_id")
    count = grouped.size().reindex(ids, fill_value=0)
    by_machine = ~ids.isin(human_annotated) & (count > 0).to_numpy()
    table = pd.DataFrame(index=ids)
    ranks = []
    for column in LABEL_COLUMNS:
        unanimous = (grouped[column].nunique().reindex(ids) == 1).to_numpy()
        resolver_value = resolver[column].reindex(ids)
        table[column] = grouped[column].first().reindex(ids).where(unanimous, resolver_value).fillna("")
        source = np.select([unanimous & by_machine, unanimous & (count > 1).to_numpy(), unanimous,
                            resolver_value.notna().to_numpy()],
                           ["machine", "annotators", "single annotator", "resolver"], "unresolved")
        ranks.append([SOURCE_RANK.index(s) for s in source])
    table["label_source"] = [SOURCE_RANK[r] for r in np.max(ranks, axis=0)]
    table["annotator_count"] = count
    table["agreement"] = to_bool(table["agreement"])
    return table.reset_index()


def inter_annotator_agreement(annotations: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa per label column between the first and second human annotator of each
    conversation (annotators differ between conversations, as in the paper), and between the
    machine and the resolved human labels where both exist."""
    columns = ["comparison", "label", "conversations", "percent_agreement", "cohens_kappa"]
    if annotations.empty:
        return pd.DataFrame(columns=columns)
    rows = _prepared(annotations)
    humans = rows[rows["_kind"] == "human"].sort_values(["conversation_id", "annotator"])
    humans = humans.assign(_slot=humans.groupby("conversation_id").cumcount())
    first = humans[humans["_slot"] == 0].set_index("conversation_id")
    second = humans[humans["_slot"] == 1].set_index("conversation_id")
    both = first.index.intersection(second.index)
    results = []
    comparisons = [("annotator 1 vs annotator 2", first.loc[both], second.loc[both])]
    machine = rows[rows["_kind"] == "machine"].drop_duplicates("conversation_id").set_index("conversation_id")
    if not machine.empty and not humans.empty:
        human_labels = resolve(rows[rows["_kind"] != "machine"]).set_index("conversation_id")
        shared = machine.index.intersection(human_labels.index)
        comparisons.append(("machine vs resolved human labels", machine.loc[shared], human_labels.loc[shared]))
    for name, left, right in comparisons:
        if left.empty:
            continue
        for column in LABEL_COLUMNS:
            a, b = _as_label(column, left[column]), _as_label(column, right[column])
            results.append({"comparison": name, "label": column, "conversations": len(a),
                            "percent_agreement": 100 * float((a.to_numpy() == b.to_numpy()).mean()),
                            "cohens_kappa": cohens_kappa(a, b)})
    return pd.DataFrame(results, columns=columns)


# --- The optional LLM annotator ------------------------------------------------------------------
MACHINE_INSTRUCTIONS = """You annotate the pre-game chat of a two-player game (SI Note 2 of \
"Overcoming the Machine Penalty with Imperfectly Fair AI Agents"). Each player chooses A or B. \
Payoffs (own, other): A/A 70/70, A/B 10/80, B/A 80/10, B/B 40/40. Below are the four messages, \
player 1 and player 2 each wrote two. Label:
- p1_preferred, p2_preferred: the strategy each player says they will choose or prefer ("A", "B", \
or "" when unclear);
- p1_wants_other, p2_wants_other: the strategy each player wants the OTHER to choose ("A", "B" or "");
- agreement: true when both players agree to choose A (mutual A), else false.
Answer with one JSON object with exactly these five keys and nothing else."""


def _machine_prompt(row: pd.Series) -> str:
    lines = [MACHINE_INSTRUCTIONS, ""]
    for stage in (1, 2):
        for side, player in (("p1", "Player 1"), ("p2", "Player 2")):
            text = row.get(f"{side}_message_{stage}", "") or NO_MESSAGE
            lines.append(f"{player}, message {stage}: {text}")
    return "\n".join(lines)


def parse_machine_reply(text: str | None) -> dict[str, str] | None:
    """The five labels from a reply holding one JSON object; None when there is none."""
    match = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not match:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    labels = {}
    for column in LABEL_COLUMNS[:4]:
        value = str(data.get(column) or "").strip().upper()
        labels[column] = value if value in ("A", "B") else ""
    agreement = data.get("agreement")
    labels["agreement"] = str(agreement is True or str(agreement).strip().lower() == "true")
    return labels


def machine_annotate(conversations: pd.DataFrame, model_config: Any = None, *, model: Any = None,
                     timeout_seconds: float = 120.0, concurrency: int = 4) -> pd.DataFrame:
    """Annotation rows written by an LLM, ``annotator = machine:<model>``.

    ``conversations``: the conversations table or the template (message columns needed).
    ``model_config``: an ``agents.config.ModelConfig``; the model is built by the agents
    package, imported only here so the analysis works without it. ``model``: an object with
    ``async complete(messages, *, deadline)`` to use instead (tests, custom providers).
    A reply that is not usable leaves the labels empty and says why in ``machine_note``.
    """
    if model is None:
        from agents.models import build_model  # lazy: the analysis must work without agents

        model = build_model(model_config)
    from agents.types import ChatMessage

    settings = getattr(model, "settings", None)
    model_name = getattr(settings, "model", None) or getattr(model_config, "model", None) or "unknown"
    annotator = f"{MACHINE_PREFIX}{model_name}"

    async def annotate_all() -> list[dict[str, str]]:
        gate = asyncio.Semaphore(concurrency)

        async def annotate_one(row: pd.Series) -> dict[str, str]:
            async with gate:
                reply = await model.complete([ChatMessage(role="user", content=_machine_prompt(row))],
                                             deadline=time.monotonic() + timeout_seconds)
            labels = parse_machine_reply(reply.text) if reply.status == "ok" else None
            note = "" if labels else (f"status {reply.status}" if reply.status != "ok" else "no JSON labels")
            labels = labels or {column: "" for column in LABEL_COLUMNS}
            return {"conversation_id": row["conversation_id"], "annotator": annotator, **labels,
                    "machine_note": note}

        return await asyncio.gather(*(annotate_one(row) for _, row in conversations.iterrows()))

    rows = asyncio.run(annotate_all())
    table = pd.DataFrame(rows, columns=["conversation_id", "annotator", *LABEL_COLUMNS, "machine_note"])
    return table
