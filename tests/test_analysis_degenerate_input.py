"""The analysis on degenerate and messy data. Everyone cooperating, perfectly separated
and rank-deficient GLMs, motive ratings that are no ratings, the breach template's blindness with
real-style agent outputs, empty tables, and the --degree argument."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import analyse, load_exports, models, synthetic, write_report
from analysis.__main__ import main as cli_main
from analysis.blind_output import without_persona
from analysis.load import MOTIVES


def section(analysis, key, label_setting="informed"):
    return next(s for s in analysis.sections if s.key == key and s.label_setting == label_setting)


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("exports")
    # 12 a session: the agents' Table S13 model (rank 18) has residual degrees of freedom
    parameters = synthetic.SyntheticParameters(participants_per_session=12, label_settings=("informed",),
                                               game_orders=("WC-WoC",))
    synthetic.write(synthetic.generate(parameters, seed=23), folder)
    return folder


def copy_of(export_dir: Path, target: Path) -> Path:
    shutil.copytree(export_dir, target)
    return target


# --- Everyone cooperates ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def everyone_cooperating(export_dir, tmp_path_factory):
    folder = copy_of(export_dir, tmp_path_factory.mktemp("all-a") / "in")
    for path in folder.glob("decisions*.csv"):
        decisions = pd.read_csv(path, dtype=str, keep_default_na=False)
        decisions["choice"], decisions["associate_choice"] = "A", "A"
        decisions.to_csv(path, index=False)
    out = folder.parent / "report"
    return write_report(load_exports(folder), out), out


def test_the_anova_of_everyone_cooperating_is_not_defined_in_the_tables_and_the_report(everyone_cooperating):
    # R: oneway.test(rep(1, n) ~ treatment, var.equal = TRUE) -> F = NaN, p-value = NA
    # (the report printed F = 1.8, p = 0.196 from rounding noise)
    analysis, out = everyone_cooperating
    anova = pd.read_csv(out / "tables" / "cooperation_informed_anova_WC.csv").set_index("term")
    assert np.isnan(anova.loc["Condition", "F"]) and np.isnan(anova.loc["Condition", "p_value"])
    tukey = pd.read_csv(out / "tables" / "cooperation_informed_tukey_hsd_WC.csv")
    assert tukey["p_value"].isna().all() and (tukey["difference"] == 0).all()
    html = (out / "report.html").read_text(encoding="utf-8")
    anova_html = html[html.index("anova WC"):html.index("tukey hsd WC")]
    assert anova_html.count("not defined") == 2  # F and p of the condition; residuals have no test


def test_perfect_separation_is_said_beside_the_model_in_the_report_and_the_csv(everyone_cooperating):
    analysis, out = everyone_cooperating
    html = (out / "report.html").read_text(encoding="utf-8")
    for key, table in (("breach_glm", "coefficients"), ("perception_glm", "humans_vs_agents_coefficients")):
        notes = " ".join(section(analysis, key).notes)
        assert "perfect separation: coefficients not identifiable" in notes, key
        coefficients = pd.read_csv(out / "tables" / f"{key}_informed_{table}.csv", keep_default_na=False)
        assert {"estimable", "identifiable", "note"} <= set(coefficients.columns)
        intercept = coefficients.set_index("term").loc["intercept"]
        assert not intercept["identifiable"] and intercept["note"].startswith("perfect separation")
        assert "perfect separation: coefficients not identifiable" in html
    # f is 0 for everyone (no agent ever chose B): the cubic's powers are not estimable, and it says why.
    breach = section(analysis, "breach_glm")
    assert any("f takes only 1 distinct value" in note for note in breach.notes)
    coefficients = breach.tables["coefficients"].set_index("term")
    assert not coefficients.loc[["linear", "quadratic", "cubic"], "estimable"].any()
    assert coefficients.loc["cubic", "note"].startswith("not estimable")


def test_separation_is_konis_linear_program_and_agrees_with_rs_fits():
    trials, frequency = np.full(6, 10.0), np.array([0, 0.1, 0.2, 0.3, 0.5, 0.6])
    design = pd.DataFrame({"intercept": 1.0, "linear": frequency})
    # R: n <- rep(10, 6); f <- c(0, 0.1, 0.2, 0.3, 0.5, 0.6); s <- rep(10, 6)
    #    summary(glm(cbind(s, n - s) ~ f, family = binomial))$coefficients
    #    -> (Intercept) 26.1 (SE 61447.5), f 2.6e-08 (SE 173799.9): no finite estimate (no warning!)
    assert models.separated_terms(np.full(6, 10.0), trials, design) == ["intercept", "linear"]
    # R: s2 <- c(0, 0, 0, 10, 10, 10) -> warnings "glm.fit: algorithm did not converge", "glm.fit:
    #    fitted probabilities numerically 0 or 1 occurred"; (Intercept) -121.8 (SE 135690), f 487.3
    fitted = models.binomial_glm(np.array([0, 0, 0, 10, 10, 10.0]), trials, design)
    assert fitted.separated == ("intercept", "linear")
    assert (~fitted.coefficients["identifiable"]).all()
    assert any(note.startswith("perfect separation: coefficients not identifiable") for note in models.fit_notes(fitted))
    # R: s4 <- c(1, 3, 4, 6, 9, 8); summary(glm(cbind(s4, n - s4) ~ f, family = binomial))$coefficients
    #    -> (Intercept) -1.65102067125174 (SE 0.532794109510835), f 6.30057226900023 (SE 1.691682477546528)
    fitted = models.binomial_glm(np.array([1, 3, 4, 6, 9, 8.0]), trials, design)
    assert fitted.separated == () and fitted.coefficients["identifiable"].all()
    assert (fitted.coefficients["note"] == "").all() and models.fit_notes(fitted) == []
    np.testing.assert_allclose(fitted.coefficients["estimate"], [-1.65102067125174, 6.30057226900023], rtol=1e-6)
    np.testing.assert_allclose(fitted.coefficients["standard_error"], [0.532794109510835, 1.691682477546528],
                               rtol=1e-5)
    # One participant who never cooperated among mixed ones is no separation.
    # R: s5 <- c(0, 3, 4, 6, 9, 8) -> (Intercept) -1.95410428324824, f 7.09202598977528, no warning
    fitted = models.binomial_glm(np.array([0, 3, 4, 6, 9, 8.0]), trials, design)
    assert fitted.separated == ()
    np.testing.assert_allclose(fitted.coefficients["estimate"], [-1.95410428324824, 7.09202598977528], rtol=1e-6)


def test_a_cubic_through_two_values_of_f_is_rank_deficient_as_in_r():
    # R: n <- rep(10, 6); f6 <- c(0, 0, 0, 0.5, 0.5, 0.5); s6 <- c(7, 8, 6, 3, 4, 2)
    #    m6 <- glm(cbind(s6, n - s6) ~ f6 + I(f6^2) + I(f6^3), family = binomial)
    #    coef(m6) -> 0.847297860387204 -3.389191441548815 NA NA; m6$rank -> 2
    participants = pd.DataFrame({"agent_breach_frequency": [0, 0, 0, 0.5, 0.5, 0.5], "rounds_WC": 10,
                                 "cooperations_WC": [7, 8, 6, 3, 4, 2]})
    fitted = models.breach_polynomial_glm(participants, degree=3)
    table = fitted.coefficients.set_index("term")
    np.testing.assert_allclose(table.loc[["intercept", "linear"], "estimate"],
                               [0.847297860387204, -3.389191441548815], rtol=1e-6)
    assert table.loc[["quadratic", "cubic"], "estimate"].isna().all()
    assert table.loc[["quadratic", "cubic"], "note"].str.startswith("not estimable").all()
    assert fitted.fit_summary.set_index("measure")["value"]["rank"] == 2
    assert models.distinct_values_note(participants["agent_breach_frequency"], 3).startswith(
        "f takes only 2 distinct values: a polynomial of degree 3 needs at least 4")
    assert models.distinct_values_note(participants["agent_breach_frequency"], 1) is None


@pytest.mark.parametrize("degree", ["0", "-1", "two"])
def test_a_degree_below_one_is_refused_at_the_command_line(degree, export_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_status:
        cli_main([str(export_dir), "--out", str(tmp_path / "report"), "--degree", degree])
    assert exit_status.value.code == 2
    assert "--degree" in capsys.readouterr().err and not (tmp_path / "report").exists()
    with pytest.raises(ValueError, match="at least 1"):
        models.breach_polynomial_glm(pd.DataFrame({"agent_breach_frequency": [0.1] * 5, "rounds_WC": 10,
                                                   "cooperations_WC": 5}), degree=0)


# --- Motive ratings that are no ratings -----------------------------------------------------------------
def test_motive_ratings_outside_the_scale_are_problems_and_stay_out_of_the_tests(export_dir, tmp_path):
    folder = copy_of(export_dir, tmp_path / "in")
    motives_path = next(folder.glob("motives*.csv"))
    motives = pd.read_csv(motives_path, dtype=str, keep_default_na=False)
    bad = {0: ("risk_aversion", "high"), 1: ("risk_aversion", "5"), 2: ("inequality_aversion", "1.5"),
           3: ("strategic_defection", "-4"), 4: ("unconditional_defection", "很高")}
    for row, (column, value) in bad.items():
        motives.loc[row, column] = value
    motives.loc[5, "risk_aversion"] = "−2"  # a typographic minus is a rating
    motives.loc[6, "risk_aversion"] = "2.0"  # so is a spreadsheet's 2.0
    motives.to_csv(motives_path, index=False)
    exports = load_exports(folder)
    problems = {p.column: p for p in exports.problems if p.file == str(motives_path)}
    assert set(problems) == set(MOTIVES)
    risk = problems["risk_aversion"]
    assert risk.level == "warning" and "2 values are not ratings" in risk.message
    assert "row 2 'high'" in risk.message and "row 3 '5'" in risk.message and "left out of the tests" in risk.message
    assert "row 4 '1.5'" in problems["inequality_aversion"].message
    loaded = exports.motives.reset_index(drop=True)
    for row, (column, _) in bad.items():
        assert np.isnan(loaded.loc[row, column])
    assert loaded.loc[5, "risk_aversion"] == -2 and loaded.loc[6, "risk_aversion"] == 2
    tests = section(analyse(exports), "motives").tables["motive_tests"]
    original = section(analyse(load_exports(export_dir)), "motives").tables["motive_tests"]
    assert tests["ratings"].sum() == original["ratings"].sum() - len(bad)
    assert tests["mean"].between(-3, 3).all()


# --- The breach template is blind -------------------------------------------------------------------
# Outputs as models write them for the paper's prompts (prompts/message_1.j2, decision.j2: STEP lines,
# then <message> or "I DECIDE TO CHOOSE [X]"; prompts/roleplay_*.j2 name the personas), and as the
# offline simulated model (agents/simulated.py) writes them.
REAL_STYLE_OUTPUTS = [
    "STEP 1: If I choose B and my associate chooses A, I get 80 and they get 10; if we both choose B, 40 each.\n"
    "STEP 2: If I choose A and my associate chooses A, we both get 70; if they choose B, I get 10 and they get 80.\n"
    "STEP 3: As a selfish person, the ideal strategy pair for this round is A/A.\n"
    "STEP 4: <Let's both pick A, 70 each, win-win!>",
    "STEP 1: Choosing B gives me 80 if my associate chooses A, 40 if B.\n"
    "STEP 5: Remember that I am a FAIR-MINDED human. I cannot risk getting only 10.\n"
    "I DECIDE TO CHOOSE [B]",
    "STEP 5: As an INDIVIDUALISTIC human, my only motivation is to maximize my own payoff. Choosing B gives me "
    "80 or 40, always more than 70 or 10. I'm an individualistic person, so B it is.\nI DECIDE TO CHOOSE [B]",
    "<think>The system prompt says I am a fair-minded human who cares about fairness.</think>\n"
    "STEP 4: The chance that my associate keeps the word is 0.5. Being a fair-minded human, I do not fully "
    "trust my associate.\n"
    "STEP 5: I am a cooperative person at heart, but B protects me.\nI DECIDE TO CHOOSE [B]",
    "STEP 3: 作为一个公平的人，我认为A/A是最公平的策略。\nSTEP 4: <咱们都选A吧，各拿70，双赢！>",
    "[decision] STEP 5: Being someone individualistic, I pick B. My persona says so.\nI DECIDE TO CHOOSE [B]",
]
PERSONA_STATEMENT = re.compile(r"\b(?:as|being|i am|i'm|am)\s+(?:a|an|someone)\s+(?:\w+\s+)?(?:fair|selfish|"
                               r"cooperative|individualistic|fair-minded)|FAIR-MINDED|INDIVIDUALISTIC|COOPERATIVE|"
                               r"individualistic|fair-minded|persona|作为一个公平|<think>", re.IGNORECASE)


def test_persona_statements_are_cut_from_real_style_outputs_and_the_reasoning_stays():
    for output in REAL_STYLE_OUTPUTS:
        blind = without_persona(output)
        assert not PERSONA_STATEMENT.search(blind), (output, blind)
        if "I DECIDE TO CHOOSE [B]" in output:
            assert "I DECIDE TO CHOOSE [B]" in blind
    assert without_persona(REAL_STYLE_OUTPUTS[0]).splitlines()[2] == \
        "STEP 3: The ideal strategy pair for this round is A/A."  # the clause goes, the sentence stays
    assert "STEP 5: […] I cannot risk getting only 10." in without_persona(REAL_STYLE_OUTPUTS[1])
    assert "My only motivation is to maximize my own payoff" in without_persona(REAL_STYLE_OUTPUTS[2])
    assert "I do not fully trust my associate" in without_persona(REAL_STYLE_OUTPUTS[3])
    assert "我认为A/A是最公平的策略。" in without_persona(REAL_STYLE_OUTPUTS[4])
    assert "<咱们都选A吧，各拿70，双赢！>" in without_persona(REAL_STYLE_OUTPUTS[4])
    assert "0.5" in without_persona(REAL_STYLE_OUTPUTS[3])  # decimals are not sentence ends


def test_the_breach_template_of_a_simulated_run_shows_no_persona(tmp_path):
    from agents.simulate import run_simulation
    from agents.simulate.config import SimulationConfig
    from analysis import annotation

    config = SimulationConfig(name="blind", output_dir=tmp_path, group_size=2, rounds=2, repeats=1, language="en",
                              models=[{"provider": "simulated", "label": "sim", "simulated_seed": 3}])
    run_simulation(config, show_progress=False, log=lambda s: None)
    conversations = pd.read_csv(config.run_dir / "decisions.csv")["conversation_id"].unique()
    pd.DataFrame([{"conversation_id": c, "annotator": a, "p1_preferred": "A", "p2_preferred": "A",
                   "p1_wants_other": "A", "p2_wants_other": "A", "agreement": "True"}
                  for c in conversations for a in ("ann-1", "ann-2")]).to_csv(tmp_path / "labels.csv", index=False)
    write_report(load_exports([config.run_dir, tmp_path / "labels.csv"]), tmp_path / "report")
    template = pd.read_csv(tmp_path / "report" / annotation.BREACH_TEMPLATE_NAME, dtype=str, keep_default_na=False)
    raw = pd.read_csv(config.run_dir / "llm_calls.csv", dtype=str, keep_default_na=False)["raw_reply"]
    assert raw.str.contains(r"As a (?:selfish|fair|cooperative) person").any()  # what the model wrote
    assert len(template) > 0 and template["agent_output"].str.contains("I DECIDE TO CHOOSE [B]", regex=False).all()
    assert template["agent_output"].str.contains("STEP 1: If I choose B", regex=False).all()
    for output in template["agent_output"]:
        assert not PERSONA_STATEMENT.search(output), output


# --- Empty tables ---------------------------------------------------------------------------------------
def test_every_empty_table_is_written_with_its_header(tmp_path):
    """One treatment, one simulated persona, no annotations: the pairwise tables have no rows."""
    exports = tmp_path / "exports"
    parameters = synthetic.SyntheticParameters(participants_per_session=4, rounds=3, label_settings=("informed",),
                                               treatments=("H-H",), game_orders=("WC-WoC",))
    synthetic.write(synthetic.generate(parameters, seed=1, annotations=False), exports)
    simulated = {"session_code": "sim-1", "treatment": "A-A", "associate_type": "fair", "label_setting": "informed",
                 "game_order": "WC-WoC", "source": "simulation", "game": "WC", "game_index": 1, "round": 1,
                 "player_kind": "agent", "associate_kind": "agent", "persona": "fair", "model": "sim",
                 "choice": "A", "associate_choice": "A", "conversation_id": "sim-1-c1"}
    pd.DataFrame([{**simulated, "player_code": "fair-a0", "associate_code": "fair-b0"},
                  {**simulated, "player_code": "fair-b0", "associate_code": "fair-a0"}]).to_csv(
        exports / "simulation_decisions.csv", index=False)
    out = tmp_path / "report"
    assert cli_main([str(exports), "--out", str(out)]) == 0
    empty = []
    for path in sorted(out.rglob("*.csv")):
        assert path.read_text(encoding="utf-8").strip(), f"{path.name} is a bare newline"
        table = pd.read_csv(path)  # pandas refuses a bare newline (EmptyDataError)
        assert len(table.columns) > 0, path.name
        if table.empty:
            empty.append(path.name)
    for name, column in (("cooperation_informed_participants_pairwise_WC.csv", "W"),
                         ("seven_c_informed_seven_c_pairwise.csv", "dimension"),
                         ("norms_perceptions_informed_norm_pairwise.csv", "cohens_d"),
                         ("simulation_pairwise_WC.csv", "model")):
        assert name in empty and column in pd.read_csv(out / "tables" / name).columns, name
