"""The paper's statistics, reported with R's conventions, computed by scipy and statsmodels.

The paper's numbers come from R. Each function here calls scipy or statsmodels and returns
the statistic under the name and definition R prints, so that a table built here reads like
the paper's tables:

- ``mann_whitney``: R's ``wilcox.test(x, y)`` — W is the U statistic of the first sample;
  exact p when both samples are smaller than 50 and there are no ties, otherwise the normal
  approximation with continuity correction (R's defaults).
- ``prop_test``: R's ``prop.test(c(x1, x2), c(n1, n2))`` — Pearson's χ² on the 2×2 table with
  Yates' continuity correction, the correction capped at |O − E| as R caps it.
- ``signed_rank``: R's ``wilcox.test(x, mu = mu)`` — V is the sum of the ranks of the positive
  differences; zeros are dropped; exact p when fewer than 50 non-zero differences without
  ties or zeros, otherwise the normal approximation with continuity correction.
- ``cohens_d`` (pooled standard deviation) and ``cohens_h`` (statsmodels'
  ``proportion_effectsize``), both signed as group 1 minus group 2.
- ``one_way_anova`` (statsmodels' ``anova_lm``) and ``tukey_hsd`` (``pairwise_tukeyhsd``); on
  groups without inner variance R's exact answers (``oneway.test``), not rounding noise.
- Degenerate samples give what R gives (NaN, Inf), never a number made of rounding noise.
- ``cohens_kappa`` (statsmodels' ``inter_rater``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_cohens_kappa
from statsmodels.stats.inter_rater import to_table
from statsmodels.stats.multicomp import pairwise_tukeyhsd
from statsmodels.stats.proportion import proportion_effectsize

from intervals import wilson_interval

# R switches from exact to normal-approximation p-values at this sample size.
R_EXACT_LIMIT = 50


@dataclass(frozen=True)
class TestResult:
    statistic: float
    p_value: float  # NaN where R's p-value is NaN/NA (a degenerate sample)
    method: str
    z: float = math.nan  # the normal approximation's z, where the test has one


def _clean(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce"), dtype=float)
    return array[~np.isnan(array)]


def _has_ties(values: np.ndarray) -> bool:
    return len(np.unique(values)) < len(values)


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> TestResult:
    """Two-tailed Mann–Whitney U test; ``statistic`` is R's W (U of ``x``)."""
    x, y = _clean(x), _clean(y)
    if len(x) == 0 or len(y) == 0:
        raise ValueError("Mann–Whitney U needs at least one value in each sample")
    if len(np.unique(np.concatenate([x, y]))) == 1:
        # Every value equal: the ranks carry no information. R: W = n1·n2/2, p-value NaN.
        return TestResult(len(x) * len(y) / 2, math.nan, "Mann–Whitney U: all values equal, p not defined")
    exact = len(x) < R_EXACT_LIMIT and len(y) < R_EXACT_LIMIT and not _has_ties(np.concatenate([x, y]))
    method = "exact" if exact else "asymptotic"
    result = scipy_stats.mannwhitneyu(x, y, alternative="two-sided", use_continuity=True, method=method)
    return TestResult(float(result.statistic), float(result.pvalue), f"Mann–Whitney U, {method}",
                      _rank_sum_z(x, y))


def _rank_sum_z(x: np.ndarray, y: np.ndarray) -> float:
    """The standardised W of the normal approximation (with R's continuity correction): the z
    the paper prints in Figs. S2/S24 beside p."""
    m, n = len(x), len(y)
    ranks = scipy_stats.rankdata(np.concatenate([x, y]))
    w = ranks[:m].sum() - m * (m + 1) / 2
    _, tie_counts = np.unique(ranks, return_counts=True)
    variance = m * n / 12 * ((m + n + 1) - (tie_counts ** 3 - tie_counts).sum() / ((m + n) * (m + n - 1)))
    if variance <= 0:
        return math.nan
    difference = w - m * n / 2
    return float((difference - 0.5 * np.sign(difference)) / math.sqrt(variance))


def prop_test(successes: tuple[int, int], trials: tuple[int, int]) -> TestResult:
    """Two-sample test of equal proportions as R's prop.test: χ² with Yates' correction."""
    (x1, x2), (n1, n2) = successes, trials
    if n1 <= 0 or n2 <= 0:
        raise ValueError("the proportions test needs at least one trial in each sample")
    table = np.array([[x1, n1 - x1], [x2, n2 - x2]], dtype=float)
    if table[:, 0].sum() == 0 or table[:, 1].sum() == 0:
        # Both proportions 0 (or both 1): R returns χ² = NaN; nothing to test.
        return TestResult(math.nan, math.nan, "prop.test: both proportions equal 0 or 1")
    chi2, p_value, _, _ = scipy_stats.chi2_contingency(table, correction=True)
    return TestResult(float(chi2), float(p_value), "prop.test χ², Yates-corrected")


