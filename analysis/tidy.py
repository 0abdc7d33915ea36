"""Tidy tables: per decision, per conversation (with its sides), per participant, per agent.

Every row carries the treatment and the label setting. Player 1 of a conversation is the
human participant (in H-H the participant with the smaller code; between two agents the
smaller id), player 2 the associate — the convention of the annotation template (SI Note 2).
"""

from __future__ import annotations

import pandas as pd

import protocol
from analysis.load import Exports

GROUP_KEYS = ("session_code", "treatment", "associate_type", "label_setting")
HEADLINE_GAME = "WC"  # the paper's main results are the game with communication


def decisions_table(exports: Exports, cooperative_choice: str = protocol.COOPERATE) -> pd.DataFrame:
    """The decisions; ``cooperated``: the choice is the experiment's cooperative choice."""
    decisions = exports.decisions.drop(columns=["_file"], errors="ignore").copy()
    decisions["cooperated"] = decisions["choice"] == cooperative_choice
    return decisions.sort_values(["session_code", "game", "round", "conversation_id", "player_code"],
                                 ignore_index=True)


def conversations_table(decisions: pd.DataFrame, messages: pd.DataFrame,
                        labels: pd.DataFrame | None = None, cooperative_choice: str = protocol.COOPERATE
                        ) -> pd.DataFrame:
    """One row per pair-round of the WC game: both choices, the four messages, the labels.

    ``labels`` are the resolved annotations (``annotation.resolve``); with them come the
    agreement and each side's promise breach: agreed on A/A, then chose B (SI Note 2); with
    another experiment, chose other than its ``cooperative_choice``.
    """
    wc = decisions[decisions["game"] == HEADLINE_GAME].copy()
    # Player 1 first: humans before agents, then the smaller code.
    wc["_kind_order"] = (wc["player_kind"] != "human").astype(int)
    wc = wc.sort_values(["conversation_id", "_kind_order", "player_code"])
    first = wc.drop_duplicates("conversation_id").copy()
    # Swap when the row found first is not player 1: an agent's row whose human's row is missing,
    # or (same kind) the associate has the smaller code.
    swap = ((first["player_kind"] != "human") & (first["associate_kind"] == "human")) | (
        (first["player_kind"] == first["associate_kind"]) & (first["associate_code"] < first["player_code"]))
    columns = ["session_code", "treatment", "associate_type", "label_setting", "game_order", "source",
               "round", "conversation_id"]
    conversations = first[columns].copy()
    own = {"code": "player_code", "kind": "player_kind", "choice": "choice"}
    other = {"code": "associate_code", "kind": "associate_kind", "choice": "associate_choice"}
    for field in ("code", "kind", "choice"):
        conversations[f"p1_{field}"] = first[own[field]].where(~swap, first[other[field]])
        conversations[f"p2_{field}"] = first[other[field]].where(~swap, first[own[field]])
    agents = wc[wc["player_kind"] == "agent"]
    personas = agents.groupby(["session_code", "player_code"])["persona"].first()
    for side in ("p1", "p2"):
        keys = list(zip(conversations["session_code"], conversations[f"{side}_code"]))
        persona = pd.Series([personas.get(key, "") for key in keys], index=conversations.index)
        # An agent whose own row is missing has the session's associate type as its persona.
        persona = persona.where(persona != "", conversations["associate_type"])
        conversations[f"{side}_persona"] = persona.where(conversations[f"{side}_kind"] == "agent", "")
    conversations = _attach_messages(conversations, messages)
    if labels is not None and not labels.empty:
        conversations = conversations.merge(labels, on="conversation_id", how="left")
    else:
        for column in ("p1_preferred", "p2_preferred", "p1_wants_other", "p2_wants_other", "label_source"):
            conversations[column] = ""
        conversations["agreement"] = pd.Series(pd.NA, index=conversations.index, dtype="boolean")
    conversations["agreement"] = conversations["agreement"].astype("boolean")
    for side in ("p1", "p2"):
        choice = conversations[f"{side}_choice"]
        breached = choice.notna() & (choice != cooperative_choice)
        conversations[f"{side}_breached"] = breached.astype("boolean").where(conversations["agreement"] == True)  # noqa: E712
    return conversations.reset_index(drop=True)


