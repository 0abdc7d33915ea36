"""Figures S22 and S23 of the paper from a run folder's tables.

S22: cooperation rate by model x persona (A) and by model x persona x associate persona (B): the
mean of the agents' rates with its 95 % Wilson interval over the agents and n (agents) on each
bar (in red under analysis.figures.FEW), per agent as the analysis computes them
(``analysis.simulation``: one agent of one model label, matchup and repeat), of the decisions the
models made; under the panels, per model, those decisions (n) and the random fallbacks left out.
S23: per persona, the share of conversations with a pre-game cooperation agreement and the
share of those agreements the agent breached (chose B). Agreements are annotations (SI Note 2,
the ``annotations`` table of docs/DATA.md): S23 is drawn once an annotations CSV is in the folder.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import protocol  # noqa: E402
from agents.types import CallStatus  # noqa: E402
from intervals import wilson_interval  # noqa: E402

from .tournament import PROVIDER_FAILURES  # noqa: E402


def read_tables(folder: Path) -> dict[str, pd.DataFrame]:
    """Tables recognised by their columns, as the analysis package does."""
    found: dict[str, list[pd.DataFrame]] = {"decisions": [], "annotations": []}
    for path in sorted(Path(folder).glob("*.csv")):
        columns = pd.read_csv(path, nrows=0).columns
        if "choice" in columns and "round" in columns and "player_code" in columns:
            found["decisions"].append(pd.read_csv(path))
        elif "annotator" in columns and "agreement" in columns:
            found["annotations"].append(pd.read_csv(path, dtype=str, keep_default_na=False))
    return {name: pd.concat(frames, ignore_index=True) for name, frames in found.items() if frames}


def resolved_agreements(annotations: pd.DataFrame) -> pd.Series:
    """Per conversation: agreement on mutual A, resolved as the analysis resolves it (SI Note 2)."""
    from analysis.annotation import resolve

    resolved = resolve(annotations).set_index("conversation_id")["agreement"]
    return resolved.dropna().astype(bool)


Cell = tuple[float, tuple[float, float], int]  # value, (below, above) distances, n
NO_CELL: Cell = (np.nan, (0.0, 0.0), 0)


def _rate_and_error(values: pd.Series) -> Cell:
    """The share, its 95 % Wilson interval as (below, above) distances, and n."""
    n = len(values)
    if n == 0:
        return NO_CELL
    p = float(values.mean())
    low, high = wilson_interval(int(values.sum()), n)
    return p, (max(0.0, p - low), max(0.0, high - p)), n  # rounding at 0 and 1


def _mean_and_error(summary: pd.DataFrame, keys: dict[str, str]) -> Cell:
    """The mean of the agents' rates, its 95 % interval (Wilson over the agents) as distances,
    and n agents."""
    row = summary.loc[np.logical_and.reduce([summary[k] == v for k, v in keys.items()])]
    if row.empty:
        return NO_CELL
    mean, low, high, n = row.iloc[0][["mean", "ci_low", "ci_high", "agents"]]
    error = (np.nan, np.nan) if pd.isna(low) else (max(0.0, mean - low), max(0.0, high - mean))
    return float(mean), error, int(n)


def _grouped_bars(ax, table: dict[str, dict[str, Cell]], groups: list[str],
                  series: list[str], ylabel: str, legend_title: str | None = None) -> None:
    from analysis.figures import FEW, FEW_COLOUR

    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for i, name in enumerate(series):
        cells = [table.get(g, {}).get(name, NO_CELL) for g in groups]
        errors = np.array([cell[1] for cell in cells]).T  # rows: below, above
        positions = x + (i - (len(series) - 1) / 2) * width
        ax.bar(positions, [cell[0] for cell in cells], width, yerr=errors, capsize=2, label=name)
        for position, (value, (_, above), n) in zip(positions, cells):
            if n:  # n above the bar and its interval, in red where the interval rests on few
                few = n < FEW
                ax.text(position, min(1.0, value + np.nan_to_num(above)) + 0.02, f"n={n}", ha="center", va="bottom",
                        fontsize=6, rotation=90 if len(series) > 3 else 0, color=FEW_COLOUR if few else "black",
                        fontweight="bold" if few else "normal")
    ax.set_xticks(x, groups)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(ylabel)
    if series:
        # Beside the axes, never over the bars (the figure is saved with a tight bounding box).
        ax.legend(fontsize="small", title=legend_title, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)


def _ordered(present: list[str], order: list[str] | None) -> list[str]:
    """``present`` in the config's order; labels the config does not name follow, as found."""
    order = order or []
    return [m for m in order if m in present] + [m for m in present if m not in order]


