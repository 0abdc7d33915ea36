"""The analysis package end to end on synthetic exports made from known parameters:
loading by columns, bad input, the tidy tables, every statistic against the scipy/statsmodels
call on the same numbers, the report and the command line."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import proportion_effectsize

import protocol
from analysis import analyse, from_otree_bot_export, load_exports, synthetic, tidy
from analysis.__main__ import main as cli_main
from analysis.load import PERCEPTION_COLUMNS, SEVEN_C_COLUMNS

@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("exports")
    synthetic.write(synthetic.generate(synthetic.SyntheticParameters(participants_per_session=6), seed=3), folder)
    return folder


@pytest.fixture(scope="module")
def result(export_dir):
    return analyse(load_exports(export_dir))


def section(result, key, label_setting="informed"):
    return next(s for s in result.sections if s.key == key and s.label_setting == label_setting)


def copy_exports(export_dir: Path, target: Path, skip: tuple[str, ...] = ()) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for path in export_dir.glob("*.csv"):
        if not path.name.startswith(skip):
            shutil.copy(path, target / path.name)
    return target


# --- Loading -----------------------------------------------------------------------------------------
def test_every_table_is_recognised_by_its_columns_whatever_the_file_name(export_dir, tmp_path):
    for index, path in enumerate(sorted(export_dir.glob("*.csv"))):
        shutil.copy(path, tmp_path / f"export_{index}.csv")  # names as oTree might choose them
    exports = load_exports(tmp_path)
    assert set(exports.files["table"]) == {"decisions", "messages", "participants", "llm_calls", "annotations",
                                           "motives"}
    assert [p for p in exports.problems if p.level == "error"] == []
    original = load_exports(export_dir)
    for name in ("decisions", "participants", "annotations"):
        assert len(getattr(exports, name)) == len(getattr(original, name))


def test_types_follow_the_contract(result):
    decisions = result.exports.decisions
    assert decisions["round"].dtype.kind in "iuf"
    assert decisions["timed_out"].dtype == "boolean"
    assert set(decisions["choice"]) == {"A", "B"}
    assert result.exports.annotations["agreement"].dtype == "boolean"


def test_a_missing_column_names_the_file_and_the_column_and_the_rest_is_still_analysed(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    broken = folder / "decisions_uninformed.csv"
    pd.read_csv(broken).drop(columns=["associate_choice"]).to_csv(broken, index=False)
    exports = load_exports(folder)
    problem = next(p for p in exports.problems if p.column == "associate_choice")
    assert problem.level == "error" and "decisions_uninformed.csv" in str(problem)
    assert "associate_choice" in str(problem)
    analysis = analyse(exports)
    assert set(analysis.decisions["label_setting"]) == {"informed"}
    assert not section(analysis, "cooperation").tables["participants_pairwise_WC"].empty
    # The uninformed participants still have their questionnaires analysed.
    assert not section(analysis, "seven_c", "uninformed").tables["seven_c_pairwise"].empty


def test_a_missing_questionnaire_column_is_a_warning_and_only_that_item_is_missing(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    path = folder / "participants_informed.csv"
    pd.read_csv(path).drop(columns=["c7_clarity"]).to_csv(path, index=False)
    exports = load_exports(folder)
    problem = next(p for p in exports.problems if "c7_clarity" in p.column)
    assert problem.level == "warning" and "participants_informed.csv" in problem.file
    table = section(analyse(exports), "seven_c").tables["seven_c_pairwise"]
    assert "clarity" not in set(table["dimension"]) and "conciseness" in set(table["dimension"])


def test_a_session_from_another_app_is_named(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    frame = pd.read_csv(folder / "decisions_informed.csv")
    frame["treatment"] = "PGG"
    frame.to_csv(folder / "decisions_other_app.csv", index=False)
    pd.DataFrame({"id_in_group": [1], "contribution": [5]}).to_csv(folder / "public_goods.csv", index=False)
    exports = load_exports(folder)
    messages = [str(p) for p in exports.problems]
    assert any("decisions_other_app.csv" in m and "`treatment`" in m and "another app" in m for m in messages)
    assert any("public_goods.csv" in m and "not a table of DATA.md" in m for m in messages)
    assert len(exports.decisions) == len(load_exports(export_dir).decisions)


def test_empty_and_unreadable_files_do_not_stop_the_report(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    (folder / "empty.csv").write_text("")
    exports = load_exports([folder, tmp_path / "does-not-exist"])
    messages = [str(p) for p in exports.problems]
    assert any("empty.csv" in m and "empty file" in m for m in messages)
    assert any("does-not-exist" in m for m in messages)
    assert not exports.decisions.empty


def test_the_same_session_exported_twice_counts_once(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    shutil.copy(folder / "decisions_informed.csv", folder / "decisions_informed_again.csv")
    exports = load_exports(folder)
    assert len(exports.decisions) == len(load_exports(export_dir).decisions)
    assert any("duplicate rows" in str(p) for p in exports.problems)


def test_bot_export_folder_with_otree_standard_files(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "bots")
    pd.DataFrame({"participant.code": ["abc"], "session.code": ["s1"]}).to_csv(folder / "all_apps_wide.csv",
                                                                             index=False)
    pd.DataFrame({"session_code": ["s1"], "participant_code": ["abc"], "attempt": [1], "passed": [True],
                  "answers": ["{}"], "submitted_at": [1.0]}).to_csv(folder / "instructions_custom.csv", index=False)
    exports = from_otree_bot_export(folder)
    # oTree's own exports are known: listed among the files read, not as problems.
    assert not any("all_apps_wide.csv" in p.file or "instructions_custom.csv" in p.file for p in exports.problems)
    assert {"all_apps_wide.csv", "instructions_custom.csv"} <= {Path(f).name for f in exports.files["file"]}
    assert not exports.decisions.empty
    empty = from_otree_bot_export(tmp_path / "nothing-here")
    assert any(p.column == "choice" for p in empty.problems)


# --- Tidy tables --------------------------------------------------------------------------------------
def test_treatment_and_label_setting_on_every_row(result):
    for name, table in result.tidy_tables().items():
        assert not table.empty, name
        for column in ("treatment", "label_setting"):
            assert table[column].isin([*protocol.TREATMENT_CODES.values()]).all() if column == "treatment" else \
                table[column].isin(protocol.LABEL_SETTINGS).all(), (name, column)


def test_participant_cooperation_rates_recount_the_raw_decisions(export_dir, result):
    raw = pd.concat([pd.read_csv(p) for p in export_dir.glob("decisions_*.csv")])
    raw = raw[(raw["player_kind"] == "human")]
    for game in protocol.GAMES:
        expected = raw[raw["game"] == game].groupby("player_code")["choice"].apply(lambda c: (c == "A").mean())
        computed = result.participants.set_index("participant_code")[f"cooperation_rate_{game}"]
        pd.testing.assert_series_equal(computed.sort_index(), expected.sort_index(), check_names=False)
    assert (result.participants["rounds_WC"] == protocol.ROUNDS_PER_GAME).all()


def test_agents_table_has_one_row_per_agent_with_persona_and_calls(result):
    agents = result.agents
    assert set(agents["persona"]) == {"fair", "cooperative", "selfish"}
    assert (agents["persona"].map(synthetic.AGENT_TREATMENTS.get) is not None)
    assert (agents["model_calls"] == 3 * protocol.ROUNDS_PER_GAME + protocol.ROUNDS_PER_GAME).all()
    assert not agents.duplicated(["session_code", "agent_id"]).any()


def test_conversations_player_1_is_the_human_and_the_smaller_code_in_hh(result):
    conversations = result.conversations
    assert (conversations["p1_kind"] == "human").all()
    hh = conversations[conversations["treatment"] == "H-H"]
    assert (hh["p1_code"] < hh["p2_code"]).all()
    wc_decisions = result.decisions[result.decisions["game"] == "WC"]
    assert len(conversations) == wc_decisions["conversation_id"].nunique()
    messages = result.exports.messages
    row = conversations.iloc[0]
    sent = messages[(messages["conversation_id"] == row["conversation_id"]) & (messages["sender_code"] == row["p1_code"])
                    & (messages["stage"] == 1)].iloc[0]
    assert row["p1_message_1"] == (sent["text"] if sent["sent_in_time"] else "")


def _tiny_exports(tmp_path: Path, annotations: list[dict]) -> Path:
    """Two agent conversations and one H-H conversation, worked by hand."""
    keys = {"source": "lab", "label_setting": "informed", "game_order": "WC-WoC", "game": "WC", "game_index": 1,
            "timed_out": False, "payoff": 0, "associate_payoff": 0, "decided_at": 0.0}
    rows = []

    def pair(session, treatment, kind, round_number, first, second, first_choice, second_choice):
        associate_type = {"H-H": "human", "H-F": "fair"}[treatment]
        conversation = f"{session}-WC-r{round_number}-1"
        for (code, code_kind, choice), (other, other_kind, other_choice) in (
                ((first, "human", first_choice), (second, kind, second_choice)),
                ((second, kind, second_choice), (first, "human", first_choice))):
            rows.append({**keys, "session_code": session, "treatment": treatment, "associate_type": associate_type,
                         "round": round_number, "player_code": code, "player_kind": code_kind,
                         "persona": associate_type if code_kind == "agent" else "", "associate_code": other,
                         "associate_kind": other_kind, "conversation_id": conversation, "choice": choice,
                         "associate_choice": other_choice})

    pair("s1", "H-F", "agent", 1, "hum1", "agent-1", "A", "B")  # agreed; the agent breaks it
    pair("s1", "H-F", "agent", 2, "hum1", "agent-2", "B", "A")  # agreed; the human breaks it
    pair("s1", "H-F", "agent", 3, "hum1", "agent-3", "B", "B")  # no agreement: no breach
    pair("s2", "H-H", "human", 1, "zed", "amy", "B", "A")  # agreed; amy (player 1) keeps, zed breaks
    pd.DataFrame(rows).to_csv(tmp_path / "decisions.csv", index=False)
    pd.DataFrame(annotations).to_csv(tmp_path / "annotations.csv", index=False)
    return tmp_path


def _labels(conversation, annotator, agreement):
    return {"conversation_id": conversation, "annotator": annotator, "p1_preferred": "A", "p2_preferred": "A",
            "p1_wants_other": "A", "p2_wants_other": "A", "agreement": agreement}


def test_promise_breach_worked_by_hand(tmp_path):
    annotations = [_labels(c, a, agreed) for c, agreed in (("s1-WC-r1-1", True), ("s1-WC-r2-1", True),
                                                           ("s1-WC-r3-1", False), ("s2-WC-r1-1", True))
                   for a in ("ann-1", "ann-2")]
    analysis = analyse(load_exports(_tiny_exports(tmp_path, annotations)))
    conversations = analysis.conversations.set_index("conversation_id")
    assert conversations.loc["s2-WC-r1-1", "p1_code"] == "amy"
    assert list(conversations["p1_breached"].astype(object)) == [False, True, pd.NA, False]
    assert list(conversations["p2_breached"].astype(object)) == [True, False, pd.NA, True]
    person = analysis.participants.set_index("participant_code").loc["hum1"]
    # Two agreement rounds with an agent; the agent broke one of them.
    assert (person["agreement_rounds"], person["associate_breaches"]) == (2, 1)
    assert person["agent_breach_frequency"] == pytest.approx(0.5)
    assert person["own_breach_rate"] == pytest.approx(0.5)
    rates = section(analysis, "agreements").tables["rates"].set_index(["dimension", "treatment"])
    assert rates.loc[("agreements", "H-F"), ["count", "of"]].tolist() == [2, 3]
    assert rates.loc[("human_breaches", "H-H"), ["count", "of"]].tolist() == [1, 2]  # both humans count
    assert rates.loc[("agent_breaches", "H-F"), ["count", "of"]].tolist() == [1, 2]


# --- Statistics against scipy / statsmodels on the same numbers ---------------------------------------
def test_figure_1_tests_are_scipys_on_the_participants_rates(result):
    people = result.participants[result.participants["label_setting"] == "informed"]
    table = section(result, "cooperation").tables["participants_pairwise_WC"].set_index("comparison")
    # The paper's order (Fig. 1's caption: "H-C vs. H-H"): W and d belong to the group named first.
    assert list(table.index) == ["H-F vs. H-H", "H-C vs. H-H", "H-S vs. H-H", "H-F vs. H-C", "H-F vs. H-S",
                                 "H-C vs. H-S"]
    assert (table["W"] + table["W_reversed"] == table["n1"] * table["n2"]).all()
    assert (table["W_of"] == [c.split(" vs. ")[0] for c in table.index]).all()
    for comparison, row in table.iterrows():
        first, second = comparison.split(" vs. ")
        x = people.loc[people["treatment"] == first, "cooperation_rate_WC"]
        y = people.loc[people["treatment"] == second, "cooperation_rate_WC"]
        expected = scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")  # ties
        assert row["W"] == expected.statistic
        assert row["p_value"] == pytest.approx(expected.pvalue)
        pooled = np.sqrt(((len(x) - 1) * x.var() + (len(y) - 1) * y.var()) / (len(x) + len(y) - 2))
        assert row["cohens_d"] == pytest.approx((x.mean() - y.mean()) / pooled)
    anova = section(result, "cooperation").tables["anova_WC"].set_index("term")
    groups = [people.loc[people["treatment"] == t, "cooperation_rate_WC"] for t in ("H-H", "H-F", "H-C", "H-S")]
    assert anova.loc["Condition", "F"] == pytest.approx(scipy_stats.f_oneway(*groups).statistic)


def test_agents_cooperation_compared_by_persona(result):
    table = section(result, "cooperation").tables["agents_pairwise_WC"]
    assert list(table["comparison"]) == ["fair vs. cooperative", "fair vs. selfish", "cooperative vs. selfish"]
    agents = result.agents[result.agents["label_setting"] == "informed"]
    x = agents.loc[agents["persona"] == "fair", "cooperation_rate_WC"]
    y = agents.loc[agents["persona"] == "selfish", "cooperation_rate_WC"]
    assert table.iloc[1]["W"] == scipy_stats.mannwhitneyu(x, y).statistic


def test_table_s2_is_chi2_contingency_with_yates_on_the_counts(result):
    agreements = section(result, "agreements")
    sides = result.sides[(result.sides["label_setting"] == "informed") & (result.sides["agreement"] == True)]  # noqa: E712
    humans = sides[sides["kind"] == "human"]
    pairwise = agreements.tables["pairwise"].set_index(["dimension", "comparison"])
    x1, n1 = humans.loc[humans["treatment"] == "H-F", "breached"].sum(), (humans["treatment"] == "H-F").sum()
    x2, n2 = humans.loc[humans["treatment"] == "H-S", "breached"].sum(), (humans["treatment"] == "H-S").sum()
    expected = scipy_stats.chi2_contingency([[x1, n1 - x1], [x2, n2 - x2]], correction=True)
    row = pairwise.loc[("human_breaches", "H-F vs. H-S")]
    assert row["chi2"] == pytest.approx(expected.statistic)
    assert row["p_value"] == pytest.approx(expected.pvalue)
    assert row["cohens_h"] == pytest.approx(proportion_effectsize(x1 / n1, x2 / n2))
    assert row["percentage1"] == pytest.approx(100 * x1 / n1)
    conversations = result.conversations[(result.conversations["label_setting"] == "informed")
                                         & result.conversations["agreement"].notna()]
    agreement_rate = conversations.groupby("treatment")["agreement"].mean()
    rates = agreements.tables["rates"].set_index(["dimension", "treatment"])
    assert rates.loc[("agreements", "H-F"), "percentage"] == pytest.approx(100 * agreement_rate["H-F"])
    assert set(pairwise.loc["agent_breaches"].index) == {"H-F vs. H-C", "H-F vs. H-S", "H-C vs. H-S"}


def test_figure_3_glm_equals_the_statsmodels_formula_fit(result):
    glm = section(result, "breach_glm")
    people = result.participants[(result.participants["label_setting"] == "informed")
                                 & result.participants["treatment"].isin(["H-F", "H-C", "H-S"])]
    people = people.dropna(subset=["agent_breach_frequency"]).rename(columns={"agent_breach_frequency": "f"})
    expected = smf.glm("cooperation_rate_WC ~ f + I(f**2) + I(f**3)", data=people, family=sm.families.Binomial(),
                       var_weights=people["rounds_WC"]).fit()
    coefficients = glm.tables["coefficients"]
    assert list(coefficients["term"]) == ["intercept", "linear", "quadratic", "cubic"]
    np.testing.assert_allclose(coefficients["estimate"], expected.params.to_numpy(), rtol=1e-6)
    np.testing.assert_allclose(coefficients["standard_error"], expected.bse.to_numpy(), rtol=1e-6)
    np.testing.assert_allclose(coefficients["p_value"], expected.pvalues.to_numpy(), rtol=1e-5)
    curve = glm.tables["curve"]
    assert curve["fitted_cooperation_rate"].iloc[0] == pytest.approx(1 / (1 + np.exp(-expected.params.iloc[0])))
    # Fig. S19 (uninformed) adds the fourth power, as in the paper; the degree is a parameter.
    uninformed = section(result, "breach_glm", "uninformed").tables["coefficients"]
    assert list(uninformed["term"])[-1] == "biquadratic"
    cubic_everywhere = analyse(result.exports, glm_degree=2)
    assert list(section(cubic_everywhere, "breach_glm", "uninformed").tables["coefficients"]["term"])[-1] == "quadratic"


def test_table_s13_glm_equals_the_statsmodels_formula_fit(result):
    people = result.participants[(result.participants["label_setting"] == "informed")
                                 & result.participants["treatment"].isin(["H-F", "H-C", "H-S"])]
    predictors = [*SEVEN_C_COLUMNS, *PERCEPTION_COLUMNS, "norm_estimate_WC"]
    data = people.dropna(subset=predictors).copy()
    for column in predictors:
        data[column] = (data[column] - data[column].mean()) / data[column].std(ddof=0)
    formula = "cooperation_rate_WC ~ " + " + ".join(predictors) + " + C(treatment, Treatment('H-F'))"
    expected = smf.glm(formula, data=data, family=sm.families.Binomial(), var_weights=data["rounds_WC"]).fit()
    glm = section(result, "perception_glm")
    table = glm.tables["humans_vs_agents_coefficients"]
    assert list(table["term"])[-2:] == ["treatment H-C", "treatment H-S"]  # H-F is the baseline
    # statsmodels' formula puts the treatment terms right after the intercept.
    order = [0, *range(3, 3 + len(predictors)), 1, 2]
    np.testing.assert_allclose(table["estimate"], expected.params.to_numpy()[order], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(table["z"], expected.tvalues.to_numpy()[order], rtol=1e-5, atol=1e-8)
    fit = glm.tables["humans_vs_agents_fit"].set_index("measure")["value"]
    # AIC as R's glm(cbind(successes, failures) ~ …) reports it: the binomial coefficients count.
    successes = data["cooperations_WC"].to_numpy()
    counts = sm.GLM(np.column_stack([successes, data["rounds_WC"].to_numpy() - successes]), expected.model.exog,
                    family=sm.families.Binomial()).fit()
    np.testing.assert_allclose(counts.params, expected.params, rtol=1e-6)
    k, n = len(table), len(data)
    assert fit["AICc"] == pytest.approx(counts.aic + 2 * k * (k + 1) / (n - k - 1))
    assert fit["null deviance"] == pytest.approx(expected.null_deviance)
    # 12 H-H participants cannot carry 16 parameters: said, not fitted.
    assert any("humans_vs_humans" in note and "too few" in note for note in glm.notes)


def test_perception_and_seven_c_tables_are_scipys_on_the_ratings(result):
    people = result.participants[result.participants["label_setting"] == "informed"]
    table = section(result, "norms_perceptions").tables["perception_pairwise"]
    # Fig. 4's caption compares "fair agents" with humans: H-F first.
    row = table[(table["comparison"] == "H-F vs. H-H") & (table["dimension"] == "trustworthiness")].iloc[0]
    x = people.loc[people["treatment"] == "H-F", "perception_trustworthiness"]
    y = people.loc[people["treatment"] == "H-H", "perception_trustworthiness"]
    assert row["W"] == scipy_stats.mannwhitneyu(x, y).statistic
    assert (row["median1"], row["mean2"]) == (x.median(), pytest.approx(y.mean()))
    seven_c = section(result, "seven_c").tables["seven_c_pairwise"]
    assert set(seven_c["dimension"]) == set(protocol.SEVEN_C_ITEMS)
    norms = section(result, "norms_perceptions").tables["norm_pairwise"]
    x = people.loc[people["treatment"] == "H-F", "norm_estimate_WC"]
    y = people.loc[people["treatment"] == "H-C", "norm_estimate_WC"]
    assert norms.set_index("comparison").loc["H-F vs. H-C", "W"] == scipy_stats.mannwhitneyu(x, y).statistic


def test_motive_tests_are_the_signed_rank_v_of_the_ratings(result):
    table = section(result, "motives").tables["motive_tests"]
    row = table[(table["persona"] == "selfish") & (table["motive"] == "unconditional_defection")].iloc[0]
    motives = result.exports.motives.merge(result.conversations[["conversation_id", "label_setting", "p2_persona"]])
    ratings = motives.loc[(motives["label_setting"] == "informed") & (motives["p2_persona"] == "selfish"),
                          "unconditional_defection"]
    nonzero = ratings[ratings != 0].to_numpy()
    assert row["V"] == scipy_stats.rankdata(np.abs(nonzero))[nonzero > 0].sum()
    expected = scipy_stats.wilcoxon(ratings, correction=True, method="asymptotic")
    assert row["p_value"] == pytest.approx(expected.pvalue)


def test_norms_by_cooperation_groups_merge_the_top_intervals(result):
    table = section(result, "norms_cooperation").tables["cooperation_by_norm"]
    assert set(table["norm_group"]) <= {"0–20 %", "20–40 %", "40–60 %", "60–100 %"}
    believed = section(result, "believed_human", "uninformed").tables["believed_human_tests"]
    assert set(believed["treatment"]) == {"H-H", "H-F", "H-C", "H-S"}


def test_known_parameters_are_recovered():
    parameters = synthetic.SyntheticParameters(participants_per_session=24, participant_spread=0.0,
                                               annotator_error_rate=0.0, label_settings=("informed",))
    exports_tables = synthetic.generate(parameters, seed=11)
    from analysis.annotation import resolve
    from analysis.load import _convert_types
    decisions = tidy.decisions_table(type("E", (), {"decisions": _convert_types("decisions", exports_tables["decisions"])})())
    labels = resolve(_convert_types("annotations", exports_tables["annotations"]))
    conversations = tidy.conversations_table(decisions, exports_tables["messages"].assign(
        sent_in_time=exports_tables["messages"]["sent_in_time"].astype("boolean")), labels)
    sides = tidy.sides_table(conversations)
    for treatment, rate in parameters.agreement_rate["informed"].items():
        observed = conversations.loc[conversations["treatment"] == treatment, "agreement"].mean()
        assert observed == pytest.approx(rate, abs=0.07), treatment
    agreed = sides[sides["agreement"] == True]  # noqa: E712
    for persona, rate in parameters.agent_breach_rate["informed"].items():
        treatment = {v: k for k, v in synthetic.AGENT_TREATMENTS.items()}[persona]
        observed = agreed.loc[(agreed["treatment"] == treatment) & (agreed["kind"] == "agent"), "breached"].mean()
        assert observed == pytest.approx(rate, abs=0.07), persona
    for treatment, rate in parameters.human_breach_rate["informed"].items():
        observed = agreed.loc[(agreed["treatment"] == treatment) & (agreed["kind"] == "human"), "breached"].mean()
        assert observed == pytest.approx(rate, abs=0.08), treatment


def test_an_empty_treatment_is_named_and_the_others_are_compared(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    for path in folder.glob("*_informed.csv"):
        frame = pd.read_csv(path)
        frame[frame["treatment"] != "H-C"].to_csv(path, index=False)
    analysis = analyse(load_exports(folder))
    cooperation = section(analysis, "cooperation")
    assert any("H-C" in note for note in cooperation.notes)
    assert list(cooperation.tables["participants_pairwise_WC"]["comparison"]) == [
        "H-F vs. H-H", "H-S vs. H-H", "H-F vs. H-S"]
    assert not any("could not be computed" in note for s in analysis.sections for note in s.notes)


# --- Report and command line ---------------------------------------------------------------------
def test_command_line_writes_tables_figures_and_the_html_report(tmp_path, capsys):
    exports = tmp_path / "exports"
    parameters = synthetic.SyntheticParameters(participants_per_session=6, label_settings=("informed",))
    synthetic.write(synthetic.generate(parameters, seed=5), exports)
    out = tmp_path / "report"
    assert cli_main([str(exports), "--out", str(out)]) == 0
    assert "report.html" in capsys.readouterr().out
    html = (out / "report.html").read_text(encoding="utf-8")
    for figure in ("fig1_cooperation", "fig2_agreements_breaches", "fig3_breach_glm", "fig4_norms_perceptions",
                   "figS1_seven_c", "figS2_norms_cooperation", "figS3_motives"):
        for suffix in ("png", "svg"):
            assert (out / "figures" / f"{figure}_informed.{suffix}").stat().st_size > 1000, figure
        assert f"figures/{figure}_informed.png" in html
    for reference in ("Fig. 1, Tables S1 and S12", "Fig. 2, Table S2", "Fig. 3", "Table S13", "Fig. S3"):
        assert reference in html
    assert "game with communication (WC)" in html and "R&#x27;s W" in html
    assert "could not" not in html
    for name in ("decisions", "conversations", "participants", "agents"):
        assert (out / "tables" / f"tidy_{name}.csv").exists()
    s2 = pd.read_csv(out / "tables" / "agreements_informed_pairwise.csv")
    assert {"dimension", "comparison", "percentage1", "percentage2", "chi2", "p_value", "cohens_h"} <= set(s2.columns)
    template = pd.read_csv(out / "annotation_template.csv")
    assert len(template) == pd.read_csv(out / "tables" / "tidy_conversations.csv").shape[0]


def test_player_1_is_the_human_even_when_only_the_agents_row_was_exported(tmp_path):
    annotations = [_labels("s1-WC-r1-1", a, True) for a in ("ann-1", "ann-2")]
    folder = _tiny_exports(tmp_path, annotations)
    decisions = pd.read_csv(folder / "decisions.csv")
    decisions[~((decisions["player_kind"] == "human") & (decisions["round"] == 1) & (decisions["session_code"] == "s1"))
              ].to_csv(folder / "decisions.csv", index=False)
    conversation = analyse(load_exports(folder)).conversations.set_index("conversation_id").loc["s1-WC-r1-1"]
    assert (conversation["p1_code"], conversation["p1_kind"], conversation["p1_choice"]) == ("hum1", "human", "A")
    assert (conversation["p2_code"], conversation["p2_choice"], conversation["p2_breached"]) == ("agent-1", "B", True)


def test_simulation_runs_get_their_own_section_by_persona(tmp_path):
    keys = {"session_code": "sim-1", "treatment": "A-A", "associate_type": "fair", "label_setting": "informed",
            "game_order": "WC-WoC", "source": "simulation", "game": "WC", "game_index": 1, "timed_out": False,
            "payoff": 0, "associate_payoff": 0, "decided_at": 0.0, "player_kind": "agent", "associate_kind": "agent"}
    rows, annotations = [], []
    for round_number in (1, 2, 3):
        for pair, (fair, selfish, selfish_choice) in enumerate((("fair-a0", "selfish-b0", "B"),
                                                                ("fair-a1", "selfish-b1", "A")), start=1):
            conversation = f"sim-1-WC-r{round_number}-{pair}"
            rows.append({**keys, "round": round_number, "player_code": fair, "persona": "fair",
                         "associate_code": selfish, "conversation_id": conversation, "choice": "A",
                         "associate_choice": selfish_choice})
            rows.append({**keys, "round": round_number, "player_code": selfish, "persona": "selfish",
                         "associate_code": fair, "conversation_id": conversation, "choice": selfish_choice,
                         "associate_choice": "A"})
            annotations += [_labels(conversation, a, True) for a in ("ann-1", "ann-2")]
    pd.DataFrame(rows).to_csv(tmp_path / "decisions.csv", index=False)
    pd.DataFrame(annotations).to_csv(tmp_path / "annotations.csv", index=False)
    analysis = analyse(load_exports(tmp_path))
    assert [s.key for s in analysis.sections] == ["overview", "annotation", "simulation"]  # no human sections
    simulation = analysis.sections[-1]
    rates = simulation.tables["cooperation_rates"].set_index("persona")
    assert rates.loc["fair", "mean"] == 1.0 and rates.loc["selfish", "mean"] == pytest.approx(0.5)
    breaches = simulation.tables["agreements_breaches"].set_index("persona")
    assert breaches.loc["fair", "breach_percentage"] == 0 and breaches.loc["selfish", "breach_percentage"] == 50
    assert (breaches["agreement_percentage"] == 100).all()
    assert (analysis.conversations["p1_code"].str.startswith("fair")).all()


# --- Input problems are reported, not absorbed --------------------------------------------------------
def test_a_cut_off_last_row_is_named_and_not_read_as_partial_answers(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    participants = folder / "participants_informed.csv"
    text = participants.read_text(encoding="utf-8")
    rows = len(pd.read_csv(participants))
    last_row_start = text.rstrip("\n").rfind("\n") + 1
    participants.write_text(text[: last_row_start + 40], encoding="utf-8")  # a download cut mid-row
    decisions = folder / "decisions_informed.csv"
    lines = decisions.read_text(encoding="utf-8").splitlines()
    decisions.write_text("\n".join(lines[:-1] + [lines[-1][: len(lines[-1]) // 3]]), encoding="utf-8")
    exports = load_exports(folder)
    cut = [p for p in exports.problems if "fewer fields than the header" in p.message]
    assert {Path(p.file).name for p in cut} == {"participants_informed.csv", "decisions_informed.csv"}
    assert all(p.level == "error" and "cut off" in p.message for p in cut)
    assert f"line {len(lines)}" in next(p for p in cut if "decisions" in p.file).message
    assert not any("outside DATA.md ('')" in p.message for p in exports.problems)
    informed = exports.participants[exports.participants["label_setting"] == "informed"]
    assert len(informed) == rows - 1


def test_a_treatment_conflict_between_files_is_reported(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    participants = pd.read_csv(folder / "participants_informed.csv", dtype=str, keep_default_na=False)
    session = participants["session_code"].iloc[0]
    was = participants.loc[participants["session_code"] == session, "treatment"].iloc[0]
    other = "H-S" if was != "H-S" else "H-C"
    participants.loc[participants["session_code"] == session, "treatment"] = other
    participants.to_csv(folder / "participants_informed.csv", index=False)
    exports = load_exports(folder)
    conflict = next(p for p in exports.problems if p.column == "treatment" and session in p.message)
    assert "participants_informed.csv" in conflict.file and conflict.level == "error"
    assert f"'{other}' in the participants but '{was}' in the decisions" in conflict.message


def test_the_command_line_fails_clearly_without_input(tmp_path, capsys):
    assert cli_main([str(tmp_path / "does-not-exist"), "--out", str(tmp_path / "r1")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli_main([str(tmp_path / "empty"), "--out", str(tmp_path / "r2")]) == 2
    assert "no CSV files" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "other" / "x.csv", index=False)
    assert cli_main([str(tmp_path / "other"), "--out", str(tmp_path / "r3")]) == 1
    assert "nothing to analyse" in capsys.readouterr().err


def test_otrees_own_exports_of_16_sessions_add_no_problem_lines(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    for session in range(16):
        pd.DataFrame({"participant.code": ["p"], "session.code": [f"s{session}"]}).to_csv(
            folder / f"all_apps_wide_{session}.csv", index=False)
        pd.DataFrame({"session_code": [f"s{session}"], "participant_code": ["p"], "attempt": [1], "passed": [1],
                      "answers": ["{}"], "submitted_at": [0]}).to_csv(folder / f"instructions_{session}.csv",
                                                                     index=False)
    assert load_exports(folder).problems == load_exports(export_dir).problems


# --- The paper's analyses that were missing -----------------------------------------------------------
def test_spearman_of_perceived_intelligence_and_agents_promise_breaking(result):
    table = section(result, "perception_glm").tables["spearman_intelligence_breaking"]
    people = result.participants[(result.participants["label_setting"] == "informed")
                                 & result.participants["treatment"].isin(["H-F", "H-C", "H-S"])]
    pairs = people[["perception_intelligence", "agent_breach_frequency"]].dropna()
    expected = scipy_stats.spearmanr(pairs["perception_intelligence"], pairs["agent_breach_frequency"])
    assert table.loc[0, "participants"] == len(pairs)
    assert table.loc[0, "rho"] == pytest.approx(expected.statistic)
    assert table.loc[0, "p_value"] == pytest.approx(expected.pvalue)


def test_table_s4_sample_description_per_treatment(result):
    table = section(result, "overview", "").tables["sample_by_treatment"]
    people = result.exports.participants
    row = table[(table["label_setting"] == "informed") & (table["treatment"] == "H-F")].iloc[0]
    group = people[(people["label_setting"] == "informed") & (people["treatment"] == "H-F")]
    assert row["participants"] == len(group)
    assert row["mean_age"] == pytest.approx(group["age"].mean())
    assert row["sd_age"] == pytest.approx(group["age"].std(ddof=1))  # R's sd
    assert row["percent_women"] == pytest.approx(100 * (group["gender"] == "female").mean())
    assert list(table["treatment"][table["label_setting"] == "informed"]) == ["H-H", "H-F", "H-C", "H-S"]
    sessions = section(result, "overview", "").tables["sessions"].set_index("session_code")
    one = people[people["session_code"] == people["session_code"].iloc[0]]
    assert sessions.loc[one["session_code"].iloc[0], "mean_age"] == pytest.approx(one["age"].mean())
    assert sessions.loc[one["session_code"].iloc[0], "sd_age"] == pytest.approx(one["age"].std(ddof=1))
    assert sessions.loc[one["session_code"].iloc[0], "percent_women"] == pytest.approx(
        100 * (one["gender"] == "female").mean())


def test_norm_group_comparisons_print_z_and_the_paper_order(result):
    table = section(result, "norms_cooperation").tables["pairwise"]
    assert {"W", "W_of", "W_reversed", "z", "p_value"} <= set(table.columns)
    assert table["comparison"].str.startswith("H-H vs.").any()  # "H-H vs. H-F: z = 2.07" (Fig. S2)
    assert not table["comparison"].str.endswith("vs. H-H").any()
    asymptotic = table[table["n1"] + table["n2"] > 0]
    # |z| is the normal quantile of the (tie-corrected, continuity-corrected) p when p is asymptotic.
    row = asymptotic.iloc[0]
    assert abs(row["z"]) == pytest.approx(scipy_stats.norm.isf(row["p_value"] / 2), rel=1e-6)


def test_rank_deficient_perception_model_reports_not_estimable_terms(export_dir, tmp_path):
    folder = copy_exports(export_dir, tmp_path / "in")
    participants = pd.read_csv(folder / "participants_informed.csv", dtype=str, keep_default_na=False)
    participants["c7_clarity"] = "2"  # everyone answered alike
    participants["c7_coherence"] = participants["c7_conciseness"]  # two items aliased
    participants.to_csv(folder / "participants_informed.csv", index=False)
    glm = section(analyse(load_exports(folder)), "perception_glm")
    table = glm.tables["humans_vs_agents_coefficients"].set_index("term")
    assert not table.loc["c7_clarity", "estimable"] and not table.loc["c7_coherence", "estimable"]
    assert table.loc[["c7_clarity", "c7_coherence"], "estimate"].isna().all()
    assert table.loc["c7_conciseness", "estimable"]
    fit = glm.tables["humans_vs_agents_fit"].set_index("measure")["value"]
    assert fit["rank"] == len(table) - 2
    assert any("rank-deficient" in note and "c7_clarity, c7_coherence" in note for note in glm.notes)


# --- Figures -----------------------------------------------------------------------------------------
def test_figures_show_intervals_n_and_missing_as_missing(export_dir, tmp_path):
    import matplotlib.pyplot as plt

    folder = copy_exports(export_dir, tmp_path / "in")
    participants = pd.read_csv(folder / "participants_informed.csv", dtype=str, keep_default_na=False)
    # No H-C participant estimates 60-100 %: Fig. S2's H-C bar in that group must be missing, not 0.
    high = (participants["treatment"] == "H-C") & (pd.to_numeric(participants["norm_estimate_WC"]) >= 3)
    participants.loc[high, "norm_estimate_WC"] = "1"
    participants.to_csv(folder / "participants_informed.csv", index=False)
    analysis = analyse(load_exports(folder))
    figure = section(analysis, "norms_cooperation").figures["figS2_norms_cooperation"]()
    axis = figure.axes[0]
    bars = [p for p in axis.patches if p.get_height() > 0 or p.get_width() > 0]
    table = section(analysis, "norms_cooperation").tables["cooperation_by_norm"]
    assert len(bars) == len(table)  # one bar per group with data; none for the empty H-C group
    assert any(t.get_text() == "no data" for t in axis.texts)
    assert {"ci_low", "ci_high"} <= set(table.columns)
    plt.close(figure)
    agreements = section(analysis, "agreements")
    figure = agreements.figures["fig2_agreements_breaches"]()
    left, right = figure.axes
    assert [t.get_text() for t in left.texts if t.get_text().startswith("n=")]  # n per group
    assert any(t.get_text() == "no agents" for t in right.texts)  # H-H's agent breach bar is not drawn
    assert len(right.patches) == 4 + 3  # humans in 4 treatments, agents in 3 (legend patches aside)
    assert any(t.get_text() == "A" for t in left.texts) and any(t.get_text() == "B" for t in right.texts)
    plt.close(figure)
    fig3 = section(analysis, "breach_glm")
    assert {"lower", "upper"} <= set(fig3.tables["curve"].columns)
    figure = fig3.figures["fig3_breach_glm"]()
    assert figure.axes[0].collections  # the band and the scatter
    hc = [c for c in figure.axes[0].collections if c.get_label().startswith("H-C")]
    hf = [c for c in figure.axes[0].collections if c.get_label().startswith("H-F")]
    if hc and hf:  # H-C's points at f = 0 are offset from H-F's
        assert hc[0].get_offsets()[:, 0].min() != hf[0].get_offsets()[:, 0].min()
    plt.close(figure)


def test_vector_figures_beside_png_and_fig_s25(tmp_path):
    exports = tmp_path / "exports"
    parameters = synthetic.SyntheticParameters(participants_per_session=6, label_settings=("uninformed",),
                                               treatments=("H-H", "H-F"))
    synthetic.write(synthetic.generate(parameters, seed=5), exports)
    out = tmp_path / "report"
    assert cli_main([str(exports), "--out", str(out)]) == 0
    for suffix in ("png", "svg", "pdf"):
        assert (out / "figures" / f"figS25_believed_human_uninformed.{suffix}").stat().st_size > 1000
        assert (out / "figures" / f"fig1_cooperation_uninformed.{suffix}").stat().st_size > 1000
    assert (out / "figures" / "fig1_cooperation_uninformed.pdf").read_bytes().startswith(b"%PDF")


def test_a_degenerate_comparison_is_not_defined_in_tables_and_report(export_dir, tmp_path):
    from analysis.report import write_report

    folder = copy_exports(export_dir, tmp_path / "in")
    participants = pd.read_csv(folder / "participants_informed.csv", dtype=str, keep_default_na=False)
    participants["perception_agency"] = "1"  # everyone answered alike
    participants.to_csv(folder / "participants_informed.csv", index=False)
    analysis = write_report(load_exports(folder), tmp_path / "report")
    table = section(analysis, "norms_perceptions").tables["perception_pairwise"]
    row = table[(table["dimension"] == "agency") & (table["comparison"] == "H-F vs. H-H")].iloc[0]
    # R: wilcox.test(rep(1, n1), rep(1, n2)) -> W = n1 * n2 / 2, p-value = NaN
    assert row["W"] == row["n1"] * row["n2"] / 2
    assert np.isnan(row["p_value"]) and np.isnan(row["cohens_d"])
    assert "not defined" in (tmp_path / "report" / "report.html").read_text(encoding="utf-8")


def test_a_mean_rate_of_two_agents_has_an_interval_inside_0_1_and_the_figure_says_n(tmp_path):
    """Two fair agents at 0.5 and 1 (and two participants): the t interval would run from −2.43
    to 3.93 (R: t.test(c(0.5, 1))); a rate's interval is Wilson over the agents, and Fig. 1
    writes n = 2 beside it."""
    import matplotlib.pyplot as plt

    keys = {"session_code": "s1", "treatment": "H-F", "associate_type": "fair", "label_setting": "informed",
            "game_order": "WC-WoC", "source": "lab", "game": "WC", "game_index": 1, "timed_out": False,
            "payoff": 0, "associate_payoff": 0, "decided_at": 0.0}
    rows = []
    for round_number, choices in ((1, {"agent-1": "A", "agent-2": "A"}), (2, {"agent-1": "B", "agent-2": "A"})):
        for pair, (agent, human) in enumerate((("agent-1", "hum1"), ("agent-2", "hum2"))):
            conversation = f"s1-WC-r{round_number}-{pair}"
            for code, kind, choice, other, other_kind, other_choice in (
                    (agent, "agent", choices[agent], human, "human", "A"),
                    (human, "human", "A", agent, "agent", choices[agent])):
                rows.append({**keys, "round": round_number, "player_code": code, "player_kind": kind,
                             "persona": "fair" if kind == "agent" else "", "associate_code": other,
                             "associate_kind": other_kind, "conversation_id": conversation, "choice": choice,
                             "associate_choice": other_choice})
    simulated = [{**row, "session_code": "sim-1", "treatment": "A-A", "source": "simulation",
                  "conversation_id": "sim-" + row["conversation_id"], "player_kind": "agent",
                  "associate_kind": "agent"} for row in rows if row["player_kind"] == "agent"]
    pd.DataFrame(rows + simulated).to_csv(tmp_path / "decisions.csv", index=False)
    analysis = analyse(load_exports(tmp_path))
    # R: prop.test(1.5, 2, correct = FALSE)$conf.int -> 0.197867455762311 0.973322657991015
    r_interval = (0.197867455762311, 0.973322657991015)
    rates = section(analysis, "cooperation").tables["cooperation_rates"]
    agents = rates[(rates["who"] == "agents") & (rates["game"] == "WC")].iloc[0]
    assert (agents["n"], agents["mean"]) == (2, 0.75)
    assert (agents["ci_low"], agents["ci_high"]) == pytest.approx(r_interval, rel=1e-12)
    humans = rates[(rates["who"] == "participants") & (rates["game"] == "WC")].iloc[0]
    # R: prop.test(2, 2, correct = FALSE)$conf.int -> 0.342380227506653 1
    assert (humans["ci_low"], humans["ci_high"]) == pytest.approx((0.342380227506653, 1.0), rel=1e-12)
    simulation = next(s for s in analysis.sections if s.key == "simulation").tables["cooperation_rates"]
    fair = simulation[simulation["game"] == "WC"].iloc[0]
    assert (fair["ci_low"], fair["ci_high"]) == pytest.approx(r_interval, rel=1e-12)
    figure = section(analysis, "cooperation").figures["fig1_cooperation"]()
    for axis in figure.axes:  # participants (A) and agents (B): n = 2 beside the mean, in red
        few = [t for t in axis.texts if t.get_text() == "n = 2"]
        assert len(few) == 1 and few[0].get_color() == "#b00000"
        bars = [line for line in axis.lines if len(line.get_ydata()) == 2]  # the interval's vertical line
        assert all(0 <= y <= 1 for line in bars for y in line.get_ydata())
    plt.close(figure)
