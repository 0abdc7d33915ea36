"""The report's sections computed once, not per label setting: the data (sessions, the sample as
in Table S4, the files read, the model calls) and the state of the annotation (SI Note 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import protocol
from analysis import annotation
from analysis.comparisons import PAPER_LAYOUT, Section, TreatmentLayout
from analysis.load import Exports


def overview_section(decisions: pd.DataFrame, exports: Exports, layout: TreatmentLayout = PAPER_LAYOUT) -> Section:
    section = Section("overview", "Data", "Table S4 (sessions)")
    if not decisions.empty:
        keys = ["session_code", "source", "treatment", "label_setting", "game_order"]
        people = (decisions.groupby(keys + ["player_kind"])["player_code"].nunique()
                  .unstack("player_kind", fill_value=0).reindex(columns=["human", "agent"], fill_value=0)
                  .rename(columns={"human": "participants", "agent": "agents"}))
        counts = decisions.groupby(keys).agg(decisions=("choice", "size"),
                                             timed_out=("timed_out", lambda s: int(s.fillna(False).sum())))
        sessions = people.join(counts).reset_index()
        demographics = _session_demographics(exports.participants)
        if not demographics.empty:
            sessions = sessions.merge(demographics, on="session_code", how="left")
        section.tables["sessions"] = sessions.sort_values(["source", "label_setting", "treatment", "game_order"],
                                                          ignore_index=True)
        uncompared = sorted(set(decisions.loc[decisions["source"] == "lab", "treatment"].dropna())
                            - set(layout.treatments))
        if uncompared:  # analysed without their experiment: counted here, not in the comparisons below
            section.notes.append(
                f"Treatments not of the compared design ({', '.join(uncompared)}) are in this overview and in the "
                f"tidy tables (tables/tidy_participants.csv, tables/tidy_agents.csv: each participant's and agent's "
                f"cooperation rate), not in the sections below, which compare {', '.join(layout.treatments)} only "
                f"(their experiment's manifests make the sections compare its own treatments).")
        section.notes += one_game_notes(decisions)
    else:
        section.notes.append("No decisions were loaded: most of the report is empty.")
    section.tables["sample_by_treatment"] = sample_description(exports.participants, layout.treatments)
    section.tables["files"] = exports.files
    calls = exports.llm_calls
    if not calls.empty:
        section.tables["llm_calls"] = calls.groupby(["treatment", "model", "status"]).agg(
            calls=("status", "size"), input_tokens=("input_tokens", "sum"), output_tokens=("output_tokens", "sum"),
            cost=("cost", "sum")).reset_index()
    return section


def one_game_notes(decisions: pd.DataFrame) -> list[str]:
    """What sessions of a design with one game (its game order names one game) leave uncomputable:
    everything of the game they did not play, and what compares the two games."""
    lab = decisions[decisions["source"] == "lab"]
    orders = sorted(order for order in lab["game_order"].dropna().unique() if "-" not in order)
    if not orders:
        return []
    played = set(lab["game"].dropna())
    notes = [f"Sessions of a design with one game (game order {', '.join(orders)}) played "
             f"{' and '.join(orders)} only: for them the other game's columns (its cooperation rate, "
             "points, norm estimate) are empty, and no comparison of the two games is computable."]
    if "WC" not in played:
        notes.append("No session played the game with chat (WC): the sections on WC (the headline cooperation "
                     "comparisons, agreements and breaches, norms, perception and the 7C models) are not computable "
                     "for these data and stay empty; the WoC rates are in the cooperation section's tables.")
    return notes


def _session_demographics(participants: pd.DataFrame) -> pd.DataFrame:
    """Table S4's per-session columns: mean and SD (n − 1) of age, % women among those who answered."""
    if participants.empty:
        return pd.DataFrame()
    people = participants.drop_duplicates(["session_code", "participant_code"])
    genders = people["gender"].astype(str).str.strip().str.lower()
    people = people.assign(_age=pd.to_numeric(people["age"], errors="coerce"),
                           _woman=(genders == "female").where(genders != ""))
    return people.groupby("session_code").agg(mean_age=("_age", "mean"), sd_age=("_age", "std"),
                                              percent_women=("_woman", lambda v: 100 * v.dropna().astype(float).mean()
                                                             if v.notna().any() else np.nan)).reset_index()


def sample_description(participants: pd.DataFrame,
                       treatment_order: tuple[str, ...] = PAPER_LAYOUT.treatments) -> pd.DataFrame:
    """Table S4's participant columns per label setting and treatment: participants, mean and SD
    of age (R's sd, n − 1), % women among those who answered the gender question."""
    columns = ["label_setting", "treatment", "sessions", "participants", "mean_age", "sd_age",
               "gender_answers", "percent_women"]
    if participants.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    people = participants.drop_duplicates(["session_code", "participant_code"])
    for (label_setting, treatment), group in people.groupby(["label_setting", "treatment"]):
        ages = pd.to_numeric(group["age"], errors="coerce").dropna()
        genders = group["gender"].astype(str).str.strip().str.lower()
        answered = genders[genders != ""]
        rows.append({"label_setting": label_setting, "treatment": treatment,
                     "sessions": group["session_code"].nunique(), "participants": len(group),
                     "mean_age": ages.mean() if len(ages) else np.nan,
                     "sd_age": ages.std() if len(ages) > 1 else np.nan, "gender_answers": len(answered),
                     "percent_women": 100 * (answered == "female").mean() if len(answered) else np.nan})
    order = {value: index for index, value in enumerate(protocol.LABEL_SETTINGS + treatment_order)}
    table = pd.DataFrame(rows, columns=columns)
    return table.sort_values(["label_setting", "treatment"], key=lambda c: c.map(order).fillna(99),
                             ignore_index=True)


def annotation_section(kappa: pd.DataFrame, resolved: pd.DataFrame, template_path: Path | None) -> Section:
    section = Section("annotation", "Annotation of the conversations", "SI Note 2")
    if template_path:
        section.notes.append(f"Annotation template for the annotators (one row per WC conversation, players "
                             f"anonymised, opaque item ids in a random order): {template_path}. The key "
                             f"({Path(template_path).with_name(annotation.KEY_NAME)}) maps items to "
                             "conversations: keep it, and put it with the filled copies.")
    if resolved.empty:
        section.notes.append("No annotations loaded yet.")
        return section
    section.tables["inter_annotator_agreement"] = kappa
    section.tables["label_sources"] = resolved["label_source"].value_counts().rename_axis(
        "label_source").reset_index(name="conversations")
    return section

