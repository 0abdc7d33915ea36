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
import functools
import hashlib
import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd

import protocol
from analysis.blind_output import without_persona
from analysis.load import (BREACH_CHECKS, LABEL_COLUMNS, MOTIVES, UNREADABLE, parse_agreement, parse_strategy,
                           to_bool)
from analysis.stats import cohens_kappa
from analysis.tidy import message_columns

RESOLVER = "resolver"
MACHINE_PREFIX = "machine:"
NO_MESSAGE = "(no message)"
ITEM = "item"  # the opaque id annotators see instead of the conversation id
KEY_NAME = "annotation_key.csv"
TEMPLATE_NAME = "annotation_template.csv"
MACHINE_FILE_NAME = "annotations_machine.csv"
BREACH_TEMPLATE_NAME = "breach_template.csv"
# The weakest source used in a row names the row's label source.
SOURCE_RANK = ["annotators", "single annotator", "resolver", "machine", "unresolved"]
TEMPLATE_COLUMNS = [ITEM, *message_columns(), "annotator", *LABEL_COLUMNS]
BREACH_TEMPLATE_COLUMNS = [ITEM, "breaching_player", *message_columns(), "agent_output", "annotator",
                           *BREACH_CHECKS, *MOTIVES]
MISSING = None  # a label nobody could read (or left empty where a label is required)


# --- Blinding ----------------------------------------------------------------------------------
def blinding_key(conversation_ids: pd.Series, existing: pd.DataFrame | None = None) -> pd.DataFrame:
    """``item`` → ``conversation_id``: a random opaque id per conversation (real ids carry the
    session, the treatment code and "agent"). Ids already in ``existing`` are kept, so a
    template written again for more sessions still matches the copies being filled."""
    known = {} if existing is None or existing.empty else dict(zip(existing["conversation_id"], existing[ITEM]))
    used = set(known.values())
    current = dict.fromkeys(conversation_ids)
    rows = []
    for conversation_id in current:
        item = known.get(conversation_id)
        while item is None or (item in used and conversation_id not in known):
            item = "c" + secrets.token_hex(5)
        used.add(item)
        rows.append({ITEM: item, "conversation_id": conversation_id})
    extra = [] if existing is None or existing.empty else [
        {ITEM: i, "conversation_id": c} for i, c in zip(existing[ITEM], existing["conversation_id"])
        if c not in current]
    return pd.DataFrame(rows + extra, columns=[ITEM, "conversation_id"])


def read_key(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=[ITEM, "conversation_id"])
    return pd.read_csv(path, dtype=str, keep_default_na=False)[[ITEM, "conversation_id"]]


