"""Summaries, figures and the HTML report of a similarity run, from its tidy tables.

The analysis package's report renders its own ``Analysis`` of the lab's tables, so this module
writes a small self-contained page of its own: tables via pandas, matplotlib figures embedded
as PNG (and saved as PNG and SVG under ``figures/``, as the analysis report does).
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

FRAMING_STYLES = {"similar": "-o", "dissimilar": "--s", "noise": ":^"}


# --- summaries ------------------------------------------------------------------------------
def cooperation_rates(decisions: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Share choosing A among parsed decisions, with n and its 95 % Wilson interval
    (``ci_low``, ``ci_high``: of positive width at 0 and 1, unlike the normal interval)."""
    from intervals import wilson_interval

    parsed = decisions[decisions["choice"].notna() & (decisions["choice"] != "")].copy()
    parsed["cooperated"] = parsed["choice"] == "A"
    columns = by + ["n", "cooperation_rate", "ci_low", "ci_high"]
    if parsed.empty:
        return pd.DataFrame(columns=columns)
    grouped = parsed.groupby(by, dropna=False)["cooperated"].agg(["size", "mean", "sum"]).reset_index()
    grouped = grouped.rename(columns={"size": "n", "mean": "cooperation_rate"})
    intervals = [wilson_interval(int(k), int(n)) for k, n in zip(grouped["sum"], grouped["n"])]
    grouped["ci_low"] = [low for low, _ in intervals]
    grouped["ci_high"] = [high for _, high in intervals]
    return grouped[columns]


def _in_order(present, order: Optional[list[str]]) -> list[str]:
    """Models in the config's order; any the config does not name follow, sorted."""
    present = list(dict.fromkeys(present))
    order = order or []
    return [m for m in order if m in present] + sorted(m for m in present if m not in order)


def label_counts(labels: pd.DataFrame) -> pd.DataFrame:
    """Per judge, model, game, framing, score and category: decisions judged and labelled."""
    columns = ["judge_label", "judge_model", "model", "experiment", "game", "framing",
               "similarity", "category", "judged", "labelled", "share"]
    judged = labels[labels["assigned"].notna()].copy()
    if judged.empty:
        return pd.DataFrame(columns=columns)
    judged["assigned"] = judged["assigned"].astype(str).str.lower() == "true"
    keys = ["judge_label", "judge_model", "model", "experiment", "game", "framing", "similarity", "category"]
    counts = judged.groupby(keys, dropna=False)["assigned"].agg(["size", "sum"]).reset_index()
    counts = counts.rename(columns={"size": "judged", "sum": "labelled"})
    counts["share"] = counts["labelled"] / counts["judged"]
    return counts[columns]


def welfare_summary(welfare: pd.DataFrame) -> pd.DataFrame:
    columns = ["experiment", "game", "view", "model", "co_player", "framing", "groups",
               "mean_similarity", "welfare_share"]
    complete = welfare[welfare["welfare_share"].notna()]
    if complete.empty:
        return pd.DataFrame(columns=columns)
    keys = ["experiment", "game", "view", "model", "co_player", "framing"]
    summary = complete.groupby(keys, dropna=False).agg(
        groups=("welfare_share", "size"), mean_similarity=("similarity", "mean"),
        welfare_share=("welfare_share", "mean")).reset_index()
    return summary[columns]


def score_comparison(scores: pd.DataFrame) -> pd.DataFrame:
    """Endogenous ratings next to the exogenous agreement: positive overrating = rated higher."""
    columns = ["view", "rater", "co_player", "endogenous_score", "exogenous_score", "overrating"]
    rated = scores[(scores["kind"] == "endogenous") & scores["score"].notna()]
    if rated.empty:
        return pd.DataFrame(columns=columns)
    table = rated.groupby(["view", "rater", "co_player"], dropna=False).agg(
        endogenous_score=("score", "mean"), exogenous_score=("exogenous_score", "first")).reset_index()
    table["overrating"] = table["endogenous_score"] - table["exogenous_score"]
    return table[columns]


def rates_by_score(rates: pd.DataFrame) -> pd.DataFrame:
    """Rows model × framing, one column per similarity: the report's readable form."""
    if rates.empty:
        return rates
    wide = rates.pivot_table(index=["model", "framing"], columns="similarity", values="cooperation_rate")
    wide.columns = [f"{c:g}%" for c in wide.columns]
    return wide.reset_index()


def labels_by_category(counts: pd.DataFrame) -> pd.DataFrame:
    """Rows judge × model × condition × score, one column of label counts per category."""
    if counts.empty:
        return counts
    keys = ["judge_model", "model", "experiment", "framing", "similarity", "judged"]
    wide = counts.set_index(keys + ["category"])["labelled"].unstack("category").reset_index()
    wide.columns.name = None
    return wide


# --- figures -----------------------------------------------------------------------------
def _model_axes(models: list[str], title: str):
    columns = min(3, max(1, len(models)))
    rows = int(np.ceil(len(models) / columns))
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False,
                                sharey=True)
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    figure.suptitle(title, y=1.0, va="bottom")  # above the panel titles (saved with a tight box)
    return figure, list(axes.flat)