def signed_rank(x: Sequence[float], mu: float = 0.0) -> TestResult:
    """One-sample two-tailed Wilcoxon signed-rank test against ``mu``; statistic = R's V."""
    differences = _clean(x) - mu
    nonzero = differences[differences != 0]
    if len(nonzero) == 0:
        # R: wilcox.test(c(0, 0, 0), mu = 0) -> V = 0, p-value NaN.
        return TestResult(0.0, math.nan, "Wilcoxon signed-rank: every value equals mu, p not defined")
    has_zeros = len(nonzero) < len(differences)
    exact = len(nonzero) < R_EXACT_LIMIT and not _has_ties(np.abs(nonzero)) and not has_zeros
    method = "exact" if exact else "asymptotic"
    options = dict(zero_method="wilcox", correction=not exact, method=method)
    # scipy's two-sided statistic is min(V+, V-); the one-sided "greater" statistic is V+.
    positive_rank_sum = scipy_stats.wilcoxon(differences, alternative="greater", **options).statistic
    p_value = scipy_stats.wilcoxon(differences, alternative="two-sided", **options).pvalue
    return TestResult(float(positive_rank_sum), float(p_value), f"Wilcoxon signed-rank, {method}")


def _variance(values: np.ndarray) -> float:
    """The sample variance (ddof 1), exactly 0 for a constant sample: numpy's mean of equal
    values can round (0.1 + 0.1 + 0.1), leaving a variance of ~1e-33 that R does not have."""
    if len(values) < 2 or np.ptp(values) == 0:
        return 0.0
    return float(np.var(values, ddof=1))


def _exact_mean(values: np.ndarray) -> float:
    """The mean, exactly the value for a constant sample (R's mean refines its sum; numpy's doesn't)."""
    return float(values[0]) if np.ptp(values) == 0 else float(np.mean(values))


def cohens_d(x: Sequence[float], y: Sequence[float]) -> float:
    """(mean x − mean y) / pooled standard deviation (ddof 1 in each group). As R's arithmetic
    gives it when neither group varies: ±Inf when the means differ, NaN when they are equal."""
    x, y = _clean(x), _clean(y)
    if len(x) + len(y) <= 2 or len(x) == 0 or len(y) == 0:
        return math.nan
    pooled_variance = ((len(x) - 1) * _variance(x) + (len(y) - 1) * _variance(y)) / (len(x) + len(y) - 2)
    difference = _exact_mean(x) - _exact_mean(y)
    if pooled_variance == 0:
        return math.nan if difference == 0 else math.copysign(math.inf, difference)
    return float(difference / math.sqrt(pooled_variance))


def spearman(x: Sequence[float], y: Sequence[float]) -> TestResult:
    """R's ``cor.test(x, y, method = "spearman", exact = FALSE)``: rho and the p-value of the t
    approximation; pairs with a missing value are dropped. A constant variable leaves rho NaN."""
    data = pd.DataFrame({"x": pd.to_numeric(pd.Series(list(x)), errors="coerce"),
                         "y": pd.to_numeric(pd.Series(list(y)), errors="coerce")}).dropna()
    if len(data) < 3 or data["x"].nunique() < 2 or data["y"].nunique() < 2:
        return TestResult(math.nan, math.nan, "Spearman: fewer than 3 pairs or a constant variable")
    rho, p_value = scipy_stats.spearmanr(data["x"], data["y"])
    return TestResult(float(rho), float(p_value), f"Spearman, t approximation, n = {len(data)}")