def template(conversations: pd.DataFrame, key: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per WC conversation, messages anonymised, label columns empty; opaque item ids in
    a random order (the order of the ids), so neither the id nor the row's neighbours reveal the
    session or the treatment."""
    key = blinding_key(conversations["conversation_id"]) if key is None else key
    rows = conversations.merge(key, on="conversation_id", how="left").sort_values(ITEM)
    filled = pd.DataFrame({ITEM: rows[ITEM]})
    for column in message_columns():
        filled[column] = rows[column].replace("", NO_MESSAGE)
    for column in ["annotator", *LABEL_COLUMNS]:
        filled[column] = ""
    return filled.reset_index(drop=True)


def write_template(conversations: pd.DataFrame, path: str | Path, key_path: str | Path | None = None,
                   known: pd.DataFrame | None = None) -> Path:
    """Write the blind template and, beside it, the key (``annotation_key.csv``): the key stays
    with whoever runs the analysis; annotators get only the template. Conversations that already
    have an item — in the key there, or in ``known`` (keys passed with the inputs) — keep it."""
    path = Path(path)
    key_path = Path(key_path) if key_path else path.with_name(KEY_NAME)
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = read_key(key_path)
    if known is not None and not known.empty:
        existing = pd.concat([existing, known[[ITEM, "conversation_id"]]]).drop_duplicates("conversation_id")
        existing = existing.drop_duplicates(ITEM)
    key = blinding_key(conversations["conversation_id"], existing)
    key.to_csv(key_path, index=False, encoding="utf-8")
    template(conversations, key).to_csv(path, index=False, encoding="utf-8")
    return path


def breach_template(conversations: pd.DataFrame, key: pd.DataFrame, llm_calls: pd.DataFrame) -> pd.DataFrame:
    """SI Note 2's second task: one row per agent promise breach (an agreement on A/A, then the
    agent chose B), with the conversation, the agent's own output of that round (its model
    replies, every statement of its persona cut: ``blind_output``) and empty columns for the
    binary checks (coherent, error_free: 1/0) and the four motives (−3..3). Blind like the first
    template."""
    rows = []
    agreed = conversations[conversations["agreement"] == True]  # noqa: E712
    items = dict(zip(key["conversation_id"], key[ITEM]))
    for _, conversation in agreed.iterrows():
        for side, number in (("p1", 1), ("p2", 2)):
            if conversation[f"{side}_kind"] != "agent" or conversation[f"{side}_breached"] is not True:
                continue
            row = {ITEM: items.get(conversation["conversation_id"], ""), "breaching_player": number}
            for column in message_columns():
                row[column] = conversation[column] or NO_MESSAGE
            row["agent_output"] = without_persona(_agent_output(llm_calls, conversation, conversation[f"{side}_code"]))
            rows.append(row)
    table = pd.DataFrame(rows, columns=[ITEM, "breaching_player", *message_columns(), "agent_output"])
    for column in ["annotator", *BREACH_CHECKS, *MOTIVES]:
        table[column] = ""
    return table.sort_values(ITEM, ignore_index=True)


def _agent_output(llm_calls: pd.DataFrame, conversation: pd.Series, agent_id: str) -> str:
    if llm_calls.empty:
        return ""
    calls = llm_calls[(llm_calls["session_code"] == conversation["session_code"])
                      & (llm_calls["agent_id"] == agent_id) & (llm_calls["game"].isin(["WC", ""]))
                      & (llm_calls["round_number"] == conversation["round"]) & (llm_calls["status"] == "ok")]
    if "time_sent" in calls:
        calls = calls.sort_values("time_sent")
    return "\n\n".join(f"[{turn}] {reply}" if turn else str(reply)
                        for turn, reply in zip(calls["turn"], calls["raw_reply"]) if str(reply).strip())


def unblind(annotations: pd.DataFrame, key: pd.DataFrame, what: str = "annotations") -> tuple[pd.DataFrame, list[str]]:
    """Fill ``conversation_id`` from ``item`` through the key. Returns the rows and, for rows
    whose item is in no key, a message (they are left out)."""
    if annotations.empty or ITEM not in annotations:
        return annotations, []
    rows = annotations.copy()
    if "conversation_id" not in rows:
        rows["conversation_id"] = ""
    by_item = rows[ITEM].fillna("").astype(str).str.strip() != ""
    mapping = dict(zip(key[ITEM], key["conversation_id"])) if not key.empty else {}
    # As text: an item in no key maps to NaN, which makes a float column that "" cannot fill.
    mapped = rows.loc[by_item, ITEM].map(mapping).astype(object)
    rows.loc[by_item, "conversation_id"] = mapped.where(mapped.notna(), "")
    unknown = by_item & (rows["conversation_id"] == "")
    messages = []
    if unknown.any():
        examples = ", ".join(sorted(set(rows.loc[unknown, ITEM]))[:3])
        messages.append(f"{unknown.sum()} {what} rows name items ({examples}…) that are in no annotation key: "
                        f"put {KEY_NAME} (written beside the template) with the filled files; rows not used")
    return rows[~unknown], messages


def _kind(annotator: str) -> str:
    if annotator == RESOLVER:
        return "resolver"
    return "machine" if annotator.startswith(MACHINE_PREFIX) else "human"


def _label(column: str, value: object) -> str | None:
    """The label as text ('A', 'B', '' = unclear; 'True'/'False'), or MISSING."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return MISSING
    if column == "agreement":
        parsed = parse_agreement(value)
        return parsed if parsed in ("True", "False") else MISSING
    parsed = parse_strategy(value)
    return MISSING if parsed == UNREADABLE else parsed


