"""The statistics of analysis.stats: R's conventions on cases worked by hand, and agreement with
the scipy / statsmodels calls they wrap."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa

from analysis import models, stats


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


# --- Degenerate and rank-deficient inputs: the values R gives (R 4.2.2, run for these tests) -------
def test_mann_whitney_with_every_value_equal_has_no_p_value_like_r():
    # R: wilcox.test(c(1, 1, 1), c(1, 1, 1)) -> W = 4.5, p-value = NaN
    result = stats.mann_whitney([1, 1, 1], [1, 1, 1])
    assert result.statistic == 4.5 and math.isnan(result.p_value)
    # R: wilcox.test(c(0.5, 0.5), c(0.5, 0.5, 0.5)) -> W = 3, p-value = NaN
    result = stats.mann_whitney([0.5, 0.5], [0.5, 0.5, 0.5])
    assert result.statistic == 3 and math.isnan(result.p_value)
    # Two constant groups that differ are a real result.
    # R: wilcox.test(c(1, 1, 1), c(2, 2, 2)) -> W = 0, p-value = 0.0468541776038738
    result = stats.mann_whitney([1, 1, 1], [2, 2, 2])
    assert result.statistic == 0 and result.p_value == pytest.approx(0.0468541776038738, rel=1e-9)


def test_mann_whitney_z_is_rs_normal_approximation():
    # R: r <- wilcox.test(c(0.1, 0.3, 0.3, 0.5, 0.9, 0.2), c(0.3, 0.4, 0.8, 0.8, 1.0), exact = FALSE)
    #    r$statistic -> 7; r$p.value -> 0.166010564370933; qnorm(r$p.value / 2) -> -1.38513705140062
    result = stats.mann_whitney([0.1, 0.3, 0.3, 0.5, 0.9, 0.2], [0.3, 0.4, 0.8, 0.8, 1.0])
    assert result.statistic == 7
    assert result.p_value == pytest.approx(0.166010564370933, rel=1e-9)
    assert result.z == pytest.approx(-1.38513705140062, rel=1e-9)
    # Without ties R's p is exact (0.4) but the z of the approximation is still defined:
    # R: qnorm(wilcox.test(c(3, 5, 7), c(1, 2, 6), exact = FALSE)$p.value / 2, lower.tail = FALSE)
    #    -> 0.87287156094397
    assert stats.mann_whitney([3, 5, 7], [1, 2, 6]).z == pytest.approx(0.87287156094397, rel=1e-9)
    assert math.isnan(stats.mann_whitney([1, 1], [1, 1, 1]).z)


def test_signed_rank_with_every_value_zero_has_no_p_value_like_r():
    # R: wilcox.test(c(0, 0, 0), mu = 0) -> V = 0, p-value = NaN
    result = stats.signed_rank([0, 0, 0])
    assert result.statistic == 0 and math.isnan(result.p_value)


def test_spearman_is_rs_cor_test():
    # R: cor.test(c(1, 2, 3, 4, 5, 6, 7, 8), c(2, 1, 4, 3, 7, 8, 6, 5), method = "spearman", exact = FALSE)
    #    -> rho = 0.738095238095238, p-value = 0.0365527610528607
    result = stats.spearman([1, 2, 3, 4, 5, 6, 7, 8], [2, 1, 4, 3, 7, 8, 6, 5])
    assert result.statistic == pytest.approx(0.738095238095238, rel=1e-12)
    assert result.p_value == pytest.approx(0.0365527610528607, rel=1e-9)
    # With ties. R: cor.test(c(1, 2, 2, 4, 5, 6, 6, 8, 3, 1),
    #    c(0.2, 0.1, 0.4, 0.4, 0.7, 0.9, 0.6, 0.5, 0.3, 0.2), method = "spearman", exact = FALSE)
    #    -> rho = 0.821542350505539, p-value = 0.00355591164996831
    result = stats.spearman([1, 2, 2, 4, 5, 6, 6, 8, 3, 1], [0.2, 0.1, 0.4, 0.4, 0.7, 0.9, 0.6, 0.5, 0.3, 0.2])
    assert result.statistic == pytest.approx(0.821542350505539, rel=1e-12)
    assert result.p_value == pytest.approx(0.00355591164996831, rel=1e-9)
    # R: cor.test(c(1, 1, 1, 1), c(1, 2, 3, 4), method = "spearman", exact = FALSE)$estimate -> NA
    result = stats.spearman([1, 1, 1, 1], [1, 2, 3, 4])
    assert math.isnan(result.statistic) and math.isnan(result.p_value)
    # Pairs with a missing value are dropped (R: cor.test drops incomplete pairs).
    assert stats.spearman([1, 2, 3, 4, 5, 6, 7, 8, np.nan], [2, 1, 4, 3, 7, 8, 6, 5, 3]).statistic == \
        pytest.approx(0.738095238095238)


# R: f <- function(r) suppressWarnings(prop.test(sum(r), length(r), correct = FALSE))$conf.int
@pytest.mark.parametrize("rates, low, high", [
    ([0.5, 1], 0.197867455762311, 0.973322657991015),  # t.test(c(0.5, 1)): -2.42655118404367 3.92655118404367
    ([0.2, 0.4, 0.4, 0.9, 0.5], 0.159262368678587, 0.818116929912740),
    ([1, 1, 1], 0.438502968244955, 1.0),
    ([0, 0], 0.0, 0.657619772493347),
    ([0.7], 0.103351869911066, 0.979267855839829),  # one unit: still an interval, inside [0, 1]
])
def test_the_interval_of_a_mean_rate_is_wilson_over_the_units_as_r(rates, low, high):
    assert stats.rate_interval(rates) == pytest.approx((low, high), rel=1e-12, abs=1e-15)
    assert stats.rate_interval(pd.Series(rates + [np.nan])) == pytest.approx((low, high), rel=1e-12, abs=1e-15)


def test_the_interval_of_no_rates_is_not_defined():
    assert all(math.isnan(v) for v in stats.rate_interval([]))


def test_mean_interval_is_rs_t_test():
    # R: t.test(c(0.2, 0.4, 0.4, 0.9, 0.5))$conf.int -> 0.158603242926801 0.801396757073199
    assert stats.mean_interval([0.2, 0.4, 0.4, 0.9, 0.5]) == pytest.approx((0.158603242926801, 0.801396757073199),
                                                                         rel=1e-9)
    assert all(math.isnan(v) for v in stats.mean_interval([0.5]))


def test_tukey_p_values_agree_with_r_where_ptukey_is_accurate_and_print_with_a_floor():
    # R: v <- c(0.1, 0.4, 0.35, 0.2, 0.5, 0.3, 0.6, 0.45, 0.2, 0.25, 0.3, 0.5)
    #    g <- factor(rep(c("a", "b", "c"), each = 4)); TukeyHSD(aov(v ~ g))$g
    #    b-a diff 0.2, lwr -0.0596089833893924, upr 0.459608983389392, p adj 0.134131196612106
    #    c-a 0.05 … p adj 0.855087914902701; c-b -0.15 … p adj 0.289375131301170
    values = pd.Series([0.1, 0.4, 0.35, 0.2, 0.5, 0.3, 0.6, 0.45, 0.2, 0.25, 0.3, 0.5])
    groups = pd.Series(list("aaaabbbbcccc"))
    table = stats.tukey_hsd(values, groups)
    np.testing.assert_allclose(table["difference"], [0.2, 0.05, -0.15], atol=1e-12)
    np.testing.assert_allclose(table["lower_bound"][0], -0.0596089833893924, rtol=1e-6)
    np.testing.assert_allclose(table["p_value"], [0.134131196612106, 0.855087914902701, 0.289375131301170],
                               rtol=1e-5)
    # Far in the tail R's ptukey and the studentized range of scipy/statsmodels drift apart:
    # R: same with v <- c(0.1, 0.2, 0.15, 0.12, 0.4, 0.5, 0.45, 0.42, 0.5, 0.55, 0.52, 0.51)
    #    -> b-a p adj 3.51031181333727e-06 (0.05 % apart); with +0.6 instead of +0.3 R gives
    #    6.73382027915892e-09, statsmodels 8.5e-09. Hence the report prints Tukey p below 1e-6 as
    #    "< 1e-6", and any other p below 1e-15 (statsmodels' "0" and "1.11e-16") as "< 1e-15".
    shifted = pd.Series([0.1, 0.2, 0.15, 0.12, 0.4, 0.5, 0.45, 0.42, 0.5, 0.55, 0.52, 0.51])
    assert stats.tukey_hsd(shifted, groups)["p_value"][0] == pytest.approx(3.51031181333727e-06, rel=1e-3)
    far = stats.tukey_hsd(pd.Series([0.0] * 4 + [1.0] * 4 + [0.5, 0.5, 0.5, 0.5001]), groups)
    assert [stats.format_p(p, stats.TUKEY_P_FLOOR) for p in far["p_value"]] == ["< 1e-6"] * 3
    assert [stats.format_p(p) for p in (0.0, 1.11e-16, 2.2e-16)] == ["< 1e-15"] * 3
    assert stats.format_p(0.0123) == "0.0123" and stats.format_p(math.nan) == "not defined"


# The data of the GLM tests, also given to R.
GLM_SUCCESSES = np.array([3, 7, 5, 9, 2, 6, 8, 4, 10, 1, 6, 7], dtype=float)
GLM_TRIALS = np.full(12, 10.0)
GLM_X1 = np.array([-1.2, 0.3, 0.1, 1.5, -0.8, 0.4, 1.1, -0.2, 1.9, -1.7, 0.2, 0.6])
GLM_X3 = np.array([0.5, -0.1, 0.9, 0.2, -1.1, 0.3, -0.4, 1.2, 0.0, -0.6, 0.8, -0.3])


def test_a_rank_deficient_glm_is_what_r_reports():
    # R: s <- c(3, 7, 5, 9, 2, 6, 8, 4, 10, 1, 6, 7); n <- rep(10, 12)
    #    x1 <- c(-1.2, 0.3, 0.1, 1.5, -0.8, 0.4, 1.1, -0.2, 1.9, -1.7, 0.2, 0.6); x2 <- 2 * x1
    #    x3 <- c(0.5, -0.1, 0.9, 0.2, -1.1, 0.3, -0.4, 1.2, 0.0, -0.6, 0.8, -0.3); x4 <- x1 + x3
    #    m <- glm(cbind(s, n - s) ~ x1 + x2 + x3 + x4, family = binomial)
    #    coef(m) -> 0.0898223791871742 1.3612671192421133 NA 0.0203282517135225 NA
    #    summary(m)$coefficients[, 2] -> 0.229330800610044 0.276341748855144 0.319825121047376
    #    summary(m)$coefficients[, 4] -> 6.95300820077814e-01 8.39180913443508e-07 9.49320166851681e-01
    #    m$rank -> 3; AIC(m) -> 36.8303531792623; deviance 3.21887969410634; null 40.3007059990387
    design = pd.DataFrame({"intercept": 1.0, "x1": GLM_X1, "x2": 2 * GLM_X1, "x3": GLM_X3, "x4": GLM_X1 + GLM_X3})
    fitted = models.binomial_glm(GLM_SUCCESSES, GLM_TRIALS, design)
    table = fitted.coefficients.set_index("term")
    assert fitted.aliased == ("x2", "x4")
    assert table["estimable"].tolist() == [True, True, False, True, False]
    assert table.loc[["x2", "x4"], ["estimate", "standard_error", "z", "p_value"]].isna().all().all()
    np.testing.assert_allclose(table.loc[["intercept", "x1", "x3"], "estimate"],
                               [0.0898223791871742, 1.3612671192421133, 0.0203282517135225], rtol=1e-6)
    np.testing.assert_allclose(table.loc[["intercept", "x1", "x3"], "standard_error"],
                               [0.229330800610044, 0.276341748855144, 0.319825121047376], rtol=1e-6)
    np.testing.assert_allclose(table.loc[["intercept", "x1", "x3"], "p_value"],
                               [6.95300820077814e-01, 8.39180913443508e-07, 9.49320166851681e-01], rtol=1e-5)
    fit = fitted.fit_summary.set_index("measure")["value"]
    assert fit["rank"] == 3 and fit["terms"] == 5
    assert fit["AIC"] == pytest.approx(36.8303531792623, rel=1e-9)
    assert fit["residual deviance"] == pytest.approx(3.21887969410634, rel=1e-7)
    assert fit["null deviance"] == pytest.approx(40.3007059990387, rel=1e-9)
    # AICc counts the rank (3), not the 5 columns.
    assert fit["AICc"] == pytest.approx(36.8303531792623 + 2 * 3 * 4 / (12 - 3 - 1), rel=1e-9)


def test_an_item_everyone_answered_alike_is_not_estimable():
    # R: z <- rep(0, 12); m2 <- glm(cbind(s, n - s) ~ z + x1 + x3, family = binomial)
    #    coef(m2) -> 0.0898223791871742 NA 1.3612671192421133 0.0203282517135225; m2$rank -> 3
    #    AIC(m2) -> 36.8303531792623
    design = pd.DataFrame({"intercept": 1.0, "z": 0.0, "x1": GLM_X1, "x3": GLM_X3})
    fitted = models.binomial_glm(GLM_SUCCESSES, GLM_TRIALS, design)
    assert fitted.aliased == ("z",)
    assert fitted.fit_summary.set_index("measure")["value"]["AIC"] == pytest.approx(36.8303531792623, rel=1e-9)


def test_the_fig_3_band_is_rs_predict_with_se_fit():
    # R: f <- c(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 0.5)
    #    m3 <- glm(cbind(s, n - s) ~ f + I(f^2), family = binomial)
    #    p <- predict(m3, newdata = data.frame(f = c(0, 0.5, 1)), type = "link", se.fit = TRUE)
    #    plogis(p$fit - qnorm(0.975) * p$se.fit) -> 0.229718952081016 0.507865147918823 0.243354311674340
    #    plogis(p$fit + qnorm(0.975) * p$se.fit) -> 0.664621149704198 0.748428860236758 0.680466118127235
    frequency = np.array([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 0.5])
    design = pd.DataFrame({"intercept": 1.0, "linear": frequency, "quadratic": frequency ** 2})
    band = models.breach_curve_band(models.binomial_glm(GLM_SUCCESSES, GLM_TRIALS, design), points=3)
    np.testing.assert_allclose(band["lower"], [0.229718952081016, 0.507865147918823, 0.243354311674340], rtol=1e-6)
    np.testing.assert_allclose(band["upper"], [0.664621149704198, 0.748428860236758, 0.680466118127235], rtol=1e-6)


# --- Degenerate data (everyone cooperates): R's answers, never rounding noise --------------------------
FOUR_TREATMENTS = pd.Series(np.repeat(["H-H", "H-F", "H-C", "H-S"], 3))


@pytest.mark.parametrize("value", [1.0, 0.7, 0.1])
def test_anova_of_equal_values_is_not_defined_as_r_oneway_test(value):
    # R: g <- factor(rep(c("H-H", "H-F", "H-C", "H-S"), each = 3))
    #    oneway.test(rep(1, 12) ~ g, var.equal = TRUE) -> F = NaN, num df = 3, denom df = 8, p-value = NA
    #    (the same for rep(0.7, 12) and rep(0.1, 12)). summary(aov(rep(0.7, 12) ~ g)): Sum Sq 0 0, F NaN;
    #    summary(aov(rep(1, 12) ~ g)) prints F = 1, p = 0.441 from R's own rounding (Sum Sq 5.9e-31).
    table = stats.one_way_anova(pd.Series([value] * 12), FOUR_TREATMENTS).set_index("term")
    assert math.isnan(table.loc["Condition", "F"]) and math.isnan(table.loc["Condition", "p_value"])
    assert table.loc["Condition", "df"] == 3 and table.loc["Residuals", "df"] == 8
    assert table.loc["Condition", "sum_sq"] == 0 and table.loc["Residuals", "sum_sq"] == 0


def test_anova_of_groups_without_inner_variance_is_infinite_as_r_oneway_test():
    # R: g <- factor(rep(c("a", "b", "c"), each = 3)); v <- c(0, 0, 0, 1, 1, 1, 1, 1, 1)
    #    oneway.test(v ~ g, var.equal = TRUE) -> F = Inf, num df = 2, denom df = 6, p-value < 2.2e-16
    #    summary(aov(v ~ g)) -> Sum Sq 2 and 0, Mean Sq 1 and 0 (F 1.3e+31 from rounding)
    table = stats.one_way_anova(pd.Series([0.0] * 3 + [1.0] * 6), pd.Series(list("aaabbbccc"))).set_index("term")
    assert table.loc["Condition", "F"] == math.inf and table.loc["Condition", "p_value"] == 0
    assert table.loc["Condition", "sum_sq"] == pytest.approx(2) and table.loc["Condition", "mean_sq"] == pytest.approx(1)
    assert table.loc["Residuals", "sum_sq"] == 0


def test_tukey_after_an_anova_of_equal_values_is_not_defined_as_r():
    # R: TukeyHSD(aov(rep(0.7, 12) ~ g))$g -> every pair: diff 0, lwr 0, upr 0, p adj NaN
    #    (on rep(0.7, 9) over 3 groups R's own rounding gives diff -2.2e-16, p adj 0.48: noise)
    table = stats.tukey_hsd(pd.Series([0.7] * 12), FOUR_TREATMENTS)
    assert len(table) == 6
    assert (table[["difference", "lower_bound", "upper_bound"]] == 0).all().all()
    assert table["p_value"].isna().all() and not table["reject"].any()
    assert [stats.format_p(p, stats.TUKEY_P_FLOOR) for p in table["p_value"]] == ["not defined"] * 6


def test_tukey_of_groups_without_inner_variance_as_r():
    # R: TukeyHSD(aov(c(0, 0, 0, 1, 1, 1, 1, 1, 1) ~ g))$g
    #    b-a diff 1, lwr 1, upr 1, p adj 6.4e-14 (ptukey's floor: 0); c-a the same;
    #    c-b diff 1.1e-16, p adj 0.876 — R's rounding: the means are both exactly 1, the difference 0
    #    with no variance, so its p is not defined.
    table = stats.tukey_hsd(pd.Series([0.0] * 3 + [1.0] * 6), pd.Series(list("aaabbbccc"))).set_index(
        ["group1", "group2"])
    assert table.loc[("a", "b"), ["difference", "lower_bound", "upper_bound", "p_value"]].tolist() == [1, 1, 1, 0]
    assert table.loc[("a", "c"), "p_value"] == 0 and table.loc[("a", "b"), "reject"]
    assert table.loc[("b", "c"), "difference"] == 0 and math.isnan(table.loc[("b", "c"), "p_value"])
    # Means that numpy rounds apart: 0.1 three times and five times.
    # R: v <- c(rep(0.1, 3), rep(0.1, 5), rep(0.3, 4)); h <- factor(rep(c("a", "b", "c"), c(3, 5, 4)))
    #    oneway.test(v ~ h, var.equal = TRUE) -> F = Inf, p-value < 2.2e-16
    #    TukeyHSD(aov(v ~ h))$h -> c-a and c-b: diff 0.2, lwr 0.2, upr 0.2, p adj 5.4e-10 (ptukey's
    #    floor); b-a: diff 1.4e-17, p adj 0.787 — rounding in R too (statsmodels said 0.054).
    values, groups = pd.Series([0.1] * 8 + [0.3] * 4), pd.Series(["a"] * 3 + ["b"] * 5 + ["c"] * 4)
    assert stats.one_way_anova(values, groups).set_index("term").loc["Condition", "F"] == math.inf
    table = stats.tukey_hsd(values, groups).set_index(["group1", "group2"])
    assert table.loc[("a", "b"), "difference"] == 0 and math.isnan(table.loc[("a", "b"), "p_value"])
    assert table.loc[("a", "c"), "difference"] == pytest.approx(0.2) and table.loc[("b", "c"), "p_value"] == 0


def test_cohens_d_with_no_spread_is_rs_arithmetic():
    # R: x <- c(0.1, 0.1, 0.1); y <- c(0.3, 0.3)
    #    (mean(x) - mean(y)) / sqrt(((3 - 1) * var(x) + (2 - 1) * var(y)) / (3 + 2 - 2)) -> -Inf
    #    x <- c(1, 1, 1); y <- c(1, 1): the same -> NaN
    assert stats.cohens_d([0.1, 0.1, 0.1], [0.3, 0.3]) == -math.inf
    assert stats.cohens_d([0.3, 0.3], [0.1, 0.1, 0.1]) == math.inf
    assert math.isnan(stats.cohens_d([1, 1, 1], [1, 1]))
    # Zero variance in one group only: R's var(c(0.1, 0.1, 0.1)) is 0 exactly.
    # R: x <- c(0.1, 0.1, 0.1); y <- c(0.2, 0.4, 0.3)
    #    (mean(x) - mean(y)) / sqrt(((3 - 1) * var(x) + (3 - 1) * var(y)) / 4) -> -2.82842712474619
    assert stats.cohens_d([0.1, 0.1, 0.1], [0.2, 0.4, 0.3]) == pytest.approx(-2.82842712474619, rel=1e-12)


@pytest.mark.parametrize("values", [[0.7, 0.7, 0.7], [0.1] * 5, [1, 1, 1, 1], [0, 0, 0]])
def test_mean_interval_of_constant_data_is_not_defined_as_r(values):
    # R: t.test(c(0.7, 0.7, 0.7)) -> Error: data are essentially constant (also c(1, 1, 1, 1));
    #    t.test(c(0, 0, 0))$conf.int -> NaN NaN. numpy gave (0.6999999999999995, 0.7000000000000002).
    assert all(math.isnan(v) for v in stats.mean_interval(values))
