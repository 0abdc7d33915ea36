"""What every section of the results shares: the ``Section`` it fills, the groups it compares (the
paper's in the paper's order, or an experiment's own) and the pairwise comparisons (Mann-Whitney,
proportions) oriented as the paper names them.

analysis/results.py builds the lab's sections from these, analysis/simulation.py the simulation's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

import pandas as pd
from matplotlib.figure import Figure

import protocol
from analysis import stats

TREATMENT_ORDER = ("H-H", "H-F", "H-C", "H-S")  # the order of the pairs in Tables S2, S3, S5…
AGENT_TREATMENTS = ("H-F", "H-C", "H-S")
PERSONA_ORDER = ("fair", "cooperative", "selfish")


@dataclass
class Section:
    key: str
    title: str
    reproduces: str
    label_setting: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    # name -> a function drawing the matplotlib Figure; drawn only when the report is written
    figures: dict[str, Callable[[], Figure]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# The paper names some comparisons the other way round: "H-C vs. H-H" in Fig. 1's caption,
# "H-F vs. H-C" in Fig. 4's. W (and d, h) belong to the first group named, so each section
# orients its pairs as the paper's text does; the earlier a group in the tuple, the more it
# leads. Sections not listed keep the order of TREATMENT_ORDER (H-H, H-F, H-C, H-S).
PAPER_LEADING_GROUPS = {
    "cooperation": ("H-F", "H-C", "H-S"),  # "H-F vs. H-H", "H-C vs. H-H", "H-S vs. H-H"
    "agreements": ("H-F",),  # "H-F vs. H-H: χ² = 20.3", "H-F vs. H-C"
    "norms_perceptions": ("H-F",),  # "H-F vs. H-C", "H-F vs. H-H", "H-F vs. H-S"
    "seven_c": ("H-F",),
    "norms_cooperation": ("H-H", "H-S"),  # "H-H vs. H-F", "H-S vs. H-F"
}


@dataclass(frozen=True)
class TreatmentLayout:
    """The groups the sections compare, in their order: the treatments (H-H first), those with
    agents, the agents' personas; ``leading_groups`` orients a section's pairs (PAPER_LEADING_GROUPS).
    ``paper``: the paper's treatments, so the sections name the paper's figures and tables. Each label
    setting of ``label_settings`` has its sections; those of ``uninformed`` also ask who was believed
    human."""
    treatments: tuple[str, ...]
    agent_treatments: tuple[str, ...]
    personas: tuple[str, ...]
    leading_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    paper: bool = False
    label_settings: tuple[str, ...] = tuple(protocol.LABEL_SETTINGS)
    uninformed: tuple[str, ...] = ("uninformed",)

    def leading(self, section_key: str) -> tuple[str, ...]:
        return self.leading_groups.get(section_key, ())

    def attribute(self, section: Section, paper_reference: str) -> None:
        """``section`` reproduces ``paper_reference`` (Fig. 1, ...) on the paper's treatments; on an
        experiment's own it reproduces no figure of the paper's, so its figures lose the paper's numbers
        (fig1_cooperation: cooperation)."""
        if self.paper:
            section.reproduces = paper_reference
            return
        section.reproduces = (f"— (the experiment's treatments {', '.join(self.treatments)}; the paper's "
                              f"counterpart: {paper_reference})")
        section.figures = {re.sub(r"^fig(S?\d+)_", "", name): draw for name, draw in section.figures.items()}


PAPER_LAYOUT = TreatmentLayout(TREATMENT_ORDER, AGENT_TREATMENTS, PERSONA_ORDER, PAPER_LEADING_GROUPS, paper=True)


def treatment_layout(experiment=None) -> TreatmentLayout:
    """The layout of the sessions' ``experiment`` (experiment_design.Experiment; None: the paper's).
    A design whose personas are some of the paper's, with the paper's codes, keeps the paper's layout;
    any other compares H-H and its personas' treatments in the order of its [personas]. Either way
    its label settings are its own, in its order."""
    if experiment is None:
        return PAPER_LAYOUT
    labels = experiment.design.labels  # its label settings, in its order
    settings = dict(label_settings=tuple(labels),
                    uninformed=tuple(name for name, setting in labels.items() if not setting.informed))
    codes = {name: experiment.treatment_code(name) for name in experiment.design.personas}
    if all(protocol.TREATMENT_CODES.get(name) == code for name, code in codes.items()):
        return replace(PAPER_LAYOUT, **settings)
    agent_treatments = tuple(codes.values())
    return TreatmentLayout(("H-H", *agent_treatments), agent_treatments, tuple(codes), **settings)


def oriented_pairs(groups: tuple[str, ...], leading: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """All pairs of ``groups`` in their order; a pair is flipped when its second group leads."""
    rank = {g: i for i, g in enumerate(leading)}
    pairs = []
    for first, second in stats.ordered_pairs(groups):
        if second in rank and rank[second] < rank.get(first, len(leading)):
            first, second = second, first
        pairs.append((first, second))
    return pairs


# --- Pairwise comparisons --------------------------------------------------------------------
# Every table has its columns even without rows: an empty CSV is its header, which R's read.csv
# and pandas read (a bare newline they refuse).
MANN_WHITNEY_COLUMNS = ["comparison", "n1", "n2", "median1", "median2", "mean1", "mean2", "W", "W_of",
                        "W_reversed", "z", "p_value", "cohens_d"]
PROPORTION_COLUMNS = ["comparison", "percentage1", "percentage2", "chi2", "p_value", "cohens_h"]


def pairwise_mann_whitney(data: pd.DataFrame, value: str, group: str, groups: tuple[str, ...],
                          notes: list[str], what: str, leading: tuple[str, ...] = ()) -> pd.DataFrame:
    """Median, mean, W, z, p and Cohen's d for every pair of groups.

    W is R's W of the first group named in ``comparison`` (``W_of`` repeats which);
    ``W_reversed`` = n1·n2 − W is R's W with the groups the other way round. z is the normal
    approximation's (the paper's Figs. S2/S24); p is NaN where R's is (every value equal).
    """
    rows = []
    samples = {g: data.loc[data[group] == g, value].dropna() for g in groups}
    for first, second in oriented_pairs(groups, leading):
        x, y = samples[first], samples[second]
        if x.empty or y.empty:
            continue
        test = stats.mann_whitney(x, y)
        rows.append({"comparison": f"{first} vs. {second}", "n1": len(x), "n2": len(y),
                     "median1": x.median(), "median2": y.median(), "mean1": x.mean(), "mean2": y.mean(),
                     "W": test.statistic, "W_of": first, "W_reversed": len(x) * len(y) - test.statistic,
                     "z": test.z, "p_value": test.p_value, "cohens_d": stats.cohens_d(x, y)})
    empty = [g for g in groups if samples[g].empty]
    if empty:
        notes.append(f"{what}: no data for {', '.join(empty)} — comparisons with it are left out.")
    return pd.DataFrame(rows, columns=MANN_WHITNEY_COLUMNS)


def pairwise_proportions(counts: pd.DataFrame, groups: tuple[str, ...],
                         leading: tuple[str, ...] = ()) -> pd.DataFrame:
    """``counts`` indexed by group with ``successes`` and ``trials``: percentages, χ², p, h."""
    rows = []
    for first, second in oriented_pairs(groups, leading):
        if first not in counts.index or second not in counts.index:
            continue
        (x1, n1), (x2, n2) = counts.loc[first, ["successes", "trials"]], counts.loc[second, ["successes", "trials"]]
        if n1 == 0 or n2 == 0:
            continue
        test = stats.prop_test((int(x1), int(x2)), (int(n1), int(n2)))
        rows.append({"comparison": f"{first} vs. {second}", "percentage1": 100 * x1 / n1,
                     "percentage2": 100 * x2 / n2, "chi2": test.statistic, "p_value": test.p_value,
                     "cohens_h": stats.cohens_h(x1 / n1, x2 / n2)})
    return pd.DataFrame(rows, columns=PROPORTION_COLUMNS)

