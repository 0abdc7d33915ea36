"""The paper's figures with matplotlib (Agg: no display needed). Each function returns a Figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import protocol  # noqa: E402
from analysis.load import MOTIVES, PERCEPTION_COLUMNS  # noqa: E402

TREATMENT_COLOURS = {"H-H": "#7f7f7f", "H-F": "#2ca02c", "H-C": "#1f77b4", "H-S": "#d62728"}
PERSONA_TREATMENT = {"fair": "H-F", "cooperative": "H-C", "selfish": "H-S"}


def _boxes_with_points(axis, samples: list[pd.Series], labels: list[str], colours: list[str]) -> None:
    present = [(s.dropna(), label, colour) for s, label, colour in zip(samples, labels, colours)
               if not s.dropna().empty]
    if not present:
        axis.text(0.5, 0.5, "no data", ha="center", va="center", transform=axis.transAxes)
        return
    data, names, colours = zip(*present)
    positions = np.arange(1, len(data) + 1)
    jitter = np.random.default_rng(0)  # seeded: the same data draws the same figure
    axis.boxplot([d.to_numpy() for d in data], positions=positions, widths=0.5, showfliers=False)
    for position, values, colour in zip(positions, data, colours):
        axis.scatter(position + jitter.uniform(-0.18, 0.18, len(values)), values, s=8, alpha=0.5, color=colour)
    axis.set_xticks(positions, names)


def cooperation(humans: pd.DataFrame, agents: pd.DataFrame, treatments: tuple[str, ...],
                personas: tuple[str, ...]) -> Figure:
    """Fig. 1 / S16: participants' (left) and agents' (right) WC cooperation rates."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [4, 3]})
    _boxes_with_points(left, [humans.loc[humans["treatment"] == t, "cooperation_rate_WC"] for t in treatments],
                       list(treatments), [TREATMENT_COLOURS.get(t, "grey") for t in treatments])
    left.set(title="Participants", ylabel="Cooperation rate (WC game)", ylim=(-0.05, 1.05))
    _boxes_with_points(right, [agents.loc[agents["persona"] == p, "cooperation_rate_WC"] for p in personas],
                       [f"{p} agents" for p in personas],
                       [TREATMENT_COLOURS.get(PERSONA_TREATMENT.get(p, ""), "grey") for p in personas])
    right.set(title="Agents", ylim=(-0.05, 1.05))
    figure.tight_layout()
    return figure


