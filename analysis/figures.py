"""The paper's figures with matplotlib (Agg: no display needed). Each function returns a Figure.

Conventions, so a journal takes them as they are:
- uncertainty is shown: 95 % Wilson intervals for rates (R's ``prop.test(x, n, correct = FALSE)``;
  for a mean of rates over its units, analysis.stats.rate_interval), so a rate's interval stays in
  [0, 1]; 95 % t intervals for means of ratings (R's ``t.test``), a 95 % band around the Fig. 3 curve;
- every group says its n, and where an interval rests on fewer than ``FEW`` units the n is
  written beside it in red, so a wide interval is read as few data, not as a finding;
- a group without data is drawn as missing ("no data"), never as a 0 bar;
- panels carry the paper's letters (A, B); the report writes PNG, SVG and PDF.
"""

from __future__ import annotations

import string
import zlib

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

import protocol  # noqa: E402
from analysis.load import MOTIVES, PERCEPTION_COLUMNS  # noqa: E402
from analysis.stats import mean_interval, rate_interval  # noqa: E402
from intervals import wilson_interval  # noqa: E402

TREATMENT_COLOURS = {"H-H": "#7f7f7f", "H-F": "#2ca02c", "H-C": "#1f77b4", "H-S": "#d62728"}
TREATMENT_MARKERS = {"H-H": "D", "H-F": "o", "H-C": "^", "H-S": "s"}
PERSONA_TREATMENT = {"fair": "H-F", "cooperative": "H-C", "selfish": "H-S"}
OWN_COLOURS = ("#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22")  # an experiment's own groups
plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 9,
                     "ytick.labelsize": 9, "legend.fontsize": 8, "svg.fonttype": "none", "pdf.fonttype": 42})
CI_NOTE = "error bars: 95 % CI"
FEW = 10  # an interval over fewer units (participants, agents) has its n written beside it
FEW_COLOUR = "#b00000"


def group_colour(group: str) -> str:
    """A treatment's or persona's colour: the paper's, or for an experiment's own one of OWN_COLOURS,
    the same in every figure and report."""
    paper = TREATMENT_COLOURS.get(PERSONA_TREATMENT.get(group, group))
    return paper or OWN_COLOURS[zlib.crc32(group.encode("utf-8")) % len(OWN_COLOURS)]


def _in_order(present: set[str], order) -> list[str]:
    """The ``present`` groups in ``order`` (the compared treatments or personas), any others by name."""
    present = {g for g in present if isinstance(g, str) and g}
    return [g for g in order if g in present] + sorted(present - set(order))


def panel_letter(axis, letter: str) -> None:
    """The paper's panel letter, bold, above the axis' top-left corner."""
    axis.text(-0.08, 1.06, letter, transform=axis.transAxes, fontsize=13, fontweight="bold", va="bottom",
              ha="right")


def _yerr(centre: float, low: float, high: float) -> list[list[float]]:
    """Error-bar lengths; rounding can put a bound a hair inside the centre (a 0 % Wilson bound)."""
    return [[max(0.0, centre - low)], [max(0.0, high - centre)]]


def _missing(axis, x: float, y: float = 0.02, text: str = "no data") -> None:
    axis.text(x, y, text, ha="center", va="bottom", fontsize=7, color="#666", rotation=90,
              transform=axis.get_xaxis_transform())


def few_units_label(axis, x: float, y: float, n: int, **text_options) -> None:
    """"n = 2" in red at (x, y) when n is under FEW: the interval beside it rests on few units."""
    if 0 < n < FEW:
        axis.text(x, y, f"n = {n}", color=FEW_COLOUR, fontsize=7, fontweight="bold", zorder=5,
                  **{"ha": "left", "va": "center", **text_options})


def _mean_with_interval(axis, position: float, values: np.ndarray, colour: str = "black",
                        interval=mean_interval) -> None:
    low, high = interval(values)
    mean = float(np.mean(values))
    if np.isnan(low):
        axis.plot([position], [mean], marker="D", color=colour, markeredgecolor="black", zorder=4)
    else:
        axis.errorbar([position], [mean], yerr=_yerr(mean, low, high), fmt="D", color=colour,
                      markeredgecolor="black", ecolor="black", capsize=3, zorder=4)
    few_units_label(axis, position + 0.08, mean, len(values))