def _prepared(annotations: pd.DataFrame) -> pd.DataFrame:
    rows = annotations.copy()
    rows["annotator"] = rows["annotator"].astype(str).str.strip()
    rows["_kind"] = rows["annotator"].map(_kind)
    unusable = rows["machine_note"].fillna("").astype(str).str.strip() != "" if "machine_note" in rows else None
    for column in LABEL_COLUMNS:
        rows[column] = [_label(column, v) for v in rows[column]]
        if unusable is not None:
            rows.loc[unusable, column] = MISSING  # the model's reply held no labels: nothing was said
    return rows


def resolve(annotations: pd.DataFrame) -> pd.DataFrame:
    """The label of each conversation and column: the annotators' when those who gave a readable
    label agree, else the resolver's (also when no annotator's value could be read). Human
    annotators come first; machine rows label only what no human did.

    Returns one row per conversation with the label columns, ``label_source`` (``annotators``,
    ``resolver``, ``single annotator``, ``machine``, ``unresolved``) naming the weakest source
    used in the row, and ``annotator_count``.
    """
    if annotations.empty:
        return pd.DataFrame(columns=["conversation_id", *LABEL_COLUMNS, "label_source", "annotator_count"])
    rows = _prepared(annotations)
    human_annotated = set(rows.loc[rows["_kind"] == "human", "conversation_id"])
    machine_only = ~rows["conversation_id"].isin(human_annotated)
    raters = rows[(rows["_kind"] == "human") | ((rows["_kind"] == "machine") & machine_only)]
    resolver = rows[rows["_kind"] == "resolver"].drop_duplicates("conversation_id").set_index("conversation_id")
    ids = pd.Index(sorted(set(rows["conversation_id"])), name="conversation_id")
    count = raters.groupby("conversation_id").size().reindex(ids, fill_value=0)
    by_machine = ~ids.isin(human_annotated) & (count > 0).to_numpy()
    table = pd.DataFrame(index=ids)
    ranks = []
    for column in LABEL_COLUMNS:
        readable = raters[raters[column].notna()]
        grouped = readable.groupby("conversation_id")[column]
        readable_count = grouped.size().reindex(ids, fill_value=0).to_numpy()
        unanimous = (grouped.nunique().reindex(ids) == 1).to_numpy()
        resolver_value = resolver[column].reindex(ids) if column in resolver else pd.Series(MISSING, index=ids)
        labels = grouped.first().reindex(ids).where(unanimous, resolver_value)
        table[column] = labels.where(labels.notna(), None)
        source = np.select([unanimous & by_machine, unanimous & (readable_count > 1), unanimous,
                            resolver_value.notna().to_numpy()],
                           ["machine", "annotators", "single annotator", "resolver"], "unresolved")
        ranks.append([SOURCE_RANK.index(s) for s in source])
    table["label_source"] = [SOURCE_RANK[r] for r in np.max(ranks, axis=0)]
    table["annotator_count"] = count
    for column in LABEL_COLUMNS[:4]:
        table[column] = table[column].fillna("")
    table["agreement"] = to_bool(table["agreement"].fillna(""))
    return table.reset_index()