def message_columns() -> list[str]:
    return [f"{side}_message_{stage}" for stage in (1, 2) for side in ("p1", "p2")]


def _attach_messages(conversations: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    for column in message_columns():
        conversations[column] = ""
    if messages.empty:
        return conversations
    shown = messages.copy()
    # A message not sent in time was never shown: the reader saw nothing.
    not_shown = shown["sent_in_time"] == False  # noqa: E712
    shown.loc[not_shown.fillna(False).astype(bool), "text"] = ""
    for side in ("p1", "p2"):
        keyed = conversations[["conversation_id", f"{side}_code"]].rename(columns={f"{side}_code": "sender_code"})
        merged = keyed.merge(shown[["conversation_id", "sender_code", "stage", "text"]],
                             on=["conversation_id", "sender_code"], how="left")
        for stage in (1, 2):
            texts = merged[merged["stage"] == stage].drop_duplicates("conversation_id")
            conversations[f"{side}_message_{stage}"] = (
                conversations["conversation_id"].map(texts.set_index("conversation_id")["text"])
                .astype(object).fillna(""))  # object: with one exchange, stage 2 maps to no text at all
    return conversations


def sides_table(conversations: pd.DataFrame) -> pd.DataFrame:
    """Each conversation twice, once per side: who, which kind, choice, agreement, breach."""
    common = ["session_code", "treatment", "associate_type", "label_setting", "round", "conversation_id",
              "agreement"]
    parts = []
    for side, other in (("p1", "p2"), ("p2", "p1")):
        part = conversations[common].copy()
        part["side"] = side
        part["code"] = conversations[f"{side}_code"]
        part["kind"] = conversations[f"{side}_kind"]
        part["persona"] = conversations[f"{side}_persona"]
        part["choice"] = conversations[f"{side}_choice"]
        part["breached"] = conversations[f"{side}_breached"]
        part["associate_code"] = conversations[f"{other}_code"]
        part["associate_kind"] = conversations[f"{other}_kind"]
        part["associate_breached"] = conversations[f"{other}_breached"]
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _rates_by_player(decisions: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Per player and game: rounds, cooperations, the cooperation rate, and rounds timed out. An
    agent's timed-out decision is its fallback, the system's random choice and not its behaviour:
    its rounds and rate count only the decisions its model made."""
    rows = decisions[decisions["player_kind"] == kind].copy()
    rows["counted"] = ~rows["timed_out"].fillna(False).astype(bool) if kind == "agent" else True
    rows["counted_cooperation"] = rows["cooperated"] & rows["counted"]
    keys = list(GROUP_KEYS) + ["player_code"]
    result = None
    for game in protocol.GAMES:
        per_game = rows[rows["game"] == game].groupby(keys, observed=True).agg(
            **{f"rounds_{game}": ("counted", "sum"), f"cooperations_{game}": ("counted_cooperation", "sum"),
               f"timed_out_{game}": ("timed_out", lambda s: int(s.fillna(False).sum()))})
        per_game[f"cooperation_rate_{game}"] = per_game[f"cooperations_{game}"] / per_game[f"rounds_{game}"]
        result = per_game if result is None else result.join(per_game, how="outer")
    return result.reset_index()


def _breach_counts(sides: pd.DataFrame, kind: str) -> pd.DataFrame:
    own = sides[sides["kind"] == kind]
    agreed = own[own["agreement"] == True]  # noqa: E712
    counts = agreed.groupby(["session_code", "code"]).agg(
        agreement_rounds=("conversation_id", "size"),
        own_breaches=("breached", lambda s: int(s.fillna(False).sum())),
        associate_breaches=("associate_breached", lambda s: int(s.fillna(False).sum())),
        agent_associate_rounds=("associate_kind", lambda s: int((s == "agent").sum())))
    annotated = own[own["agreement"].notna()].groupby(["session_code", "code"]).size()
    counts = counts.reindex(counts.index.union(annotated.index), fill_value=0)
    counts["annotated_rounds"] = annotated.reindex(counts.index).fillna(0).astype(int)
    counts["own_breach_rate"] = counts["own_breaches"] / counts["agreement_rounds"].where(
        counts["agreement_rounds"] > 0)
    return counts.rename_axis(["session_code", "player_code"]).reset_index()


def participants_table(exports: Exports, decisions: pd.DataFrame, sides: pd.DataFrame) -> pd.DataFrame:
    """Per human participant: cooperation in each game, agreements and breaches, questionnaires.

    ``agent_breach_frequency`` (Fig. 3): the share of the participant's agreement rounds in
    which the agent associate chose B.
    """
    rates = _rates_by_player(decisions, "human")
    breaches = _breach_counts(sides, "human")
    table = rates.merge(breaches, on=["session_code", "player_code"], how="left")
    agent_rounds = table["agent_associate_rounds"].where(table["agent_associate_rounds"] > 0)
    table["agent_breach_frequency"] = table["associate_breaches"] / agent_rounds
    questionnaires = exports.participants.drop(columns=["_file"], errors="ignore").rename(
        columns={"participant_code": "player_code"})
    questionnaires = questionnaires.drop_duplicates(["session_code", "player_code"])
    table = table.merge(questionnaires, on=["session_code", "player_code"], how="outer",
                        suffixes=("", "_questionnaire"))
    for key in GROUP_KEYS[1:]:
        # Participants who answered but have no decisions keep their questionnaire's keys.
        if f"{key}_questionnaire" in table:
            table[key] = table[key].where(table[key].notna(), table[f"{key}_questionnaire"])
            table = table.drop(columns=f"{key}_questionnaire")
    return table.rename(columns={"player_code": "participant_code"})


def agent_fallbacks(agents: pd.DataFrame, game: str | None = None) -> tuple[int, int]:
    """(fallbacks, decisions) of the agents table's lab agents: random choices of turns that fell
    back, and all their decisions; ``game``: one game's, else both."""
    games = [game] if game else list(protocol.GAMES)
    def total(column: str) -> int:
        return int(pd.to_numeric(agents[column]).astype("Float64").fillna(0).sum()) if column in agents else 0

    fell = sum(total(f"timed_out_{g}") for g in games)
    made = sum(total(f"rounds_{g}") for g in games)
    return fell, fell + made


def agents_table(exports: Exports, decisions: pd.DataFrame, sides: pd.DataFrame) -> pd.DataFrame:
    """Per agent: cooperation in each game, agreements, breaches, and its model calls."""
    rates = _rates_by_player(decisions, "agent")
    personas = decisions[decisions["player_kind"] == "agent"].groupby(["session_code", "player_code"])[
        "persona"].first()
    rates["persona"] = [personas.get(key, "") or associate_type for key, associate_type in
                        zip(zip(rates["session_code"], rates["player_code"]), rates["associate_type"])]
    table = rates.merge(_breach_counts(sides, "agent"), on=["session_code", "player_code"], how="left")
    calls = exports.llm_calls
    if not calls.empty:
        per_agent = calls.groupby(["session_code", "agent_id"]).agg(
            model_calls=("status", "size"), calls_not_ok=("status", lambda s: int((s != "ok").sum())),
            input_tokens=("input_tokens", "sum"), output_tokens=("output_tokens", "sum"), cost=("cost", "sum"),
            model=("model", lambda s: ", ".join(sorted(set(s) - {""}))))
        table = table.merge(per_agent.rename_axis(["session_code", "player_code"]).reset_index(),
                            on=["session_code", "player_code"], how="left")
    return table.rename(columns={"player_code": "agent_id"})