def _boxes_with_points(axis, samples: list[pd.Series], labels: list[str], colours: list[str],
                       interval=mean_interval) -> None:
    """Box plot, the points, and the mean with its 95 % interval (``interval``: the t interval of
    ratings, or rate_interval for rates); n under each label, and beside the mean where few."""
    positions = np.arange(1, len(samples) + 1)
    jitter = np.random.default_rng(0)  # seeded: the same data draws the same figure
    names = []
    for position, sample, label, colour in zip(positions, samples, labels, colours):
        values = sample.dropna().to_numpy(dtype=float)
        names.append(f"{label}\nn = {len(values)}")
        if len(values) == 0:
            _missing(axis, position)
            continue
        axis.boxplot([values], positions=[position], widths=0.5, showfliers=False)
        axis.scatter(position + jitter.uniform(-0.18, 0.18, len(values)), values, s=8, alpha=0.45, color=colour,
                     zorder=2)
        _mean_with_interval(axis, position + 0.3, values, colour, interval)
    axis.set_xticks(positions, names)
    axis.set_xlim(0.4, len(samples) + 0.7)


def cooperation(humans: pd.DataFrame, agents: pd.DataFrame, treatments: tuple[str, ...],
                personas: tuple[str, ...]) -> Figure:
    """Fig. 1 / S16: participants' (A) and agents' (B) WC cooperation rates."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.4), gridspec_kw={"width_ratios": [4, 3]})
    _boxes_with_points(left, [humans.loc[humans["treatment"] == t, "cooperation_rate_WC"] for t in treatments],
                       list(treatments), [group_colour(t) for t in treatments], rate_interval)
    left.set(title="Participants", ylabel="Cooperation rate (WC game)", ylim=(-0.05, 1.05))
    _boxes_with_points(right, [agents.loc[agents["persona"] == p, "cooperation_rate_WC"] for p in personas],
                       [f"{p} agents" for p in personas],
                       [group_colour(p) for p in personas], rate_interval)
    right.set(title="Agents", ylim=(-0.05, 1.05))
    panel_letter(left, "A")
    panel_letter(right, "B")
    figure.text(0.99, 0.01, f"diamonds: mean with 95 % Wilson CI over the participants (agents); n in red beside "
                f"it where under {FEW}", ha="right", va="bottom", fontsize=7, color="#444")
    figure.tight_layout()
    return figure


def _rate_bar(axis, position: float, count: float, trials: float, width: float, colour: str,
              **bar_options) -> None:
    """A percentage bar with its Wilson interval and n; nothing but "no data" without trials."""
    if not trials or pd.isna(trials):
        _missing(axis, position)
        return
    share = 100 * count / trials
    low, high = wilson_interval(int(count), int(trials))
    axis.bar(position, share, width=width, color=colour, edgecolor="black", **bar_options)
    axis.errorbar([position], [share], yerr=_yerr(share, 100 * low, 100 * high), fmt="none",
                  ecolor="black", capsize=3)
    axis.text(position, 100 * high + 1.5, f"n={int(trials)}", ha="center", va="bottom", fontsize=7)


def agreements(rates: pd.DataFrame, treatments: tuple[str, ...]) -> Figure:
    """Fig. 2 / S17: agreement rates (A); humans' and agents' breach rates (B), Wilson 95 % CIs."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.4))
    positions = np.arange(len(treatments))

    def counts(dimension: str, treatment: str) -> tuple[float, float]:
        row = rates[(rates["dimension"] == dimension) & (rates["treatment"] == treatment)]
        return (float(row["count"].iloc[0]), float(row["of"].iloc[0])) if len(row) else (0.0, 0.0)

    for position, treatment in zip(positions, treatments):
        _rate_bar(left, position, *counts("agreements", treatment), 0.6, group_colour(treatment))
    left.set_xticks(positions, treatments)
    left.set(title="Pre-game cooperation agreements", ylabel="% of conversations", ylim=(0, 110))
    for offset, dimension, hatch, label in ((-0.2, "human_breaches", "", "humans"),
                                            (0.2, "agent_breaches", "//", "agents")):
        for position, treatment in zip(positions, treatments):
            if dimension == "agent_breaches" and treatment == "H-H":
                _missing(right, position + offset, text="no agents")  # not a 0 bar: there is nothing
                continue
            _rate_bar(right, position + offset, *counts(dimension, treatment), 0.4,
                      group_colour(treatment), hatch=hatch)
    right.set_xticks(positions, treatments)
    right.set(title="In-game promise breaches", ylabel="% of agreements broken", ylim=(0, 110))
    right.legend(handles=[Patch(facecolor="white", edgecolor="black", label="humans"),
                          Patch(facecolor="white", edgecolor="black", hatch="//", label="agents")],
                 loc="upper left", frameon=False)
    panel_letter(left, "A")
    panel_letter(right, "B")
    figure.text(0.99, 0.01, "error bars: 95 % Wilson CI", ha="right", va="bottom", fontsize=7, color="#444")
    figure.tight_layout()
    return figure