def _note(fig, text: str) -> None:
    """A line under the panels (below the figure's edge: the tight bounding box takes it in)."""
    fig.text(0.01, 0.0, text, fontsize="small", ha="left", va="top")


def exclusion_note(games_excluded: int, statuses: set[str]) -> str:
    """Why games are missing: the budget, provider failures, or both (the statuses of the calls
    of the excluded games, ``llm_calls.csv``'s ``game_excluded`` rows)."""
    budget = CallStatus.BUDGET.value in statuses
    failures = bool(statuses & (PROVIDER_FAILURES - {CallStatus.BUDGET.value}))
    reason = ("the budget was spent, and provider failures" if budget and failures else
              "the budget was spent: raise budget_usd and rerun" if budget else
              "provider failures: rerun to play them" if failures else "see the run's output")
    return f"{games_excluded} games excluded ({reason})"


def counted_decisions(rates: pd.DataFrame, models: list[str]) -> str:
    """Per model: the decisions its agents made (what the figure counts) and the random fallbacks
    left out (turns the model gave no usable answer for)."""
    totals = rates.groupby("model", sort=False)[["decisions", "fallbacks"]].sum()
    parts = []
    for model in models:
        made, fell = (int(totals.loc[model, "decisions"]), int(totals.loc[model, "fallbacks"])) \
            if model in totals.index else (0, 0)
        parts.append(f"{model}: n = {made} decisions made by the model; {fell} of {made + fell} "
                     f"({fell / max(1, made + fell):.0%}) random fallbacks left out")
    return "; ".join(parts)


def s22_figure(decisions: pd.DataFrame, model_order: list[str] | None = None, note: str = "",
               cooperative_choice: str = protocol.COOPERATE) -> plt.Figure:
    from analysis.simulation import agent_rates, summarise

    rates = agent_rates(decisions, cooperative_choice)  # the decisions the models made; random fallbacks apart
    models = _ordered(list(dict.fromkeys(rates["model"])), model_order)
    note = "\n".join(filter(None, [note, counted_decisions(rates, models)]))
    personas = _ordered(list(dict.fromkeys(rates["persona"])), list(protocol.PERSONAS))
    by_persona = summarise(rates, ["model", "persona"])
    by_associate = summarise(rates, ["model", "persona", "associate_persona"])
    fig, axes = plt.subplots(1 + len(models), 1, figsize=(8, 2.6 * (1 + len(models))), squeeze=False)
    overall = {p: {m: _mean_and_error(by_persona, {"model": m, "persona": p}) for m in models} for p in personas}
    _grouped_bars(axes[0, 0], overall, personas, models, "cooperation rate", "model")
    axes[0, 0].set_title("A  cooperation by persona (mean of agents, 95 % CI; n = agents)")
    for row, model in enumerate(models, start=1):
        by_pair = {p: {q: _mean_and_error(by_associate, {"model": model, "persona": p, "associate_persona": q})
                       for q in personas} for p in personas}
        ax = axes[row, 0]
        _grouped_bars(ax, by_pair, personas, personas, "cooperation rate", "associate")
        ax.set_title(f"B  {model}: agent persona x associate persona")
    fig.tight_layout()
    if note:
        _note(fig, note)
    return fig


