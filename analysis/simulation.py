"""Agent-vs-agent simulations (SI Note 4, treatment A-A): the report's simulation section, and
the per-agent cooperation rates that the simulation lab's Fig. S22 draws from the same function.

A model is an arm of the run's config, named by its ``label`` (the decisions' ``model`` column,
and the session code ``<run>-<label>``), never by the provider's model name: two arms of one
model (a temperature or memory sweep) are two rows. An agent is one agent of one arm, matchup
and repeat — each repeat starts fresh agents, so the same id in another repeat is another
agent — and intervals are over agents (the 95 % Wilson interval of the mean of their rates,
analysis.stats.rate_interval, as the analysis gives the participants' and the lab agents'
rates), never over pooled decisions.
"""

from __future__ import annotations

import pandas as pd

import protocol
from analysis import stats
from analysis.comparisons import MANN_WHITNEY_COLUMNS, PERSONA_ORDER, Section, pairwise_mann_whitney

SIMULATION_TREATMENT = "A-A"
AGENT_KEYS = ["model", "session_code", "matchup", "repeat", "agent_id"]
SUMMARY_COLUMNS = ["agents", "decisions", "fallbacks", "mean", "sd", "median", "ci_low", "ci_high"]


def fallback(decisions: pd.DataFrame) -> pd.Series:
    """Decisions the model did not make: the random choice of a turn that fell back (flagged
    ``timed_out``, as a late human's), never the agent's behaviour."""
    if "timed_out" not in decisions:
        return pd.Series(False, index=decisions.index)
    return decisions["timed_out"].astype(str).str.strip().str.lower().isin(("true", "1"))


def agent_rates(decisions: pd.DataFrame, cooperative_choice: str = protocol.COOPERATE) -> pd.DataFrame:
    """Per simulated agent and game: its persona, its associates' persona, the decisions its model
    made, their cooperations (``cooperative_choice``: the experiment's) and cooperation rate (NaN
    with none), and its fallbacks (random choices, not counted). ``decisions``: the decisions table
    (the run folder's or the analysis's)."""
    own = decisions[(decisions["treatment"] == SIMULATION_TREATMENT) & (decisions["player_kind"] == "agent")].copy()
    for column in ("model", "matchup", "repeat"):
        own[column] = own[column].fillna("").astype(str) if column in own else ""
    own["fallback"] = fallback(own)
    own["made"] = ~own["fallback"]
    own["cooperated"] = own["choice"].eq(cooperative_choice) & own["made"]
    own = own.rename(columns={"player_code": "agent_id", "associate_type": "associate_persona"})
    keys = AGENT_KEYS + ["persona", "associate_persona", "game"]
    rates = own.groupby(keys, sort=False).agg(decisions=("made", "sum"), cooperations=("cooperated", "sum"),
                                              fallbacks=("fallback", "sum")).reset_index()
    rates["cooperation_rate"] = rates["cooperations"] / rates["decisions"].where(rates["decisions"] > 0)
    return rates


def summarise(rates: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group of ``keys``: agents (n: those whose model made a decision), their decisions and
    fallbacks, and the mean, SD, median and 95 % interval (Wilson over the agents:
    analysis.stats.rate_interval) of their cooperation rates."""
    rows = []
    for values, group in rates.groupby(keys, sort=False):
        rated = group["cooperation_rate"].dropna()
        low, high = stats.rate_interval(rated) if len(rated) else (float("nan"), float("nan"))
        rows.append([*values, len(rated), int(group["decisions"].sum()), int(group["fallbacks"].sum()),
                     rated.mean(), rated.std(), rated.median(), low, high])
    return pd.DataFrame(rows, columns=keys + SUMMARY_COLUMNS)


def simulation_section(sides: pd.DataFrame, decisions: pd.DataFrame):
    section = Section("simulation", "Agent-vs-agent simulations", "SI Note 4 (Fig. S22A and B, Fig. S23)")
    section.notes.append("Agents of the simulation lab (treatment A-A), per model (the config's label) and "
                         "persona. An agent is one agent of one repeat (each repeat starts fresh agents); means "
                         "and their 95 % Wilson intervals are over agents; the simulation lab draws its own "
                         "figures. Only the decisions the models made count; random fallbacks are counted apart "
                         "(fallbacks).")
    rates = agent_rates(decisions)
    section.tables["cooperation_rates"] = summarise(rates, ["model", "persona", "game"])
    parts = []
    for model, group in rates[rates["game"] == "WC"].dropna(subset=["cooperation_rate"]).groupby("model", sort=False):
        table = pairwise_mann_whitney(group, "cooperation_rate", "persona",
                                      tuple(p for p in PERSONA_ORDER if p in set(group["persona"])), [],
                                      "simulated agents")
        table.insert(0, "model", model)
        parts.append(table)
    section.tables["pairwise_WC"] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["model", *MANN_WHITNEY_COLUMNS])
    # Fig. S22 panel B: per model, agent persona x associate persona.
    section.tables["cooperation_by_associate"] = summarise(rates, ["model", "persona", "associate_persona", "game"])
    annotated = sides[(sides["treatment"] == SIMULATION_TREATMENT) & sides["agreement"].notna()].copy()
    if annotated.empty:
        section.notes.append("No annotations of the simulated conversations: agreements and breaches need them.")
        return section
    # One model per simulation session (session code = run-model label): per model, not pooled.
    annotated["model"] = annotated["session_code"].map(rates.groupby("session_code")["model"].first()).fillna("")
    agreed = annotated[annotated["agreement"] == True]  # noqa: E712
    keys = ["model", "persona"]
    table = pd.DataFrame({
        "conversations": annotated.groupby(keys).size(),
        "agreement_percentage": 100 * annotated.groupby(keys)["agreement"].mean().astype(float),
        "agreements": agreed.groupby(keys).size(),
        "breach_percentage": 100 * agreed.groupby(keys)["breached"].mean().astype(float),
    }).reset_index()
    table["agreements"] = table["agreements"].fillna(0).astype(int)
    persona_rank = {p: i for i, p in enumerate(PERSONA_ORDER)}
    section.tables["agreements_breaches"] = table.sort_values(
        ["model", "persona"], key=lambda c: c.map(persona_rank) if c.name == "persona" else c,
        ignore_index=True)
    return section
