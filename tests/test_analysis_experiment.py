"""The analysis reads the sessions' experiment from their manifests: cooperation is its cooperative
choice, sessions of different experiments are refused (exit 2), and a design without a cooperative
choice has no cooperation rate to analyse (exit 2, said so)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

import experiment_design as ed
from analysis import analyse, load_exports, synthetic
from analysis.__main__ import main as cli_main


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("exports")
    parameters = synthetic.SyntheticParameters(participants_per_session=4, label_settings=("informed",),
                                               game_orders=("WC-WoC",))
    synthetic.write(synthetic.generate(parameters, seed=5), folder)
    return folder


def record(text: str, name: str) -> dict:
    experiment = ed.load_text(text, name)
    return {"name": name, "file": f"experiments/{name}.toml", "text_sha256": experiment.text_sha256,
            "design_sha256": experiment.canonical_hash, "text": text}


def with_manifests(exports: Path, folder: Path, experiments: list[dict]) -> Path:
    """The exports and a manifest per session, the sessions' experiments dealt in turn from ``experiments``."""
    folder.mkdir()
    for path in exports.glob("*.csv"):
        (folder / path.name).write_bytes(path.read_bytes())
    codes = sorted(set(pd.read_csv(exports / "decisions_informed.csv")["session_code"]))
    with (folder / "manifest.csv").open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["session_code", "key", "value"])
        for index, code in enumerate(codes):
            writer.writerow([code, "experiment", json.dumps(experiments[index % len(experiments)])])
    return folder


def text_of(name: str) -> str:
    return (ed.EXPERIMENTS_DIR / f"{name}.toml").read_text(encoding="utf-8")


def test_cooperation_is_the_experiment_s_cooperative_choice(exports):
    paper = analyse(load_exports(exports))
    flipped = analyse(load_exports(exports), cooperative_choice="B")
    decisions = flipped.decisions
    assert (decisions["cooperated"] == decisions["choice"].eq("B")).all()
    rates = paper.participants.set_index("participant_code")["cooperation_rate_WC"]
    other = flipped.participants.set_index("participant_code")["cooperation_rate_WC"]
    assert ((rates + other.loc[rates.index]).round(9) == 1).all()


def test_the_stag_hunt_s_sessions_are_analysed_as_the_stag_hunt(exports, tmp_path, capsys):
    folder = with_manifests(exports, tmp_path / "hunt", [record(text_of("stag_hunt"), "stag_hunt")])
    assert cli_main([str(folder), "--out", str(tmp_path / "report")]) in (0, 3)
    design = ed.load(ed.EXPERIMENTS_DIR / "stag_hunt.toml").canonical_hash[:12]
    assert f"experiment stag_hunt (design {design}): cooperation is choosing A" in capsys.readouterr().out


def test_sessions_of_two_experiments_are_refused(exports, tmp_path, capsys):
    folder = with_manifests(exports, tmp_path / "mixed", [record(text_of("stag_hunt"), "stag_hunt"),
                                                          record(text_of("paper"), "paper")])
    assert cli_main([str(folder), "--out", str(tmp_path / "report"), "--allow-mixed-protocols"]) == 2
    error = capsys.readouterr().err
    assert "the sessions ran different experiments, which are never pooled" in error
    assert "stag_hunt (design " in error and "paper (design " in error
    assert not (tmp_path / "report").exists()


def test_a_design_without_a_cooperative_choice_has_no_cooperation_rate(exports, tmp_path, capsys):
    text = re.sub(r'cooperative_choice = "A".*\n', "", text_of("stag_hunt"))
    text = re.sub(r"norm_bonus = .*\n", "norm_bonus = 0.0\n", text)
    text = re.sub(r"norm_intervals = .*\n", "", text.replace('"norm_estimates", ', ""))
    folder = with_manifests(exports, tmp_path / "none", [record(text, "hunt_without_cooperation")])
    assert cli_main([str(folder), "--out", str(tmp_path / "report")]) == 2
    assert "experiment hunt_without_cooperation names no cooperative choice" in capsys.readouterr().err