def inter_annotator_agreement(annotations: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa per label column between the first and second human annotator of each
    conversation (annotators differ between conversations, as in the paper), and between the
    machine and the resolved human labels where both exist. A pair where either value could not
    be read is left out of that column's kappa."""
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
        human_labels = _prepared(resolve(annotations[rows["_kind"] != "machine"]).assign(annotator="resolved"))
        human_labels = human_labels[human_labels["label_source"] != "unresolved"].set_index("conversation_id")
        shared = machine.index.intersection(human_labels.index)
        comparisons.append(("machine vs resolved human labels", machine.loc[shared], human_labels.loc[shared]))
    for name, left, right in comparisons:
        if left.empty:
            continue
        for column in LABEL_COLUMNS:
            pairs = pd.DataFrame({"a": left[column].to_numpy(), "b": right[column].to_numpy()}).dropna()
            if pairs.empty:
                continue
            results.append({"comparison": name, "label": column, "conversations": len(pairs),
                            "percent_agreement": 100 * float((pairs["a"] == pairs["b"]).mean()),
                            "cohens_kappa": cohens_kappa(pairs["a"], pairs["b"])})
    return pd.DataFrame(results, columns=columns)


def breach_check_agreement(ratings: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa of the two annotators' binary checks (coherent, error_free) per breach."""
    columns = ["check", "breaches", "percent_agreement", "cohens_kappa"]
    if ratings.empty:
        return pd.DataFrame(columns=columns)
    rows = ratings.sort_values(["conversation_id", "annotator"])
    rows = rows.assign(_slot=rows.groupby("conversation_id").cumcount())
    first = rows[rows["_slot"] == 0].set_index("conversation_id")
    second = rows[rows["_slot"] == 1].set_index("conversation_id")
    both = first.index.intersection(second.index)
    results = []
    for check in BREACH_CHECKS:
        pairs = pd.DataFrame({"a": first.loc[both, check].to_numpy(dtype=object),
                              "b": second.loc[both, check].to_numpy(dtype=object)}).dropna()
        if pairs.empty:
            continue
        results.append({"check": check, "breaches": len(pairs),
                        "percent_agreement": 100 * float((pairs["a"] == pairs["b"]).mean()),
                        "cohens_kappa": cohens_kappa(pairs["a"].astype(str), pairs["b"].astype(str))})
    return pd.DataFrame(results, columns=columns)


# --- The optional LLM annotator ------------------------------------------------------------------
ANNOTATION_PROMPTS = Path(__file__).resolve().parent.parent / "prompts" / "annotation"
MACHINE_PROMPT = "conversation_labels.j2"
PLAYERS = (("p1", "Player 1"), ("p2", "Player 2"))


@functools.lru_cache(maxsize=1)
def _machine_template() -> tuple[jinja2.Template, str]:
    """The annotator's prompt template and its version: a content hash of the file, as the agents'
    prompts are versioned, so every machine label says which wording produced it."""
    source = (ANNOTATION_PROMPTS / MACHINE_PROMPT).read_text(encoding="utf-8")
    digest = hashlib.sha256(MACHINE_PROMPT.encode("utf-8") + b"\0" + source.encode("utf-8") + b"\0")
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(source)
    return template, "annotation-" + digest.hexdigest()[:12]


def machine_prompt_version() -> str:
    return _machine_template()[1]


def _machine_prompt(row: pd.Series) -> str:
    messages = [{"player": player, "stage": stage, "text": row.get(f"{side}_message_{stage}", "") or NO_MESSAGE}
                for stage in (1, 2) for side, player in PLAYERS]
    payoffs = [(own, other, points) for (own, other), points in protocol.PAYOFFS.items()]
    return _machine_template()[0].render(payoffs=payoffs, messages=messages)


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

    ``conversations``: the blind template (rows keep its ``item`` ids) or the conversations table
    (``conversation_id``); the message columns are needed.
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
    # The blind template names conversations by item (the model sees what annotators see);
    # the conversations table by conversation_id.
    identifier = ITEM if ITEM in conversations else "conversation_id"
    version = machine_prompt_version()

    async def annotate_all() -> list[dict[str, str]]:
        gate = asyncio.Semaphore(concurrency)

        async def annotate_one(row: pd.Series) -> dict[str, str]:
            async with gate:
                reply = await model.complete([ChatMessage(role="user", content=_machine_prompt(row))],
                                             deadline=time.monotonic() + timeout_seconds)
            labels = parse_machine_reply(reply.text) if reply.status == "ok" else None
            note = "" if labels else (f"status {reply.status}" if reply.status != "ok" else "no JSON labels")
            labels = labels or {column: "" for column in LABEL_COLUMNS}
            return {identifier: row[identifier], "annotator": annotator, **labels, "machine_note": note,
                    "prompt_version": version}

        return await asyncio.gather(*(annotate_one(row) for _, row in conversations.iterrows()))

    rows = asyncio.run(annotate_all())
    table = pd.DataFrame(rows, columns=[identifier, "annotator", *LABEL_COLUMNS, "machine_note", "prompt_version"])
    return table