def breach_glm(participants: pd.DataFrame, curve: pd.DataFrame, order=tuple(TREATMENT_COLOURS)) -> Figure:
    """Fig. 3 / S19: participants' cooperation over the agents' breach frequency, GLM curve and its
    95 % band. Each treatment has its own marker and a small horizontal offset, so treatments
    that share f values (all H-C participants at f = 0) stay visible."""
    figure, axis = plt.subplots(figsize=(6.4, 4.4))
    if {"lower", "upper"} <= set(curve.columns):
        axis.fill_between(curve["agent_breach_frequency"], curve["lower"], curve["upper"], color="black",
                          alpha=0.12, linewidth=0, label="95 % CI")
    treatments = _in_order(set(participants["treatment"]), order)
    offsets = np.linspace(-0.015, 0.015, len(treatments)) if len(treatments) > 1 else [0.0]
    for offset, treatment in zip(offsets, treatments):
        group = participants[participants["treatment"] == treatment]
        axis.scatter(group["agent_breach_frequency"] + offset, group["cooperation_rate_WC"], s=18,
                     marker=TREATMENT_MARKERS.get(treatment, "o"), facecolors="none", linewidths=1,
                     edgecolors=group_colour(treatment), label=f"{treatment} (n = {len(group)})",
                     zorder=3)
    axis.plot(curve["agent_breach_frequency"], curve["fitted_cooperation_rate"], color="black", label="GLM")
    axis.set(xlabel="Agents' promise-breaking frequency", ylabel="Participant's cooperation rate (WC)",
             xlim=(-0.04, 1.04), ylim=(-0.05, 1.05))
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    figure.text(0.99, 0.01, "markers offset ±0.015 in f per treatment to stay visible", ha="right", va="bottom",
                fontsize=7, color="#444")
    figure.tight_layout()
    return figure


def norms_perceptions(humans: pd.DataFrame, treatments: tuple[str, ...],
                      norm_intervals=protocol.NORM_INTERVALS) -> Figure:
    """Fig. 4 / S20: norm estimates (A, Wilson 95 % CIs; on the experiment's intervals) and perception
    ratings (B) per treatment."""
    figure = plt.figure(figsize=(12, 8))
    grid = figure.add_gridspec(2, max(len(treatments), 1), height_ratios=[1, 1.15])
    labels = [f"{lo}–{hi}" for lo, hi in norm_intervals]
    for column, treatment in enumerate(treatments):
        axis = figure.add_subplot(grid[0, column])
        estimates = humans.loc[humans["treatment"] == treatment, "norm_estimate_WC"].dropna().astype(int)
        counts = estimates.value_counts().reindex(range(len(labels)), fill_value=0)
        total = int(counts.sum())
        colour = group_colour(treatment)
        if total == 0:
            axis.text(0.5, 0.5, "no data", ha="center", va="center", transform=axis.transAxes, color="#666")
        for index, count in counts.items():
            if total:
                low, high = wilson_interval(int(count), total)
                share = 100 * count / total
                axis.bar(index, share, color=colour, edgecolor="black")
                axis.errorbar([index], [share], yerr=_yerr(share, 100 * low, 100 * high), fmt="none",
                              ecolor="black", capsize=2)
        axis.set_xticks(range(len(labels)), labels)
        axis.set(title=f"{treatment} (n = {total})", ylim=(0, 100), xlabel="Estimated cooperation (%)",
                 ylabel="% of participants" if column == 0 else "")
        if column == 0:
            panel_letter(axis, "A")
    axis = figure.add_subplot(grid[1, :])
    _grouped_boxes(axis, humans, PERCEPTION_COLUMNS, "perception_", treatments)
    axis.set(title="Perception of the associates", ylabel="Agreement (−3..3)")
    panel_letter(axis, "B")
    figure.tight_layout()
    return figure