def rate_interval(rates: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The interval of the mean of units' rates (participants' or agents' cooperation rates):
    the Wilson score interval over the units, R's ``prop.test(sum(rates), length(rates),
    correct = FALSE)$conf.int``. Inside [0, 1] at any n, where the t interval of two agents at
    0.5 and 1 runs from −2.43 to 3.93. Its variance is p(1 − p), the largest that rates with
    mean p can have (every unit at 0 or 1): conservative when the units' rates lie closer
    together, exact for units of one decision each. NaN without rates."""
    data = _clean(rates)
    if len(data) == 0:
        return (math.nan, math.nan)
    return wilson_interval(float(np.sum(data)), len(data), confidence)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """R's ``t.test(x)$conf.int``: mean ± t·SE; NaN for fewer than 2 values and, as R refuses
    them ("data are essentially constant"; t.test(c(0, 0, 0)) gives NaN), for constant data."""
    data = _clean(values)
    if len(data) < 2 or np.ptp(data) == 0:
        return (math.nan, math.nan)
    mean, error = float(np.mean(data)), float(np.std(data, ddof=1) / math.sqrt(len(data)))
    if error < 10 * np.finfo(float).eps * abs(mean):  # R's test in t.test.default
        return (math.nan, math.nan)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, len(data) - 1)) * error
    return (mean - half, mean + half)


P_FLOOR = 1e-15  # below this a double's p-value is rounding noise (0, 1.11e-16, 2.2e-16)
# Tukey's adjusted p comes from the studentized range distribution; R's ptukey and scipy's /
# statsmodels' agree to 0.1 % at 1e-6 and drift apart below (3 % at 1e-7, 25 % at 1e-9).
TUKEY_P_FLOOR = 1e-6


def format_p(p: float, floor: float = P_FLOOR) -> str:
    """p for tables: 3 significant digits; below ``floor`` '< 1e-15' (one spelling for every
    table); NaN (R's NA/NaN: a degenerate sample) as 'not defined'."""
    if p is None or pd.isna(p):
        return "not defined"
    if p < floor:
        return f"< {floor:.0e}".replace("e-0", "e-")
    return f"{p:.3g}"


def cohens_h(p1: float, p2: float) -> float:
    """2·asin(√p1) − 2·asin(√p2)."""
    return float(proportion_effectsize(p1, p2))


def _grouped(values: pd.Series, groups: pd.Series) -> pd.DataFrame:
    return pd.DataFrame({"value": pd.to_numeric(values, errors="coerce").to_numpy(),
                         "group": groups.astype(str).to_numpy()}).dropna()


def _every_group_constant(data: pd.DataFrame) -> bool:
    """No variance within any group: the residual sum of squares is exactly 0 (computed, it is
    rounding noise such as 2e-31, which gave F = 1.8, p = 0.196 for everyone cooperating)."""
    return bool((data.groupby("group")["value"].agg(np.ptp) == 0).all())


def one_way_anova(values: pd.Series, groups: pd.Series) -> pd.DataFrame:
    """Table S1's layout: term, d.f., sum of squares, mean squares, F, p.

    Without variance within the groups F is R's ``oneway.test(v ~ g, var.equal = TRUE)``:
    NaN and p NA when every value is equal, Inf and p 0 when the groups differ."""
    data = _grouped(values, groups)
    if data["group"].nunique() < 2:
        raise ValueError("one-way ANOVA needs at least two groups")
    if _every_group_constant(data):
        means = data.groupby("group")["value"].first()
        sizes = data.groupby("group").size()
        grand = _exact_mean(data["value"].to_numpy())
        between = 0.0 if data["value"].nunique() == 1 else float((sizes * (means - grand) ** 2).sum())
        df_between, df_within = len(means) - 1, len(data) - len(means)
        f_value, p_value = (math.nan, math.nan) if between == 0 else (math.inf, 0.0)
        return pd.DataFrame({"term": ["Condition", "Residuals"], "df": [float(df_between), float(df_within)],
                             "sum_sq": [between, 0.0], "mean_sq": [between / df_between, 0.0],
                             "F": [f_value, math.nan], "p_value": [p_value, math.nan]})
    table = anova_lm(ols("value ~ C(group)", data=data).fit())
    table.index = ["Condition", "Residuals"]
    table = table.rename(columns={"PR(>F)": "p_value"})
    return table.reset_index(names="term")


TUKEY_COLUMNS = ["group1", "group2", "difference", "lower_bound", "upper_bound", "p_value", "reject"]


def tukey_hsd(values: pd.Series, groups: pd.Series, alpha: float = 0.05) -> pd.DataFrame:
    """Tables S10/S12: difference of means (group2 − group1), confidence bounds, adjusted p.

    Without variance within the groups, as R's ``TukeyHSD`` gives it on exact input: the
    bounds are the difference; p is 0 where the means differ and not defined (NaN) where not."""
    data = _grouped(values, groups)
    if data["group"].nunique() < 2:
        return pd.DataFrame(columns=TUKEY_COLUMNS)
    if _every_group_constant(data):
        means = data.groupby("group")["value"].first()
        rows = []
        for first, second in itertools.combinations(sorted(means.index), 2):
            difference = float(means[second] - means[first])
            rows.append([first, second, difference, difference, difference,
                         0.0 if difference else math.nan, bool(difference)])
        return pd.DataFrame(rows, columns=TUKEY_COLUMNS)
    result = pairwise_tukeyhsd(data["value"].to_numpy(), data["group"].to_numpy(), alpha=alpha)
    # statsmodels lists the pairs of its sorted groups in this order (its summary rounds; we don't).
    pairs = list(itertools.combinations(result.groupsunique, 2))
    return pd.DataFrame({
        "group1": [str(a) for a, _ in pairs], "group2": [str(b) for _, b in pairs],
        "difference": result.meandiffs, "lower_bound": result.confint[:, 0], "upper_bound": result.confint[:, 1],
        "p_value": result.pvalues, "reject": result.reject}, columns=TUKEY_COLUMNS)


def cohens_kappa(labels_1: Sequence[object], labels_2: Sequence[object]) -> float:
    """Cohen's kappa of two raters' labels of the same items (missing labels = a category)."""
    first = pd.Series(list(labels_1), dtype=object).fillna("").astype(str)
    second = pd.Series(list(labels_2), dtype=object).fillna("").astype(str)
    if len(first) == 0:
        return math.nan
    categories = sorted(set(first) | set(second))
    codes = np.column_stack([first.map(categories.index), second.map(categories.index)])
    table, _ = to_table(codes, bins=np.arange(len(categories) + 1))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        # A single category used by both raters leaves kappa undefined (0/0): NaN.
        return float(statsmodels_cohens_kappa(table, return_results=False))


def ordered_pairs(groups: Sequence[str]) -> list[tuple[str, str]]:
    """All pairs in the given order, as the paper's tables list them."""
    return list(itertools.combinations(groups, 2))