def curve_figure(rates: pd.DataFrame, baseline: pd.DataFrame, threshold_percent: float,
                 framings: list[str], title: str, model_order: Optional[list[str]] = None) -> Optional[plt.Figure]:
    """Cooperation vs similarity per model; the b-similarity threshold as a vertical line."""
    models = _in_order(rates["model"].unique(), model_order)
    if not models:
        return None
    figure, axes = _model_axes(models, title)
    for ax, model in zip(axes, models):
        for framing in framings:
            curve = rates[(rates["model"] == model) & (rates["framing"] == framing)].sort_values("similarity")
            if not curve.empty:
                errors = [(curve["cooperation_rate"] - curve["ci_low"]).clip(lower=0),
                          (curve["ci_high"] - curve["cooperation_rate"]).clip(lower=0)]
                ax.errorbar(curve["similarity"], curve["cooperation_rate"], yerr=errors,
                            fmt=FRAMING_STYLES.get(framing, "-"), capsize=2, label=framing)
        base = baseline[baseline["model"] == model]
        if not base.empty:
            ax.axhline(base["cooperation_rate"].iloc[0], color="grey", linestyle=":", label="no signal")
        ax.axvline(threshold_percent, color="red", linestyle="--",
                   label=f"b-threshold {threshold_percent:.1f}%")
        ax.set_title(model)
        ax.set_xlabel("similarity (%)")
        ax.set_ylabel("cooperation rate")
        ax.set_xlim(-3, 103)
        ax.set_ylim(-0.05, 1.05)
    # One legend beside the panels, never over the curves (the files are saved with a tight
    # bounding box, which also keeps every axis label inside the image).
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(0.99, 0.86))
    # fixed margins: tight_layout would measure every label and triple the drawing time
    figure.subplots_adjust(left=0.08, right=0.98, bottom=0.12, top=0.86, wspace=0.12, hspace=0.5)
    return figure


def label_figure(counts: pd.DataFrame, model_order: Optional[list[str]] = None) -> Optional[plt.Figure]:
    """Share of judged decisions carrying each label, per model."""
    if counts.empty:
        return None
    per_model = counts.groupby(["model", "category"])[["labelled", "judged"]].sum().reset_index()
    per_model["share"] = per_model["labelled"] / per_model["judged"]
    wide = per_model.pivot(index="category", columns="model", values="share").fillna(0)
    wide = wide[_in_order(wide.columns, model_order)]
    figure, ax = plt.subplots(figsize=(8, 0.35 * len(wide) + 1.5))
    wide.plot.barh(ax=ax)
    ax.legend(fontsize=7, title="model", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars
    judges = ", ".join(sorted(counts["judge_model"].dropna().unique()))
    ax.set_title(f"Justification labels (judge: {judges})")
    ax.set_xlabel("share of judged decisions")
    figure.tight_layout()  # long category names need the measured margin
    return figure


def scores_figure(comparison: pd.DataFrame) -> Optional[plt.Figure]:
    if comparison.empty or comparison["exogenous_score"].isna().all():
        return None
    figure, ax = plt.subplots(figsize=(4.5, 4))
    for view, part in comparison.groupby("view"):
        ax.scatter(part["exogenous_score"], part["endogenous_score"], label=view)
    ax.plot([0, 100], [0, 100], color="grey", linestyle=":")
    ax.set_xlabel("exogenous similarity (agreement, %)")
    ax.set_ylabel("endogenous similarity (rated, %)")
    ax.set_title("Rated vs measured similarity")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.subplots_adjust(left=0.15, right=0.97, bottom=0.13, top=0.9)
    return figure


# --- the page ----------------------------------------------------------------------------
@dataclass
class Section:
    title: str
    notes: list[str] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Optional[plt.Figure]] = field(default_factory=dict)  # file stem -> figure


def _save(figure: plt.Figure, stem: Path) -> str:
    """PNG and SVG next to the report; returns the PNG as base64 for the page."""
    # bbox_inches="tight": the image grows to hold every label and legend (fixed margins clipped
    # the x-axis label of one-row figures)
    figure.savefig(stem.with_suffix(".svg"), bbox_inches="tight")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    stem.with_suffix(".png").write_bytes(buffer.getvalue())
    return base64.b64encode(buffer.getvalue()).decode()


