"""Figures S22 and S23 of the paper from a run folder's tables.

S22: cooperation rate by model x persona (A) and by model x persona x associate persona (B).
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


def _rate_and_error(values: pd.Series) -> tuple[float, tuple[float, float]]:
    """The share and its 95 % normal interval as (below, above), clipped to [0, 1]."""
    n = len(values)
    if n == 0:
        return np.nan, (0.0, 0.0)
    p = values.mean()
    half = 1.96 * np.sqrt(p * (1 - p) / n)
    return p, (p - max(0.0, p - half), min(1.0, p + half) - p)


def _grouped_bars(ax, table: dict[str, dict[str, tuple[float, float]]], groups: list[str],
                  series: list[str], ylabel: str) -> None:
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for i, name in enumerate(series):
        cells = [table.get(g, {}).get(name, (np.nan, (0.0, 0.0))) for g in groups]
        errors = np.array([cell[1] for cell in cells]).T  # rows: below, above
        ax.bar(x + (i - (len(series) - 1) / 2) * width, [cell[0] for cell in cells], width, yerr=errors,
               capsize=2, label=name)
    ax.set_xticks(x, groups)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(ylabel)


def figure_s22(decisions: pd.DataFrame, path: Path) -> Path:
    agents = decisions[decisions["player_kind"] == "agent"].assign(
        cooperated=lambda d: d["choice"].eq(protocol.COOPERATE))
    models = list(dict.fromkeys(agents["model"]))
    personas = [p for p in protocol.PERSONAS if p in set(agents["persona"])]
    fig, axes = plt.subplots(1 + len(models), 1, figsize=(7, 2.6 * (1 + len(models))), squeeze=False)
    overall = {p: {m: _rate_and_error(agents[(agents["persona"] == p) & (agents["model"] == m)]["cooperated"])
                   for m in models} for p in personas}
    _grouped_bars(axes[0, 0], overall, personas, models, "cooperation rate")
    axes[0, 0].set_title("A  cooperation by persona")
    axes[0, 0].legend(fontsize="small", title="model")
    for row, model in enumerate(models, start=1):
        own = agents[agents["model"] == model]
        by_associate = {p: {q: _rate_and_error(own[(own["persona"] == p) & (own["associate_type"] == q)]["cooperated"])
                            for q in personas} for p in personas}
        ax = axes[row, 0]
        _grouped_bars(ax, by_associate, personas, personas, "cooperation rate")
        ax.set_title(f"B  {model}: agent persona x associate persona")
        ax.legend(fontsize="small", title="associate")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def figure_s23(decisions: pd.DataFrame, annotations: pd.DataFrame, path: Path) -> Path:
    agreements = resolved_agreements(annotations)
    agents = decisions[(decisions["player_kind"] == "agent")
                       & decisions["conversation_id"].isin(agreements.index)].copy()
    agents["agreement"] = agents["conversation_id"].map(agreements).astype(bool)
    agents["breach"] = agents["choice"].eq(protocol.DEFECT)
    models = list(dict.fromkeys(agents["model"]))
    personas = [p for p in protocol.PERSONAS if p in set(agents["persona"])]
    fig, axes = plt.subplots(len(personas), 2, figsize=(8, 2.6 * max(1, len(personas))), squeeze=False)
    for row, persona in enumerate(personas):
        own = agents[agents["persona"] == persona]
        agreed = {m: _rate_and_error(own[own["model"] == m]["agreement"]) for m in models}
        breached = {m: _rate_and_error(own[(own["model"] == m) & own["agreement"]]["breach"]) for m in models}
        for col, (values, label) in enumerate(((agreed, "agreements"), (breached, "breaches of agreements"))):
            ax = axes[row, col]
            _grouped_bars(ax, {"": values}, [""], models, "share")
            ax.set_title(f"{'ABC'[row] if row < 3 else row}  {persona}: {label}")
            ax.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_figures(tables_dir: Path, out_dir: Path) -> dict[str, Path]:
    tables = read_tables(Path(tables_dir))
    out = Path(out_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    if "decisions" in tables and len(tables["decisions"]):
        written["S22"] = figure_s22(tables["decisions"], out / "S22_cooperation.png")
        if "annotations" in tables:
            written["S23"] = figure_s23(tables["decisions"], tables["annotations"],
                                        out / "S23_agreements_breaches.png")
    return written
