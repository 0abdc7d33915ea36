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


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of a share: inside [0, 1], and of positive width at 0 and 1.

    Equals R's ``prop.test(successes, n, correct = FALSE)$conf.int`` (z = qnorm(0.975)); see
    tests/test_simulate_money_and_failures.py.
    """
    if n == 0:
        return np.nan, np.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate_and_error(values: pd.Series) -> tuple[float, tuple[float, float]]:
    """The share and its 95 % Wilson interval as (below, above) distances."""
    n = len(values)
    if n == 0:
        return np.nan, (0.0, 0.0)
    p = float(values.mean())
    low, high = wilson_interval(int(values.sum()), n)
    return p, (max(0.0, p - low), max(0.0, high - p))  # rounding at 0 and 1


def _grouped_bars(ax, table: dict[str, dict[str, tuple[float, float]]], groups: list[str],
                  series: list[str], ylabel: str, legend_title: str | None = None) -> None:
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


def figure_s22(decisions: pd.DataFrame, path: Path, model_order: list[str] | None = None,
               games_excluded: int = 0) -> Path:
    agents = decisions[decisions["player_kind"] == "agent"].assign(
        cooperated=lambda d: d["choice"].eq(protocol.COOPERATE))
    models = _ordered(list(dict.fromkeys(agents["model"])), model_order)
    personas = [p for p in protocol.PERSONAS if p in set(agents["persona"])]
    fig, axes = plt.subplots(1 + len(models), 1, figsize=(8, 2.6 * (1 + len(models))), squeeze=False)
    overall = {p: {m: _rate_and_error(agents[(agents["persona"] == p) & (agents["model"] == m)]["cooperated"])
                   for m in models} for p in personas}
    _grouped_bars(axes[0, 0], overall, personas, models, "cooperation rate", "model")
    axes[0, 0].set_title("A  cooperation by persona")
    for row, model in enumerate(models, start=1):
        own = agents[agents["model"] == model]
        by_associate = {p: {q: _rate_and_error(own[(own["persona"] == p) & (own["associate_type"] == q)]["cooperated"])
                            for q in personas} for p in personas}
        ax = axes[row, 0]
        _grouped_bars(ax, by_associate, personas, personas, "cooperation rate", "associate")
        ax.set_title(f"B  {model}: agent persona x associate persona")
    fig.tight_layout()
    if games_excluded:
        _note(fig, f"{games_excluded} games excluded (provider failures; see the run's output)")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def figure_s23(decisions: pd.DataFrame, annotations: pd.DataFrame, path: Path,
               model_order: list[str] | None = None) -> Path:
    """Draws what is labelled and says what is missing (an annotator may return no labels)."""
    agreements = resolved_agreements(annotations) if len(annotations) else pd.Series(dtype=bool)
    conversations = decisions.loc[decisions["player_kind"] == "agent", "conversation_id"].nunique()
    agents = decisions[(decisions["player_kind"] == "agent")
                       & decisions["conversation_id"].isin(agreements.index)].copy()
    agents["agreement"] = agents["conversation_id"].map(agreements).astype(bool)
    agents["breach"] = agents["choice"].eq(protocol.DEFECT)
    models = _ordered(list(dict.fromkeys(agents["model"])), model_order)
    personas = [p for p in protocol.PERSONAS if p in set(agents["persona"])]
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


def write_figures(tables_dir: Path, out_dir: Path, *, model_order: list[str] | None = None,
                  games_excluded: int = 0) -> dict[str, Path]:
    """S22 (and S23 when annotations are present); models in ``model_order`` (the config's)."""
    tables = read_tables(Path(tables_dir))
    out = Path(out_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    if "decisions" in tables and len(tables["decisions"]):
        written["S22"] = figure_s22(tables["decisions"], out / "S22_cooperation.png", model_order, games_excluded)
        if "annotations" in tables:
            written["S23"] = figure_s23(tables["decisions"], tables["annotations"],
                                        out / "S23_agreements_breaches.png", model_order)
    return written