def figure_s22(decisions: pd.DataFrame, path: Path, model_order: list[str] | None = None, note: str = "",
               cooperative_choice: str = protocol.COOPERATE) -> Path:
    fig = s22_figure(decisions, model_order, note, cooperative_choice)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def figure_s23(decisions: pd.DataFrame, annotations: pd.DataFrame, path: Path,
               model_order: list[str] | None = None, cooperative_choice: str = protocol.COOPERATE) -> Path:
    """Draws what is labelled and says what is missing (an annotator may return no labels)."""
    agreements = resolved_agreements(annotations) if len(annotations) else pd.Series(dtype=bool)
    conversations = decisions.loc[decisions["player_kind"] == "agent", "conversation_id"].nunique()
    from analysis.simulation import fallback

    # a breach is the agent's B: a random fallback's B is not its behaviour
    agents = decisions[(decisions["player_kind"] == "agent") & ~fallback(decisions)
                       & decisions["conversation_id"].isin(agreements.index)].copy()
    agents["agreement"] = agents["conversation_id"].map(agreements).astype(bool)
    agents["breach"] = agents["choice"].ne(cooperative_choice)
    models = _ordered(list(dict.fromkeys(agents["model"])), model_order)
    personas = _ordered(list(dict.fromkeys(agents["persona"])), list(protocol.PERSONAS))
    labelled = agents["conversation_id"].nunique()
    missing = f"agreement labels for {labelled} of {conversations} conversations"
    if not personas:
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, f"Figure S23: no agreement labels yet ({missing}).\n"
                          "Annotate the conversations (machine or human) and rerun.",
                ha="center", va="center", wrap=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        return path
    fig, axes = plt.subplots(len(personas), 2, figsize=(10, 2.6 * len(personas)), squeeze=False)
    for row, persona in enumerate(personas):
        own = agents[agents["persona"] == persona]
        agreed = {m: _rate_and_error(own[own["model"] == m]["agreement"]) for m in models}
        breached = {m: _rate_and_error(own[(own["model"] == m) & own["agreement"]]["breach"]) for m in models}
        for col, (values, label) in enumerate(((agreed, "agreements"), (breached, "breaches of agreements"))):
            ax = axes[row, col]
            _grouped_bars(ax, {"": values}, [""], models, "share", "model" if col == 1 else None)
            if col == 0:
                ax.get_legend().remove()  # one legend per row, beside the right panel
            ax.set_title(f"{'ABC'[row] if row < 3 else row}  {persona}: {label}")
    fig.tight_layout()
    if labelled < conversations:
        _note(fig, f"{missing}; the rest are not counted")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _excluded_statuses(folder: Path) -> set[str]:
    path = folder / "llm_calls.csv"
    if not path.exists():
        return set()
    calls = pd.read_csv(path, usecols=["status", "game_excluded"], dtype=str, keep_default_na=False)
    return set(calls.loc[calls["game_excluded"].str.lower() == "true", "status"])


def write_figures(tables_dir: Path, out_dir: Path, *, model_order: list[str] | None = None,
                  games_excluded: int = 0, cooperative_choice: str | None = protocol.COOPERATE) -> dict[str, Path]:
    """S22 (and S23 when annotations are present); models in ``model_order`` (the config's). Both
    count the experiment's ``cooperative_choice``: with none (a design without), no figure."""
    tables = read_tables(Path(tables_dir))
    out = Path(out_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    note = exclusion_note(games_excluded, _excluded_statuses(Path(tables_dir))) if games_excluded else ""
    if "decisions" in tables and len(tables["decisions"]) and cooperative_choice is not None:
        written["S22"] = figure_s22(tables["decisions"], out / "S22_cooperation.png", model_order, note,
                                    cooperative_choice)
        if "annotations" in tables:
            written["S23"] = figure_s23(tables["decisions"], tables["annotations"],
                                        out / "S23_agreements_breaches.png", model_order, cooperative_choice)
    return written