def _page(title: str, sections: list[Section], figures_dir: Path) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
             "table{border-collapse:collapse;font-size:12px;margin:8px 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{html.escape(note)}</p>" for note in section.notes]
        parts += [f"<img alt='{html.escape(name)}' src='data:image/png;base64,{_save(f, figures_dir / name)}'>"
                  for name, f in section.figures.items() if f is not None]
        for name, table in section.tables.items():
            parts.append(f"<h3>{html.escape(name)}</h3>")
            parts.append(table.to_html(index=False, float_format=lambda x: f"{x:.3g}", na_rep="")
                         if not table.empty else "<p>(no data)</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_sections(frames: dict[str, pd.DataFrame], model_order: Optional[list[str]] = None
                   ) -> tuple[list[Section], dict[str, pd.DataFrame]]:
    """The report's sections and the summary tables they show (also written as CSV); models in
    ``model_order`` (the config's)."""
    decisions, thresholds = frames["decisions"], frames["thresholds"]
    threshold = dict(zip(thresholds["game"], thresholds["threshold_percent"]))
    pd_decisions = decisions[decisions["game"] == "pd"]
    sweep_rates = cooperation_rates(pd_decisions[pd_decisions["experiment"] == "sweep"],
                                    ["model", "framing", "similarity"])
    baseline = cooperation_rates(pd_decisions[pd_decisions["experiment"] == "baseline"], ["model"])
    pgg_decisions = decisions[decisions["game"] == "pgg"]
    pgg_rates = cooperation_rates(pgg_decisions[pgg_decisions["framing"] != "none"],
                                  ["model", "framing", "similarity"])
    pgg_baseline = cooperation_rates(pgg_decisions[pgg_decisions["framing"] == "none"], ["model"])
    counts = label_counts(frames["judge_labels"])
    welfare = welfare_summary(frames["welfare"])
    comparison = score_comparison(frames["scores"])
    calls = frames["calls"]
    call_summary = (calls.assign(cost=pd.to_numeric(calls["cost"], errors="coerce"))
                    .groupby(["model_label", "provider", "model", "status"], dropna=False)
                    .agg(calls=("call_id", "size"), cost_usd=("cost", "sum")).reset_index())

    sections = [
        Section("b-similarity thresholds", [
            "With probability b the co-player's action equals mine, otherwise it is the other "
            "action. Cooperating pays more in expectation above the threshold (docs/similarity.md)."],
            {"thresholds": thresholds}),
        Section("Cooperation vs similarity (similar framing)", [
            "Red dashed line: the b-similarity threshold; grey dotted: the no-signal baseline; bars: "
            "95 % Wilson intervals."],
            {"no-signal baseline": baseline},
            {"pd_cooperation_vs_similarity": curve_figure(
                sweep_rates, baseline, threshold.get("pd", np.nan), ["similar"],
                "Prisoner's dilemma: cooperation vs stated similarity", model_order)}),
        Section("Framing and forgery: similar vs dissimilar vs random noise", [
            "x is the similarity the statement implies: 'X % different' is plotted at 100 − X; "
            "noise is a number disclosed as random, plotted at its value."],
            {"cooperation rate by stated similarity": rates_by_score(sweep_rates)},
            {"pd_framings": curve_figure(sweep_rates, baseline, threshold.get("pd", np.nan),
                                         sorted(sweep_rates["framing"].unique()), "Framings compared",
                                         model_order)}),
        Section("Grounded similarity: exogenous agreement and endogenous ratings", [
            "Welfare share: the pair's total points over the optimum (both cooperate), sample i of "
            "one model meeting sample i of the other."],
            {"rated vs measured similarity": comparison, "welfare share": welfare},
            {"rated_vs_measured_similarity": scores_figure(comparison)}),
        Section("Reasoning labels", [
            "Each chain of thought labelled by the judge named in every row; counts per model, "
            "framing and stated score."],
            {"decisions labelled, per category": labels_by_category(counts)},
            {"judge_labels": label_figure(counts, model_order)}),
        Section("Public goods game", [
            "Welfare share: the group's total over the optimum (everybody contributes)."],
            {"contribution rate by stated similarity": rates_by_score(pgg_rates),
             "no-signal baseline": pgg_baseline,
             "welfare share": welfare[welfare["game"] == "pgg"] if not welfare.empty else welfare},
            {"pgg_contribution_vs_similarity": curve_figure(
                pgg_rates, pgg_baseline, threshold.get("pgg", np.nan),
                sorted(pgg_rates["framing"].unique()), "Public goods game: contribution vs similarity",
                model_order)}),
        Section("Calls", ["Every call is in llm_calls.csv with its prompt version."],
                {"calls by status": call_summary}),
    ]
    summaries = {"similarity_cooperation_rates": sweep_rates, "similarity_label_counts": counts,
                 "similarity_welfare_summary": welfare, "similarity_score_comparison": comparison,
                 "similarity_pgg_rates": pgg_rates}
    return sections, summaries


def write_report(frames: dict[str, pd.DataFrame], out_dir: Path, title: str,
                 model_order: Optional[list[str]] = None) -> Path:
    """Summary CSVs, figures/ (PNG and SVG) and report.html in ``out_dir``."""
    sections, summaries = build_sections(frames, model_order)
    for name, table in summaries.items():
        table.to_csv(out_dir / f"{name}.csv", index=False)
    figures_dir = out_dir / "figures"
    figures_dir.mkdir(exist_ok=True)
    path = out_dir / "report.html"
    path.write_text(_page(title, sections, figures_dir), encoding="utf-8")
    return path