@pytest.fixture(scope="module")
def participants(exports) -> pd.DataFrame:
    return analyse(load_exports(exports)).participants


@pytest.mark.parametrize("norm_intervals", [((0, 25), (25, 50), (50, 75), (75, 100)), ()], ids=["quarters", "none"])
def test_the_norm_sections_follow_the_experiment_s_intervals_or_say_it_asks_none(participants, norm_intervals):
    from analysis.results import norms_cooperation_section, norms_perceptions_section

    estimates = norms_perceptions_section(participants, "informed", norm_intervals)
    by_norm = norms_cooperation_section(participants, "informed", norm_intervals)
    notes = " ".join(estimates.notes + by_norm.notes)
    if norm_intervals:
        assert "3 = 75–100 %" in notes and "merged" not in notes
        groups = set(by_norm.tables["cooperation_by_norm"]["norm_group"])
        assert groups and groups <= {"0–25 %", "25–50 %", "50–75 %", "75–100 %"}
        estimates.figures["fig4_norms_perceptions"]()  # drawn on the file's intervals
    else:
        assert "asks no norm estimate" in notes and not by_norm.tables


# --- An experiment's own personas: the sections compare its treatments -------------------------
TIT_FOR_TAT = "tit_for_tat_en"  # H-H, H-T (tit_for_tat), H-U (unconditional_cooperator)
OWN_TREATMENTS = ("H-H", "H-T", "H-U")
OWN_PERSONAS = ("tit_for_tat", "unconditional_cooperator")


@pytest.fixture(scope="module")
def own_personas_exports(tmp_path_factory) -> Path:
    """Synthetic sessions of H-H, H-T and H-U, the last two behaving as the paper's H-F and H-C."""
    folder = tmp_path_factory.mktemp("own_personas")
    parameters = synthetic.SyntheticParameters(participants_per_session=4, label_settings=("informed",),
                                               game_orders=("WC-WoC",), treatments=("H-H", "H-F", "H-C"))
    tables = synthetic.as_own_personas(synthetic.generate(parameters, seed=7), {
        "H-F": ("H-T", "tit_for_tat"), "H-C": ("H-U", "unconditional_cooperator")})
    synthetic.write(tables, folder)
    return folder


@pytest.fixture(scope="module")
def own_personas_analysis(own_personas_exports):
    from analysis.comparisons import treatment_layout

    experiment = ed.load(ed.EXPERIMENTS_DIR / f"{TIT_FOR_TAT}.toml")
    return analyse(load_exports(own_personas_exports, experiment), layout=treatment_layout(experiment))


def test_the_paper_s_personas_keep_the_paper_s_layout():
    from analysis.comparisons import PAPER_LAYOUT, treatment_layout

    for name in ("paper", "stag_hunt", "fixed_partner_one_message"):
        assert treatment_layout(ed.load(ed.EXPERIMENTS_DIR / f"{name}.toml")) == PAPER_LAYOUT
    layout = treatment_layout(ed.load(ed.EXPERIMENTS_DIR / f"{TIT_FOR_TAT}.toml"))
    assert (layout.treatments, layout.agent_treatments, layout.personas, layout.paper) == (
        OWN_TREATMENTS, OWN_TREATMENTS[1:], OWN_PERSONAS, False)