def agreements(rates: pd.DataFrame, treatments: tuple[str, ...]) -> Figure:
    """Fig. 2 / S17: agreement rates (left); humans' and agents' breach rates (right)."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    table = rates.pivot(index="treatment", columns="dimension", values="percentage").reindex(list(treatments))
    positions = np.arange(len(treatments))
    left.bar(positions, table.get("agreements", pd.Series(np.nan, index=table.index)),
             color=[TREATMENT_COLOURS.get(t, "grey") for t in treatments])
    left.set_xticks(positions, treatments)
    left.set(title="Pre-game cooperation agreements", ylabel="% of conversations", ylim=(0, 100))
    for offset, dimension, hatch, label in ((-0.2, "human_breaches", "", "humans"),
                                            (0.2, "agent_breaches", "//", "agents")):
        values = table.get(dimension, pd.Series(np.nan, index=table.index))
        right.bar(positions + offset, values.fillna(0), width=0.4, hatch=hatch, label=label,
                  color=[TREATMENT_COLOURS.get(t, "grey") for t in treatments], edgecolor="black")
    right.set_xticks(positions, treatments)
    right.set(title="In-game promise breaches", ylabel="% of agreements broken", ylim=(0, 100))
    right.legend(loc="upper left")
    figure.tight_layout()
    return figure


def breach_glm(participants: pd.DataFrame, curve: pd.DataFrame) -> Figure:
    """Fig. 3 / S19: participants' cooperation over the agents' breach frequency, GLM curve."""
    figure, axis = plt.subplots(figsize=(6, 4.2))
    for treatment, group in participants.groupby("treatment"):
        axis.scatter(group["agent_breach_frequency"], group["cooperation_rate_WC"], s=14, alpha=0.6,
                     color=TREATMENT_COLOURS.get(treatment, "grey"), label=treatment)
    axis.plot(curve["agent_breach_frequency"], curve["fitted_cooperation_rate"], color="black", label="GLM")
    axis.set(xlabel="Agents' promise-breaking frequency", ylabel="Participant's cooperation rate (WC)",
             xlim=(-0.03, 1.03), ylim=(-0.05, 1.05))
    axis.legend(loc="upper right")
    figure.tight_layout()
    return figure


def norms_perceptions(humans: pd.DataFrame, treatments: tuple[str, ...]) -> Figure:
    """Fig. 4 / S20: norm estimates (top) and perception ratings (bottom) per treatment."""
    figure = plt.figure(figsize=(12, 7.5))
    grid = figure.add_gridspec(2, max(len(treatments), 1))
    labels = [f"{lo}–{hi}%" for lo, hi in protocol.NORM_INTERVALS]
    for column, treatment in enumerate(treatments):
        axis = figure.add_subplot(grid[0, column])
        estimates = humans.loc[humans["treatment"] == treatment, "norm_estimate_WC"].dropna().astype(int)
        counts = estimates.value_counts().reindex(range(len(labels)), fill_value=0)
        share = 100 * counts / max(counts.sum(), 1)
        axis.bar(range(len(labels)), share, color=TREATMENT_COLOURS.get(treatment, "grey"))
        axis.set_xticks(range(len(labels)), labels, rotation=45, fontsize=7)
        axis.set(title=f"{treatment}: norm estimate", ylim=(0, 100), ylabel="% of participants" if column == 0 else "")
    axis = figure.add_subplot(grid[1, :])
    _grouped_boxes(axis, humans, PERCEPTION_COLUMNS, "perception_", treatments)
    axis.set(title="Perception of the associates", ylabel="Agreement (−3..3)")
    figure.tight_layout()
    return figure


def _grouped_boxes(axis, humans: pd.DataFrame, columns: tuple[str, ...], prefix: str,
                   treatments: tuple[str, ...]) -> None:
    width = 0.8 / max(len(treatments), 1)
    for index, treatment in enumerate(treatments):
        subset = humans[humans["treatment"] == treatment]
        data = [subset[c].dropna().to_numpy() for c in columns]
        positions = np.arange(len(columns)) + (index - (len(treatments) - 1) / 2) * width
        keep = [i for i, d in enumerate(data) if len(d)]
        if not keep:
            continue
        boxes = axis.boxplot([data[i] for i in keep], positions=positions[keep], widths=width * 0.9,
                             patch_artist=True, showfliers=False)
        for patch in boxes["boxes"]:
            patch.set_facecolor(TREATMENT_COLOURS.get(treatment, "grey"))
            patch.set_alpha(0.6)
        axis.plot([], [], color=TREATMENT_COLOURS.get(treatment, "grey"), linewidth=8, alpha=0.6, label=treatment)
    axis.set_xticks(np.arange(len(columns)), [c.removeprefix(prefix) for c in columns])
    axis.set_ylim(protocol.LIKERT_MIN - 0.3, protocol.LIKERT_MAX + 0.3)
    axis.legend(ncols=len(treatments), fontsize=8, loc="lower right")


def likert_boxes(humans: pd.DataFrame, columns: tuple[str, ...], prefix: str, treatments: tuple[str, ...],
                 title: str) -> Figure:
    """Fig. S1 / S21: 7C ratings per treatment."""
    figure, axis = plt.subplots(figsize=(12, 4.2))
    _grouped_boxes(axis, humans, columns, prefix, treatments)
    axis.set(title=title, ylabel="Agreement (−3..3)")
    figure.tight_layout()
    return figure


def norms_cooperation(cooperation_by_norm: pd.DataFrame) -> Figure:
    """Fig. S2 / S24: mean WC cooperation per norm-estimate group and treatment."""
    figure, axis = plt.subplots(figsize=(8, 4.2))
    groups = list(dict.fromkeys(cooperation_by_norm.sort_values("norm_group")["norm_group"]))
    treatments = [t for t in TREATMENT_COLOURS if t in set(cooperation_by_norm["treatment"])]
    width = 0.8 / max(len(treatments), 1)
    for index, treatment in enumerate(treatments):
        rows = cooperation_by_norm[cooperation_by_norm["treatment"] == treatment].set_index("norm_group")
        means = rows["mean"].reindex(groups)
        axis.bar(np.arange(len(groups)) + (index - (len(treatments) - 1) / 2) * width, means.fillna(0),
                 width=width, color=TREATMENT_COLOURS[treatment], label=treatment)
    axis.set_xticks(np.arange(len(groups)), groups)
    axis.set(xlabel="Norm estimate (others' cooperation)", ylabel="Mean cooperation rate (WC)", ylim=(0, 1))
    axis.legend(loc="upper right")
    figure.tight_layout()
    return figure


def motives(ratings: pd.DataFrame) -> Figure:
    """Fig. S3 / S18: distribution of the motive ratings per agent persona."""
    personas = [p for p in PERSONA_TREATMENT if p in set(ratings["p2_persona"])]
    figure, axes = plt.subplots(1, max(len(personas), 1), figsize=(5 * max(len(personas), 1), 4.2), squeeze=False)
    levels = range(protocol.LIKERT_MIN, protocol.LIKERT_MAX + 1)
    for axis, persona in zip(axes[0], personas):
        subset = ratings[ratings["p2_persona"] == persona]
        width = 0.8 / len(MOTIVES)
        for index, motive in enumerate(MOTIVES):
            counts = subset[motive].dropna().round().value_counts().reindex(levels, fill_value=0)
            share = 100 * counts / max(counts.sum(), 1)
            axis.bar(np.array(list(levels)) + (index - 1.5) * width, share, width=width,
                     label=motive.replace("_", " "))
        axis.set(title=f"{persona} agents' breaches", xlabel="Agreement (−3..3)", ylabel="% of ratings")
        axis.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    return figure