def _grouped_boxes(axis, humans: pd.DataFrame, columns: tuple[str, ...], prefix: str,
                   treatments: tuple[str, ...]) -> None:
    """Boxes per item and treatment with the mean and its 95 % t interval; the legend (with each
    treatment's n) sits outside the axis, so it covers no whisker."""
    width = 0.8 / max(len(treatments), 1)
    for index, treatment in enumerate(treatments):
        subset = humans[humans["treatment"] == treatment]
        data = [subset[c].dropna().to_numpy(dtype=float) for c in columns]
        positions = np.arange(len(columns)) + (index - (len(treatments) - 1) / 2) * width
        colour = group_colour(treatment)
        keep = [i for i, d in enumerate(data) if len(d)]
        for i in set(range(len(columns))) - set(keep):
            _missing(axis, positions[i])
        if keep:
            boxes = axis.boxplot([data[i] for i in keep], positions=positions[keep], widths=width * 0.85,
                                 patch_artist=True, showfliers=False)
            for patch in boxes["boxes"]:
                patch.set_facecolor(colour)
                patch.set_alpha(0.55)
            for i in keep:
                low, high = mean_interval(data[i])
                mean = float(np.mean(data[i]))
                # beside the box's whisker line, so the interval is not mistaken for a whisker
                axis.errorbar([positions[i] + width * 0.3], [mean],
                              yerr=None if np.isnan(low) else _yerr(mean, low, high),
                              fmt="D", markersize=3, color="black", elinewidth=1.6, capsize=2, zorder=4)
        answered = int(subset[list(columns)].notna().any(axis=1).sum())
        axis.plot([], [], color=colour, linewidth=8, alpha=0.55, label=f"{treatment} (n = {answered})")
    axis.plot([], [], "D", color="black", markersize=3, label="mean, 95 % CI")
    axis.set_xticks(np.arange(len(columns)), [c.removeprefix(prefix).replace("_", " ") for c in columns])
    axis.set_ylim(protocol.LIKERT_MIN - 0.4, protocol.LIKERT_MAX + 0.4)
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=len(treatments) + 1, frameon=False)


def likert_boxes(humans: pd.DataFrame, columns: tuple[str, ...], prefix: str, treatments: tuple[str, ...],
                 title: str) -> Figure:
    """Fig. S1 / S21: 7C ratings per treatment."""
    figure, axis = plt.subplots(figsize=(12, 4.8))
    _grouped_boxes(axis, humans, columns, prefix, treatments)
    axis.set(title=title, ylabel="Agreement (−3..3)")
    figure.tight_layout()
    return figure


