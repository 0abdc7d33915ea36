"""The statistics of analysis.stats: R's conventions on cases worked by hand, and agreement with
the scipy / statsmodels calls they wrap."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa

from analysis import stats


# --- Mann–Whitney U, reported as R's W ---------------------------------------------------------
def test_w_is_the_u_of_the_first_sample_worked_by_hand():
    # Pairs (x, y) with x > y: 3>1, 3>2, 5>1, 5>2, 7>1, 7>2, 7>6 -> W = 7.
    # Exact null distribution for m = n = 3 (20 orderings): P(W >= 7) = 4/20, two-sided p = 0.4.
    # R: wilcox.test(c(3, 5, 7), c(1, 2, 6)) -> W = 7, p-value = 0.4
    result = stats.mann_whitney([3, 5, 7], [1, 2, 6])
    assert result.statistic == 7
    assert result.p_value == pytest.approx(0.4)
    assert stats.mann_whitney([1, 2, 6], [3, 5, 7]).statistic == 9 - 7  # W of the other sample: m·n − W


def test_mann_whitney_with_ties_is_scipy_normal_approximation_with_continuity_correction():
    x, y = [0.1, 0.3, 0.3, 0.5, 0.9, 0.2], [0.3, 0.4, 0.8, 0.8, 1.0]
    expected = scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True)
    result = stats.mann_whitney(x, y)
    assert result.statistic == expected.statistic
    assert result.p_value == pytest.approx(expected.pvalue)
    assert "asymptotic" in result.method


def test_mann_whitney_large_samples_use_the_normal_approximation_like_r():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=60), rng.normal(0.5, size=55)
    expected = scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")
    assert stats.mann_whitney(x, y).p_value == pytest.approx(expected.pvalue)


def test_mann_whitney_ignores_missing_values_and_rejects_empty_samples():
    assert stats.mann_whitney([3, 5, 7, np.nan], [1, 2, 6]).statistic == 7
    with pytest.raises(ValueError):
        stats.mann_whitney([], [1, 2])


# --- prop.test ---------------------------------------------------------------------------------
def test_prop_test_chi_squared_with_yates_correction_worked_by_hand():
    # 15/50 vs 25/50: pooled 0.4, expected [[20, 30], [20, 30]], |O − E| = 5 in every cell.
    # χ² = Σ (5 − 0.5)² / E = 20.25 · (1/20 + 1/30 + 1/20 + 1/30) = 3.375.
    # R: prop.test(c(15, 25), c(50, 50)) -> X-squared = 3.375, p-value = 0.06619
    result = stats.prop_test((15, 25), (50, 50))
    assert result.statistic == pytest.approx(3.375)
    assert result.p_value == pytest.approx(scipy_stats.chi2.sf(3.375, 1))
    assert result.p_value == pytest.approx(0.06619, abs=1e-5)


def test_prop_test_caps_the_correction_at_the_difference_like_r():
    # 5/10 vs 6/11: E11 = 10·11/21 = 5.238, |O − E| = 0.238 < 0.5. R caps the correction at
    # |O − E| (YATES <- min(0.5, abs(DELTA)/sum(1/n))), so χ² = 0 and p = 1; an uncapped
    # correction would give (0.5 − 0.238)² · Σ 1/E > 0.
    result = stats.prop_test((5, 6), (10, 11))
    assert result.statistic == pytest.approx(0.0, abs=1e-12)
    assert result.p_value == pytest.approx(1.0)


def test_prop_test_matches_chi2_contingency_and_not_the_uncorrected_statsmodels_test():
    from statsmodels.stats.proportion import proportions_chisquare

    table = np.array([[97, 23], [214, 26]])
    expected = scipy_stats.chi2_contingency(table, correction=True)
    result = stats.prop_test((97, 214), (120, 240))
    assert result.statistic == pytest.approx(expected.statistic)
    assert result.p_value == pytest.approx(expected.pvalue)
    uncorrected = proportions_chisquare(np.array([97, 214]), np.array([120, 240]))[0]
    assert result.statistic < uncorrected


def test_prop_test_of_two_zero_proportions_is_undefined_as_in_r():
    result = stats.prop_test((0, 0), (10, 12))
    assert math.isnan(result.statistic) and math.isnan(result.p_value)


# --- Wilcoxon signed-rank, reported as R's V ------------------------------------------------------
def test_v_is_the_sum_of_positive_ranks_worked_by_hand():
    # |x| = 1.5, 0.5, 2.5, 3.5, 1 -> ranks 3, 1, 4, 5, 2; positive: 3 + 4 + 5 = 12.
    # Exact: subsets of {1..5} with sum ≥ 12 are the complements of those with sum ≤ 3
    # ({}, {1}, {2}, {3}, {1,2}): P = 5/32, two-sided p = 10/32 = 0.3125.
    # R: wilcox.test(c(1.5, -0.5, 2.5, 3.5, -1)) -> V = 12, p-value = 0.3125
    result = stats.signed_rank([1.5, -0.5, 2.5, 3.5, -1])
    assert result.statistic == 12
    assert result.p_value == pytest.approx(0.3125)
    shifted = stats.signed_rank([2.5, 0.5, 3.5, 4.5, 0], mu=1)  # the same differences against mu = 1
    assert (shifted.statistic, shifted.p_value) == (result.statistic, pytest.approx(result.p_value))


def test_v_is_not_scipys_two_sided_statistic():
    # scipy's two-sided statistic is min(V+, V−) = 3 here; R reports V = V+ = 12.
    x = [1.5, -0.5, 2.5, 3.5, -1]
    assert scipy_stats.wilcoxon(x).statistic == 3
    assert stats.signed_rank(x).statistic == 12


def test_signed_rank_with_ties_and_zeros_is_the_corrected_normal_approximation():
    ratings = [2, 1, 0, -1, 2, 3, 1, 0, 2, -2, 1, 1]
    expected = scipy_stats.wilcoxon(ratings, zero_method="wilcox", correction=True, method="asymptotic")
    result = stats.signed_rank(ratings)
    assert result.p_value == pytest.approx(expected.pvalue)
    nonzero = np.array([r for r in ratings if r != 0])
    ranks = scipy_stats.rankdata(np.abs(nonzero))
    assert result.statistic == ranks[nonzero > 0].sum()


# --- Effect sizes ----------------------------------------------------------------------------------
def test_cohens_d_worked_by_hand():
    # Means 2 and 3, both standard deviations 1 -> d = (2 − 3) / 1 = −1.
    assert stats.cohens_d([1, 2, 3], [2, 3, 4]) == pytest.approx(-1.0)
    # Pooled variance ((3 − 1)·1 + (2 − 1)·0.5) / 3 = 2.5 / 3.
    assert stats.cohens_d([1, 2, 3], [5, 6]) == pytest.approx((2 - 5.5) / math.sqrt(2.5 / 3))


def test_cohens_h_is_the_arcsine_difference():
    assert stats.cohens_h(1.0, 0.0) == pytest.approx(math.pi)
    assert stats.cohens_h(0.3, 0.5) == pytest.approx(2 * math.asin(math.sqrt(0.3)) - 2 * math.asin(math.sqrt(0.5)))


# --- ANOVA and Tukey -----------------------------------------------------------------------------
def test_one_way_anova_matches_scipy_f_oneway():
    rng = np.random.default_rng(2)
    groups = {g: rng.normal(mean, 1, 15) for g, mean in (("H-H", 0.5), ("H-F", 0.45), ("H-C", 0.3))}
    values = pd.Series(np.concatenate(list(groups.values())))
    labels = pd.Series(np.repeat(list(groups), 15))
    table = stats.one_way_anova(values, labels)
    expected = scipy_stats.f_oneway(*groups.values())
    condition = table.set_index("term").loc["Condition"]
    assert condition["F"] == pytest.approx(expected.statistic)
    assert condition["p_value"] == pytest.approx(expected.pvalue)
    assert condition["df"] == 2 and table.set_index("term").loc["Residuals", "df"] == 42


def test_tukey_hsd_matches_scipy_tukey_hsd():
    samples = {"a": [1, 2, 3], "b": [4, 5, 6], "c": [7, 8, 9.5]}
    table = stats.tukey_hsd(pd.Series(sum(samples.values(), [])), pd.Series(np.repeat(list(samples), 3)))
    expected = scipy_stats.tukey_hsd(*samples.values())
    for _, row in table.iterrows():
        i, j = "abc".index(row["group1"]), "abc".index(row["group2"])
        assert row["p_value"] == pytest.approx(expected.pvalue[i, j], abs=1e-3)
        assert row["difference"] == pytest.approx(np.mean(samples[row["group2"]]) - np.mean(samples[row["group1"]]))


# --- Cohen's kappa ---------------------------------------------------------------------------------
def test_cohens_kappa_worked_by_hand():
    # Agreement on 8 of 10 items; both raters say A 8 times: p_e = 0.8² + 0.2² = 0.68,
    # κ = (0.8 − 0.68) / (1 − 0.68) = 0.375.
    assert stats.cohens_kappa(list("AAAABAAAAB"), list("AAABAAAAAB")) == pytest.approx(0.375)


def test_cohens_kappa_counts_unclear_as_a_category_like_statsmodels():
    first, second = ["A", "B", "", "A", "B", ""], ["A", "B", "", "B", "B", "A"]
    codes = {"": 0, "A": 1, "B": 2}
    table = np.zeros((3, 3))
    for a, b in zip(first, second):
        table[codes[a], codes[b]] += 1
    assert stats.cohens_kappa(first, second) == pytest.approx(statsmodels_kappa(table, return_results=False))


def test_cohens_kappa_of_one_category_only_is_undefined():
    assert math.isnan(stats.cohens_kappa(["A", "A"], ["A", "A"]))
