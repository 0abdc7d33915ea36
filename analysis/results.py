"""The paper's results section, computed: one ``Section`` per figure or table, per label setting.

Each section holds its tables (DataFrames), the figures it draws and notes in plain words —
including why a part has no result (no annotations yet, an empty treatment, a missing column).
Comparisons list the groups in the paper's order; every effect size is group 1 minus group 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

import protocol
from analysis import annotation, figures, models, norm_estimates, stats, tidy
from analysis.comparisons import (MANN_WHITNEY_COLUMNS, PAPER_LAYOUT, Section, TreatmentLayout, pairwise_mann_whitney,
                                  pairwise_proportions)
from analysis.load import BREACH_CHECKS, MOTIVES, PERCEPTION_COLUMNS, SEVEN_C_COLUMNS, Exports, Problem
from analysis.overview import annotation_section, overview_section
from analysis.simulation import SIMULATION_TREATMENT, simulation_section
from intervals import wilson_interval

PAPER_GLM_DEGREE = {"informed": 3, "uninformed": 4}  # Fig. 3 cubic, Fig. S19 quartic
PAPER_REFERENCES = {  # (informed, uninformed)
    "cooperation": ("Fig. 1, Tables S1 and S12", "Fig. S16, Tables S9 and S10"),
    "agreements": ("Fig. 2, Table S2", "Fig. S17, Table S11"),
    "breach_glm": ("Fig. 3", "Fig. S19"),
    "norms_perceptions": ("Fig. 4, Table S3", "Fig. S20, Table S5"),
    "seven_c": ("Fig. S1, Table S8", "Fig. S21, Table S6"),
    "norms_cooperation": ("Fig. S2", "Fig. S24"),
    "motives": ("Fig. S3", "Fig. S18"),
    "perception_glm": ("Table S13", "Table S7"),
    "believed_human": ("—", "Fig. S25"),
}


@dataclass
class Analysis:
    exports: Exports
    decisions: pd.DataFrame
    conversations: pd.DataFrame
    sides: pd.DataFrame
    participants: pd.DataFrame
    agents: pd.DataFrame
    resolved_labels: pd.DataFrame
    kappa: pd.DataFrame
    sections: list[Section]
    template_path: Path | None = None
    annotation_key: pd.DataFrame | None = None  # item -> conversation_id, from the inputs and the report folder

    def tidy_tables(self) -> dict[str, pd.DataFrame]:
        return {"decisions": self.decisions, "conversations": self.conversations, "sides": self.sides,
                "participants": self.participants, "agents": self.agents}


SUMMARY_COLUMNS = ["who", "group", "game", "n", "mean", "sd", "median", "ci_low", "ci_high"]
RATE_INTERVAL_NOTE = ("ci_low and ci_high of a mean cooperation rate: the 95 % Wilson score interval over the "
                      "participants (agents), R's prop.test(sum(rates), length(rates), correct = FALSE)$conf.int. "
                      "It stays within 0..1 however few they are, and is conservative where their rates lie close "
                      "together (it allows the widest spread rates with that mean can have).")
RATE_COLUMNS = ["dimension", "treatment", "count", "of", "percentage", "ci_low_percentage", "ci_high_percentage"]


def _rate_interval_columns(rates: pd.Series) -> dict[str, float]:
    low, high = stats.rate_interval(rates)
    return {"ci_low": low, "ci_high": high}


def _present(values: pd.Series, order: tuple[str, ...]) -> tuple[str, ...]:
    found = set(values.dropna())
    return tuple(g for g in order if g in found)


def _label_title(label_setting: str) -> str:
    return {"informed": "label-informed (the paper's main text)",
            "uninformed": "label-uninformed (the paper's SI Note 3)"}.get(label_setting, label_setting)


# --- Sections ----------------------------------------------------------------------------------
def cooperation_section(participants: pd.DataFrame, agents: pd.DataFrame, label_setting: str,
                        layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("cooperation", "Cooperation of participants and agents", "", label_setting)
    section.notes.append("Headline: cooperation rate per participant over the rounds of the game with "
                         "communication (WC), as in the paper's main results; the game without "
                         "communication (WoC) is reported alongside.")
    humans = participants[participants["treatment"].isin(layout.treatments)]
    lab_agents = agents[agents["treatment"].isin(layout.agent_treatments)]
    treatments = _present(humans.loc[humans["rounds_WC"] > 0, "treatment"], layout.treatments)
    missing = [t for t in layout.treatments if t not in treatments]
    if missing:
        section.notes.append(f"No participants with WC decisions in {', '.join(missing)}.")
    summary = []
    for game in protocol.GAMES:
        for treatment in layout.treatments:
            rates = humans.loc[humans["treatment"] == treatment, f"cooperation_rate_{game}"].dropna()
            if not rates.empty:
                summary.append({"who": "participants", "group": treatment, "game": game, "n": len(rates),
                                "mean": rates.mean(), "sd": rates.std(), "median": rates.median(),
                                **_rate_interval_columns(rates)})
        for persona in layout.personas:
            rates = lab_agents.loc[lab_agents["persona"] == persona, f"cooperation_rate_{game}"].dropna()
            if not rates.empty:
                summary.append({"who": "agents", "group": persona, "game": game, "n": len(rates),
                                "mean": rates.mean(), "sd": rates.std(), "median": rates.median(),
                                **_rate_interval_columns(rates)})
    section.tables["cooperation_rates"] = pd.DataFrame(summary, columns=SUMMARY_COLUMNS)
    section.notes.append(RATE_INTERVAL_NOTE)
    for game in protocol.GAMES:
        fell, total = tidy.agent_fallbacks(lab_agents, game)
        if fell:
            section.notes.append(f"Agents' cooperation in {game} counts only the decisions their model made: "
                                 f"n = {total - fell}; {fell} of {total} ({fell / total:.0%}) were random fallbacks "
                                 f"(no usable answer in time), left out.")
    for game in protocol.GAMES:
        section.tables[f"participants_pairwise_{game}"] = pairwise_mann_whitney(
            humans, f"cooperation_rate_{game}", "treatment", treatments, section.notes if game == "WC" else [],
            "participants' cooperation", layout.leading("cooperation"))
    personas = _present(lab_agents.loc[lab_agents["rounds_WC"] > 0, "persona"], layout.personas)
    section.tables["agents_pairwise_WC"] = pairwise_mann_whitney(
        lab_agents, "cooperation_rate_WC", "persona", personas, [], "agents' cooperation")
    rated = humans.dropna(subset=["cooperation_rate_WC"])
    if rated["treatment"].nunique() >= 2:
        section.tables["anova_WC"] = stats.one_way_anova(rated["cooperation_rate_WC"], rated["treatment"])
        section.tables["tukey_hsd_WC"] = stats.tukey_hsd(rated["cooperation_rate_WC"], rated["treatment"])
    else:
        section.notes.append("ANOVA and Tukey HSD need at least two treatments with participants.")
    if not rated.empty or not lab_agents.empty:
        section.figures["fig1_cooperation"] = partial(figures.cooperation, humans, lab_agents, treatments, personas)
    return section


def agreements_section(conversations: pd.DataFrame, sides: pd.DataFrame, label_setting: str,
                       template_path: Path | None, layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("agreements", "Cooperation agreements and promise breaches", "", label_setting)
    labelled = conversations[conversations["agreement"].notna()]
    where = f" at {template_path}" if template_path else ""
    annotated = conversations["label_source"].fillna("").astype(str) != "" if "label_source" in conversations else None
    if labelled.empty and annotated is not None and annotated.any():
        section.notes.append(f"{int(annotated.sum())} conversations have annotation rows but none has a resolved "
                             "agreement label (unreadable values, or annotators who disagree without a resolver): "
                             "see the problems at the top and the annotation section.")
        return section
    if labelled.empty:
        section.notes.append(f"No annotations yet — fill the template{where} (one copy per annotator, "
                             "the annotator's id in the `annotator` column; a third expert's rows with "
                             "`annotator = resolver`) and put the filled files and annotation_key.csv with "
                             "the exports.")
        return section
    unlabelled = len(conversations) - len(labelled)
    if unlabelled:
        section.notes.append(f"{unlabelled} of {len(conversations)} conversations have no resolved label "
                             "and are left out (not annotated yet, or annotators disagree without a "
                             "resolver).")
    machine = (labelled["label_source"] == "machine").sum()
    if machine:
        section.notes.append(f"{machine} conversations are labelled by machine annotation only.")
    treatments = _present(labelled["treatment"], layout.treatments)
    agreed_sides = sides[(sides["agreement"] == True) & sides["treatment"].isin(treatments)]  # noqa: E712
    counts = {
        "agreements": labelled.groupby("treatment").agg(successes=("agreement", "sum"),
                                                        trials=("agreement", "size")),
        "human_breaches": _breach_counts(agreed_sides, "human"),
        "agent_breaches": _breach_counts(agreed_sides, "agent"),
    }
    rates = []
    for dimension, table in counts.items():
        for treatment in treatments:
            if treatment in table.index:
                successes, trials = table.loc[treatment, ["successes", "trials"]]
                low, high = wilson_interval(int(successes), int(trials))
                rates.append({"dimension": dimension, "treatment": treatment, "count": int(successes),
                              "of": int(trials), "percentage": 100 * successes / trials if trials else np.nan,
                              "ci_low_percentage": 100 * low, "ci_high_percentage": 100 * high})
    section.tables["rates"] = pd.DataFrame(rates, columns=RATE_COLUMNS)
    comparisons = []
    for dimension, table in counts.items():
        groups = layout.agent_treatments if dimension == "agent_breaches" else layout.treatments
        pairwise = pairwise_proportions(table, tuple(g for g in groups if g in treatments),
                                        layout.leading("agreements"))
        pairwise.insert(0, "dimension", dimension)
        comparisons.append(pairwise)
    section.tables["pairwise"] = pd.concat(comparisons, ignore_index=True)
    section.figures["fig2_agreements_breaches"] = partial(figures.agreements, section.tables["rates"], treatments)
    return section


def _breach_counts(agreed_sides: pd.DataFrame, kind: str) -> pd.DataFrame:
    own = agreed_sides[agreed_sides["kind"] == kind]
    return own.groupby("treatment").agg(successes=("breached", "sum"), trials=("breached", "size"))


def breach_glm_section(participants: pd.DataFrame, label_setting: str, degree: int,
                       layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("breach_glm", "Human cooperation and agents' promise breaking", "", label_setting)
    data = participants[participants["treatment"].isin(layout.agent_treatments)]
    data = data.dropna(subset=["agent_breach_frequency"])
    if data.empty:
        section.notes.append("No participant with an annotated agreement round with an agent: the "
                             "agents' promise-breaking frequency needs annotations (see the agreements "
                             "section).")
        return section
    section.notes.append(f"Binomial GLM (logit link) of each participant's WC cooperations out of WC rounds "
                         f"on the powers 1..{degree} of f, the share of the participant's agreement rounds "
                         "in which the agent chose B. Participants without an agreement round have no f "
                         f"and are left out ({len(data)} participants in the model).")
    try:
        fitted = models.breach_polynomial_glm(data, degree)
    except (ValueError, np.linalg.LinAlgError) as error:
        section.notes.append(f"The model could not be fitted: {error}")
        return section
    section.tables["coefficients"] = fitted.coefficients
    section.tables["fit"] = fitted.fit_summary
    few_values = models.distinct_values_note(data["agent_breach_frequency"], degree)
    section.notes.extend(([few_values] if few_values else []) + models.fit_notes(fitted))
    curve = models.breach_curve(fitted)
    try:
        curve = curve.join(models.breach_curve_band(fitted)[["lower", "upper"]])
    except (ValueError, np.linalg.LinAlgError) as error:
        section.notes.append(f"No confidence band: {error}")
    section.tables["curve"] = curve
    section.figures["fig3_breach_glm"] = partial(figures.breach_glm, data, curve, layout.treatments)
    return section


def norms_perceptions_section(participants: pd.DataFrame, label_setting: str,
                              norm_intervals=protocol.NORM_INTERVALS, layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("norms_perceptions", "Norm estimates and perceptions of the associates", "",
                      label_setting)
    section.notes.append("Norm estimate: the interval chosen for the other participants' cooperation in the "
                         f"WC game (index {norm_estimates.index_note(norm_intervals)}); tests on the index."
                         if norm_intervals else norm_estimates.NONE_ASKED)
    humans = participants[participants["treatment"].isin(layout.treatments)]
    treatments = _present(humans["treatment"], layout.treatments)
    distribution = (humans.dropna(subset=["norm_estimate_WC"]).groupby(["treatment", "norm_estimate_WC"])
                    .size().rename("participants").reset_index())
    section.tables["norm_estimates"] = distribution
    leading = layout.leading("norms_perceptions")
    section.tables["norm_pairwise"] = pairwise_mann_whitney(humans, "norm_estimate_WC", "treatment", treatments,
                                                            section.notes, "norm estimates", leading)
    section.tables["perception_pairwise"] = _items_pairwise(humans, PERCEPTION_COLUMNS, "perception_", treatments,
                                                            leading)
    if humans[["norm_estimate_WC", *PERCEPTION_COLUMNS]].notna().any().any():
        section.figures["fig4_norms_perceptions"] = partial(figures.norms_perceptions, humans, treatments,
                                                            norm_intervals)
    else:
        section.notes.append("No questionnaire answers (participants table) for this label setting.")
    return section


def _items_pairwise(humans: pd.DataFrame, columns: tuple[str, ...], prefix: str,
                    treatments: tuple[str, ...], leading: tuple[str, ...] = ()) -> pd.DataFrame:
    parts = []
    for column in columns:
        table = pairwise_mann_whitney(humans, column, "treatment", treatments, [], column, leading)
        if not table.empty:
            table.insert(1, "dimension", column.removeprefix(prefix))
            parts.append(table)
    empty = pd.DataFrame(columns=MANN_WHITNEY_COLUMNS[:1] + ["dimension"] + MANN_WHITNEY_COLUMNS[1:])
    return pd.concat(parts, ignore_index=True) if parts else empty


def seven_c_section(participants: pd.DataFrame, label_setting: str, layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("seven_c", "Communication quality (7C)", "", label_setting)
    humans = participants[participants["treatment"].isin(layout.treatments)]
    treatments = _present(humans["treatment"], layout.treatments)
    section.tables["seven_c_pairwise"] = _items_pairwise(humans, SEVEN_C_COLUMNS, "c7_", treatments,
                                                         layout.leading("seven_c"))
    if humans[list(SEVEN_C_COLUMNS)].notna().any().any():
        section.figures["figS1_seven_c"] = partial(figures.likert_boxes, humans, SEVEN_C_COLUMNS, "c7_", treatments,
                                                                "Communication quality (7C)")
    else:
        section.notes.append("No 7C ratings for this label setting.")
    return section


def norms_cooperation_section(participants: pd.DataFrame, label_setting: str,
                              norm_intervals=protocol.NORM_INTERVALS, layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("norms_cooperation", "Norm estimates and cooperation", "", label_setting)
    if not norm_intervals:
        section.notes.append(norm_estimates.NONE_ASKED)
        return section
    groups = norm_estimates.groups(norm_intervals)
    merged = " (60–80 % and 80–100 % merged, as in the paper)" if len(set(groups.values())) < len(groups) else ""
    section.notes.append(f"Participants grouped by their norm estimate{merged}; within each group, WC cooperation "
                         "compared between treatments.")
    humans = participants[participants["treatment"].isin(layout.treatments)].dropna(
        subset=["norm_estimate_WC", "cooperation_rate_WC"]).copy()
    if humans.empty:
        section.notes.append("No participant with both a norm estimate and WC decisions.")
        return section
    humans["norm_group"] = humans["norm_estimate_WC"].astype(int).map(groups)
    by_norm = (humans.groupby(["norm_group", "treatment"])["cooperation_rate_WC"]
               .agg(participants="size", mean="mean", sd="std").reset_index())
    intervals = [stats.rate_interval(humans.loc[(humans["norm_group"] == g) & (humans["treatment"] == t),
                                                "cooperation_rate_WC"]) for g, t in zip(by_norm["norm_group"],
                                                                                       by_norm["treatment"])]
    by_norm["ci_low"] = [low for low, _ in intervals]
    by_norm["ci_high"] = [high for _, high in intervals]
    section.tables["cooperation_by_norm"] = by_norm
    section.notes.append(RATE_INTERVAL_NOTE)
    parts = []
    for group in dict.fromkeys(groups.values()):
        subset = humans[humans["norm_group"] == group]
        table = pairwise_mann_whitney(subset, "cooperation_rate_WC", "treatment",
                                      _present(subset["treatment"], layout.treatments), [], group,
                                      layout.leading("norms_cooperation"))
        if not table.empty:
            table.insert(0, "norm_group", group)
            parts.append(table)
    section.tables["pairwise"] = (pd.concat(parts, ignore_index=True) if parts
                                  else pd.DataFrame(columns=["norm_group", *MANN_WHITNEY_COLUMNS]))
    section.figures["figS2_norms_cooperation"] = partial(figures.norms_cooperation, section.tables["cooperation_by_norm"],
                                                         layout.treatments)
    return section


def motives_section(motives: pd.DataFrame, conversations: pd.DataFrame, label_setting: str,
                    layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("motives", "Motives of the agents' promise breaches", "", label_setting)
    if motives.empty:
        section.notes.append("No motive ratings: this part needs the optional motives CSV (columns "
                             "conversation_id, annotator, " + ", ".join(MOTIVES) + "; −3..3).")
        return section
    keyed = motives.merge(conversations[["conversation_id", "label_setting", "p2_persona"]],
                          on="conversation_id", how="inner")
    unmatched = len(motives) - len(motives[motives["conversation_id"].isin(conversations["conversation_id"])])
    if unmatched:
        section.notes.append(f"{unmatched} motive ratings name conversations not in the decisions: left out.")
    keyed = keyed[(keyed["label_setting"] == label_setting) & (keyed["p2_persona"] != "")]
    if keyed.empty:
        section.notes.append("No motive ratings for conversations of this label setting.")
        return section
    section.notes.append("Both annotators' ratings are kept (not reconciled), as in SI Note 2; one-sample "
                         "Wilcoxon signed-rank test of each motive against 0.")
    rows = []
    for persona in _present(keyed["p2_persona"], layout.personas):
        for motive in MOTIVES:
            ratings = keyed.loc[keyed["p2_persona"] == persona, motive].dropna()
            if ratings.empty:
                continue
            test = stats.signed_rank(ratings)  # every rating 0: R's V = 0, p NaN
            rows.append({"persona": persona, "motive": motive, "ratings": len(ratings), "mean": ratings.mean(),
                         "median": ratings.median(), "V": test.statistic, "p_value": test.p_value})
    section.tables["motive_tests"] = pd.DataFrame(rows, columns=["persona", "motive", "ratings", "mean", "median",
                                                                 "V", "p_value"])
    section.figures["figS3_motives"] = partial(figures.motives, keyed, layout.personas)
    checks = []
    for persona in _present(keyed["p2_persona"], layout.personas):
        for check in BREACH_CHECKS:
            values = keyed.loc[keyed["p2_persona"] == persona, check].dropna()
            if values.empty:
                continue
            yes = int(values.astype(bool).sum())
            low, high = wilson_interval(yes, len(values))
            checks.append({"persona": persona, "check": check, "ratings": len(values), "yes": yes,
                           "percentage": 100 * yes / len(values), "ci_low_percentage": 100 * low,
                           "ci_high_percentage": 100 * high})
    if checks:
        section.notes.append("SI Note 2's second task: two annotators rated each breaching agent's output as "
                             "logically coherent and free of errors (1/0); percentages of ratings with 95 % "
                             "Wilson intervals, and the annotators' Cohen's kappa.")
        section.tables["coherence_error_free"] = pd.DataFrame(checks)
        section.tables["coherence_error_free_kappa"] = annotation.breach_check_agreement(keyed)
    return section


def perception_glm_section(participants: pd.DataFrame, label_setting: str,
                           layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("perception_glm", "What predicts cooperation: norms, perceptions, 7C", "", label_setting)
    section.notes.append("Binomial GLM (logit) of WC cooperations out of WC rounds on the 7C ratings, the "
                         "perception ratings and the WC norm estimate, all standardised (z-scores); the "
                         f"agent model adds treatment dummies with {layout.agent_treatments[0]} as the baseline. "
                         "AICc = AIC + 2k(k+1)/(n−k−1).")
    for name, treatments in (("humans_vs_humans", ("H-H",)), ("humans_vs_agents", layout.agent_treatments)):
        present = tuple(t for t in treatments if (participants["treatment"] == t).any())
        if not present:
            section.notes.append(f"{name}: no participants.")
            continue
        try:
            fitted = models.perception_glm(participants, present, baseline=layout.agent_treatments[0])
        except (ValueError, np.linalg.LinAlgError) as error:
            section.notes.append(f"{name}: {error}")
            continue
        section.tables[f"{name}_coefficients"] = fitted.coefficients
        section.tables[f"{name}_fit"] = fitted.fit_summary
        section.notes.extend(f"{name}: {note}" for note in models.fit_notes(fitted))
    agent_people = participants[participants["treatment"].isin(layout.agent_treatments)]
    if "perception_intelligence" in agent_people and agent_people["agent_breach_frequency"].notna().any():
        test = stats.spearman(agent_people["perception_intelligence"], agent_people["agent_breach_frequency"])
        pairs = agent_people[["perception_intelligence", "agent_breach_frequency"]].dropna()
        section.tables["spearman_intelligence_breaking"] = pd.DataFrame([{
            "x": "perception_intelligence", "y": "agent_breach_frequency", "participants": len(pairs),
            "rho": test.statistic, "p_value": test.p_value}])
        section.notes.append("Spearman correlation (R's cor.test(method = \"spearman\", exact = FALSE)) between "
                             "the agents' perceived intelligence and their promise-breaking frequency f, over the "
                             "participants of the agent treatments with an f (the paper's main text: 0.11, "
                             "p = 0.02).")
    else:
        section.notes.append("Spearman correlation of perceived intelligence and agents' promise breaking: "
                             "needs annotations (f) — not computed.")
    return section


def believed_human_section(participants: pd.DataFrame, label_setting: str,
                           layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("believed_human", "Did participants believe their associates were human?", "",
                      label_setting)
    humans = participants[participants["treatment"].isin(layout.treatments)]
    rows = []
    for treatment in _present(humans["treatment"], layout.treatments):
        ratings = humans.loc[humans["treatment"] == treatment, "believed_human"].dropna()
        if ratings.empty:
            continue
        test = stats.signed_rank(ratings)
        low, high = stats.mean_interval(ratings)
        rows.append({"treatment": treatment, "n": len(ratings), "mean": ratings.mean(), "ci_low": low,
                     "ci_high": high, "median": ratings.median(), "V": test.statistic, "p_value": test.p_value})
    section.tables["believed_human_tests"] = pd.DataFrame(rows, columns=["treatment", "n", "mean", "ci_low", "ci_high",
                                                                         "median", "V", "p_value"])
    if not rows:
        section.notes.append("No `believed_human` ratings.")
    else:
        section.notes.append("One-sample Wilcoxon signed-rank test of each treatment's ratings against 0 "
                             "(p not defined when every rating is 0); 95 % t intervals of the mean.")
        section.figures["figS25_believed_human"] = partial(figures.believed_human, humans,
                                                           tuple(r["treatment"] for r in rows))
    return section


# --- Everything --------------------------------------------------------------------------------
def analyse(exports: Exports, *, template_path: Path | None = None,
            glm_degree: dict[str, int] | int | None = None,
            cooperative_choice: str = protocol.COOPERATE, norm_intervals=protocol.NORM_INTERVALS,
            layout: TreatmentLayout = PAPER_LAYOUT) -> Analysis:
    """Compute every table and figure of the report from loaded exports; cooperation is choosing
    ``cooperative_choice``, the norm estimates are indices into ``norm_intervals`` (empty: none asked),
    the sections compare ``layout``'s treatments (the sessions' experiment's)."""
    degrees = dict(PAPER_GLM_DEGREE)
    if isinstance(glm_degree, int):
        degrees = {setting: glm_degree for setting in degrees}
    elif glm_degree:
        degrees.update(glm_degree)
    decisions = tidy.decisions_table(exports, cooperative_choice)
    annotation_key = exports.annotation_key.drop(columns=["_file"], errors="ignore")
    if template_path is not None:
        annotation_key = pd.concat([annotation_key, annotation.read_key(
            Path(template_path).with_name(annotation.KEY_NAME))])
    annotation_key = annotation_key.drop_duplicates(annotation.ITEM)
    annotations, unknown = annotation.unblind(exports.annotations, annotation_key)
    motives, unknown_motives = annotation.unblind(exports.motives, annotation_key, "motive")
    reported = {(p.file, p.message) for p in exports.problems}
    for message in unknown + unknown_motives:
        if ("annotations", message) not in reported:  # analyse() may run twice on one Exports
            exports.problems.append(Problem("annotations", annotation.ITEM, message))
    resolved = annotation.resolve(annotations)
    kappa = annotation.inter_annotator_agreement(annotations)
    conversations = tidy.conversations_table(decisions, exports.messages, resolved, cooperative_choice)
    sides = tidy.sides_table(conversations)
    participants = tidy.participants_table(exports, decisions, sides)
    agents = tidy.agents_table(exports, decisions, sides)
    sections = [overview_section(decisions, exports, layout), annotation_section(kappa, resolved, template_path)]
    lab_rows = pd.concat([participants.loc[participants["treatment"].isin(layout.treatments), "label_setting"],
                          decisions.loc[decisions["treatment"].isin(layout.treatments), "label_setting"]])
    settings_present = _present(lab_rows, layout.label_settings)
    if (decisions["treatment"] == SIMULATION_TREATMENT).any():
        sections.append(simulation_section(sides, decisions))
    for label_setting in settings_present:
        people = participants[participants["label_setting"] == label_setting]
        builders: list[tuple[str, Callable[[], Section]]] = [
            ("cooperation", lambda: cooperation_section(
                people, agents[agents["label_setting"] == label_setting], label_setting, layout)),
            ("agreements", lambda: agreements_section(
                conversations[conversations["label_setting"] == label_setting],
                sides[sides["label_setting"] == label_setting], label_setting, template_path, layout)),
            ("breach_glm", lambda: breach_glm_section(people, label_setting, degrees.get(label_setting, 3), layout)),
            ("norms_perceptions", lambda: norms_perceptions_section(people, label_setting, norm_intervals, layout)),
            ("seven_c", lambda: seven_c_section(people, label_setting, layout)),
            ("norms_cooperation", lambda: norms_cooperation_section(people, label_setting, norm_intervals, layout)),
            ("motives", lambda: motives_section(motives, conversations, label_setting, layout)),
            ("perception_glm", lambda: perception_glm_section(people, label_setting, layout)),
        ]
        if label_setting in layout.uninformed:
            builders.append(("believed_human", lambda: believed_human_section(people, label_setting, layout)))
        for key, build in builders:
            try:
                section = build()
            except Exception as error:  # one broken part must not cost the rest of the report
                section = Section(key, "Not computed", "", label_setting,
                                  notes=[f"This part could not be computed: {type(error).__name__}: {error}"])
            informed_ref, uninformed_ref = PAPER_REFERENCES[section.key]
            layout.attribute(section, uninformed_ref if label_setting in layout.uninformed else informed_ref)
            section.title = f"{section.title} — {_label_title(label_setting)}"
            sections.append(section)
    return Analysis(exports, decisions, conversations, sides, participants, agents, resolved, kappa, sections,
                    template_path, annotation_key)