def norms_cooperation(cooperation_by_norm: pd.DataFrame, order=tuple(TREATMENT_COLOURS)) -> Figure:
    """Fig. S2 / S24: mean WC cooperation (95 % Wilson CI over the participants) per norm-estimate
    group and treatment, n above each bar (in red under FEW); an empty treatment × group is drawn
    as missing."""
    figure, axis = plt.subplots(figsize=(9, 4.6))
    # In the intervals' order ("5–10 %" before "10–20 %"): by a group's lower bound.
    groups = sorted(set(cooperation_by_norm["norm_group"]), key=lambda group: float(group.split("–")[0]))
    treatments = _in_order(set(cooperation_by_norm["treatment"]), order)
    width = 0.8 / max(len(treatments), 1)
    for index, treatment in enumerate(treatments):
        rows = cooperation_by_norm[cooperation_by_norm["treatment"] == treatment].set_index("norm_group")
        rows = rows.reindex(groups)
        positions = np.arange(len(groups)) + (index - (len(treatments) - 1) / 2) * width
        for position, (_, row) in zip(positions, rows.iterrows()):
            if pd.isna(row["mean"]) or not row.get("participants"):
                _missing(axis, position)
                continue
            axis.bar(position, row["mean"], width=width, color=group_colour(treatment), edgecolor="black")
            low, high = row.get("ci_low", np.nan), row.get("ci_high", np.nan)
            if not pd.isna(low):
                axis.errorbar([position], [row["mean"]], yerr=_yerr(row["mean"], low, high),
                              fmt="none", ecolor="black", capsize=2)
            top = high if not pd.isna(high) else row["mean"]
            n = int(row["participants"])
            few = n < FEW
            axis.text(position, min(top, 1.0) + 0.02, f"{n}", ha="center", va="bottom", fontsize=7,
                      color=FEW_COLOUR if few else "black", fontweight="bold" if few else "normal")
    axis.set_xticks(np.arange(len(groups)), groups)
    axis.set(xlabel="Norm estimate (others' cooperation)", ylabel="Mean cooperation rate (WC)", ylim=(0, 1.12))
    axis.legend(handles=[Patch(facecolor=group_colour(t), edgecolor="black", label=t) for t in treatments],
                loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                title=f"numbers: n (red: under {FEW})\nerror bars: 95 % Wilson CI", title_fontsize=7)
    figure.tight_layout()
    return figure


def believed_human(humans: pd.DataFrame, treatments: tuple[str, ...]) -> Figure:
    """Fig. S25: "my associates were humans" (−3..3) per treatment: points, mean and 95 % t CI."""
    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    _boxes_with_points(axis, [humans.loc[humans["treatment"] == t, "believed_human"] for t in treatments],
                       list(treatments), [group_colour(t) for t in treatments])
    axis.axhline(0, color="#999", linewidth=0.8, linestyle="--", zorder=0)
    axis.set(ylabel="\"My associates were humans\" (−3..3)",
             ylim=(protocol.LIKERT_MIN - 0.4, protocol.LIKERT_MAX + 0.4))
    figure.text(0.99, 0.01, f"diamonds: mean with 95 % t CI; n in red beside it where under {FEW}", ha="right",
                va="bottom", fontsize=7, color="#444")
    figure.tight_layout()
    return figure


def motives(ratings: pd.DataFrame, order=tuple(PERSONA_TREATMENT)) -> Figure:
    """Fig. S3 / S18: distribution of the motive ratings per agent persona."""
    personas = _in_order(set(ratings["p2_persona"]), order)
    figure, axes = plt.subplots(1, max(len(personas), 1), figsize=(5 * max(len(personas), 1), 4.2), squeeze=False)
    levels = range(protocol.LIKERT_MIN, protocol.LIKERT_MAX + 1)
    for letter, axis, persona in zip(string.ascii_uppercase, axes[0], personas):
        subset = ratings[ratings["p2_persona"] == persona]
        width = 0.8 / len(MOTIVES)
        for index, motive in enumerate(MOTIVES):
            counts = subset[motive].dropna().round().value_counts().reindex(levels, fill_value=0)
            share = 100 * counts / max(counts.sum(), 1)
            axis.bar(np.array(list(levels)) + (index - 1.5) * width, share, width=width,
                     label=motive.replace("_", " "))
        axis.set(title=f"{persona} agents' breaches (n = {len(subset)} ratings)", xlabel="Agreement (−3..3)",
                 ylabel="% of ratings")
        panel_letter(axis, letter)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.legend(handles, labels, loc="lower center", ncols=len(MOTIVES), frameon=False)  # covers no bar
    return figure