def test_an_experiment_s_own_label_settings_have_their_sections(tmp_path):
    """Label settings named by the experiment (not informed/uninformed): each has its sections, the
    uninformed one asks who was believed human, and the paper's figures stay the paper's."""
    from analysis.comparisons import treatment_layout

    text = (ed.EXPERIMENTS_DIR / "paper.toml").read_text(encoding="utf-8")
    text = (text.replace("[labels.informed]", "[labels.ai_told]").replace("[labels.uninformed]", "[labels.not_told]")
            .replace('label_settings = ["informed", "uninformed"]', 'label_settings = ["ai_told", "not_told"]'))
    experiment = ed.load_text(text, "own_labels")
    renamed = {"informed": "ai_told", "uninformed": "not_told"}
    parameters = synthetic.SyntheticParameters(participants_per_session=4, game_orders=("WC-WoC",),
                                               treatments=("H-H", "H-F"))
    tables = {name: table.assign(label_setting=table["label_setting"].replace(renamed))
              if "label_setting" in table else table for name, table in synthetic.generate(parameters, seed=3).items()}
    synthetic.write(tables, tmp_path)
    layout = treatment_layout(experiment)
    assert (layout.label_settings, layout.uninformed, layout.paper) == (("ai_told", "not_told"), ("not_told",), True)
    analysis = analyse(load_exports(tmp_path, experiment), layout=layout)
    cooperation = {s.label_setting: s for s in analysis.sections if s.key == "cooperation"}
    assert set(cooperation) == {"ai_told", "not_told"}
    assert cooperation["ai_told"].reproduces.startswith("Fig. 1")
    assert [s.label_setting for s in analysis.sections if s.key == "believed_human"] == ["not_told"]


def test_the_cooperation_section_compares_the_experiment_s_own_treatments(own_personas_analysis):
    analysis = own_personas_analysis
    [section] = [s for s in analysis.sections if s.key == "cooperation"]
    decisions = analysis.decisions
    humans = decisions[decisions["player_kind"] == "human"]
    agents = decisions[decisions["player_kind"] == "agent"]
    rates = section.tables["cooperation_rates"]
    for game in ("WC", "WoC"):
        shown = rates[rates["game"] == game]
        assert list(shown["group"]) == [*OWN_TREATMENTS, *OWN_PERSONAS]
        for who, rows, group_column in (("participants", humans, "treatment"), ("agents", agents, "persona")):
            played = rows[rows["game"] == game]
            recount = (played["choice"] == "A").groupby([played[group_column], played["player_code"]]).mean()
            for group, row in shown[shown["who"] == who].set_index("group").iterrows():
                assert row["n"] == len(recount[group]) and row["mean"] == pytest.approx(recount[group].mean())
    assert list(section.tables["participants_pairwise_WC"]["comparison"]) == [
        "H-H vs. H-T", "H-H vs. H-U", "H-T vs. H-U"]
    assert list(section.tables["agents_pairwise_WC"]["comparison"]) == [
        "tit_for_tat vs. unconditional_cooperator"]
    assert {"anova_WC", "tukey_hsd_WC"} <= set(section.tables)
    assert list(section.figures) == ["cooperation"] and section.reproduces.startswith("— (the experiment's treatments")
    [overview] = [s for s in analysis.sections if s.key == "overview"]
    assert not any("not in the sections below" in note for note in overview.notes)
    assert list(overview.tables["sample_by_treatment"]["treatment"]) == list(OWN_TREATMENTS)


def test_the_other_sections_compare_the_experiment_s_own_treatments(own_personas_analysis):
    sections = {s.key: s for s in own_personas_analysis.sections}
    agreements = sections["agreements"].tables["pairwise"]
    assert list(agreements.loc[agreements["dimension"] == "agreements", "comparison"]) == [
        "H-H vs. H-T", "H-H vs. H-U", "H-T vs. H-U"]
    assert list(agreements.loc[agreements["dimension"] == "agent_breaches", "comparison"]) == ["H-T vs. H-U"]
    assert set(sections["norms_perceptions"].tables["norm_pairwise"]["comparison"]) == {
        "H-H vs. H-T", "H-H vs. H-U", "H-T vs. H-U"}
    glm_notes = " ".join(sections["perception_glm"].notes)  # 4 participants a treatment: too few to fit
    assert "with H-T as the baseline" in glm_notes and "humans_vs_agents: 8 observations" in glm_notes
    drawn = {name: draw() for section in sections.values() for name, draw in section.figures.items()}
    assert {"cooperation", "agreements_breaches", "norms_cooperation"} <= set(drawn)
    assert [text.get_text() for text in drawn["norms_cooperation"].axes[0].get_legend().get_texts()] == list(
        OWN_TREATMENTS)
    plt.close("all")
