"""The paper's generalized linear models (statsmodels, binomial family, logit link).

- Fig. 3 / S19: a participant's cooperation (cooperations out of rounds) on the powers 1..k
  of the agents' promise-breaking frequency f; k = 3 in Fig. 3, 4 in Fig. S19.
- Table S13 / S7: a participant's cooperation on the perception, 7C and norm-estimate
  answers, standardised (z-scores, so the intercept is the log-odds at the average answers),
  one model for H-H and one for the agent treatments with H-F as the baseline treatment.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.optimize import linprog

from analysis.load import PERCEPTION_COLUMNS, SEVEN_C_COLUMNS

POWER_NAMES = {1: "linear", 2: "quadratic", 3: "cubic", 4: "biquadratic"}
NORM_COLUMN = "norm_estimate_WC"
PERCEPTION_PREDICTORS = SEVEN_C_COLUMNS + PERCEPTION_COLUMNS + (NORM_COLUMN,)
BASELINE_TREATMENT = "H-F"


@dataclass
class FittedGLM:
    coefficients: pd.DataFrame  # term, estimate, standard_error, z, p_value, estimable, identifiable, note
    fit_summary: pd.DataFrame  # null deviance, residual deviance, AIC, AICc, rank, observations
    result: object  # the statsmodels results object (fitted on the estimable terms)
    aliased: tuple[str, ...] = ()  # terms R reports as NA: linear combinations of earlier terms
    design_columns: tuple[str, ...] = ()  # every term, estimable or not, in the design's order
    separated: tuple[str, ...] = ()  # terms whose estimate grows without bound (perfect separation)


NOT_ESTIMABLE = "not estimable: a constant or a linear combination of the terms before it (rank-deficient design)"
NOT_IDENTIFIABLE = ("perfect separation: not identifiable (no finite maximum-likelihood estimate; the number "
                    "shown is where the fit stopped)")


# A column whose residual, after projecting it on the columns before it, is below this share of
# its norm is aliased (R's QR pivots such columns out; 1e-7 is lm's tolerance, and it also
# catches combinations that float rounding leaves a hair above glm's 1e-11).
ALIAS_TOLERANCE = 1e-7


def aliased_columns(design: pd.DataFrame, tolerance: float = ALIAS_TOLERANCE) -> list[str]:
    """The columns that are linear combinations of the columns before them, as R finds them:
    in the design's order, so the first of two identical columns is kept (R's ``alias``)."""
    kept: list[np.ndarray] = []
    aliased = []
    for name in design.columns:
        column = design[name].to_numpy(dtype=float)
        norm = np.linalg.norm(column)
        if norm == 0 or not np.all(np.isfinite(column)):
            aliased.append(name)
            continue
        if kept:
            basis = np.column_stack(kept)
            coefficients, *_ = np.linalg.lstsq(basis, column, rcond=None)
            residual = column - basis @ coefficients
        else:
            residual = column
        if np.linalg.norm(residual) <= tolerance * norm:
            aliased.append(name)
        else:
            kept.append(column)
    return aliased


# A direction of the linear program below longer than this (of at most 1 per coefficient) is one.
SEPARATION_TOLERANCE = 1e-7


def separated_terms(successes: np.ndarray, trials: np.ndarray, design: pd.DataFrame) -> list[str]:
    """The terms of a full-rank design whose maximum-likelihood estimate is infinite: the data
    are (quasi-)completely separated. Konis' linear program, as R's ``detectseparation`` runs it:
    a direction b with x·b ≥ 0 where every trial succeeded, x·b ≤ 0 where none did and x·b = 0
    elsewhere raises the likelihood without end along b; a term is infinite when some such b
    moves it. Everyone cooperating in every round separates the intercept."""
    x = design.to_numpy(dtype=float)
    all_successes, no_successes = successes >= trials, successes <= 0
    mixed = ~all_successes & ~no_successes
    upper = np.vstack([-x[all_successes], x[no_successes]])
    bounds = [(-1.0, 1.0)] * x.shape[1]
    infinite = []
    for index, name in enumerate(design.columns):
        for sign in (1.0, -1.0):
            objective = np.zeros(x.shape[1])
            objective[index] = -sign  # maximise sign·b_index
            solution = linprog(objective, A_ub=upper if len(upper) else None,
                               b_ub=np.zeros(len(upper)) if len(upper) else None,
                               A_eq=x[mixed] if mixed.any() else None,
                               b_eq=np.zeros(mixed.sum()) if mixed.any() else None, bounds=bounds, method="highs")
            if solution.status == 0 and -solution.fun > SEPARATION_TOLERANCE:
                infinite.append(name)
                break
    return infinite


def binomial_glm(successes: np.ndarray, trials: np.ndarray, design: pd.DataFrame) -> FittedGLM:
    """R's ``glm(cbind(successes, trials − successes) ~ …, family = binomial)``, including its
    answer on a rank-deficient design: aliased terms are not estimated (NA, ``estimable`` False),
    the model is fitted on the rest, and AIC/AICc count the rank, not the columns."""
    aliased = aliased_columns(design)
    estimable = design.drop(columns=aliased)
    if len(design) <= estimable.shape[1]:
        raise ValueError(f"{len(design)} observations: too few for a model of rank {estimable.shape[1]} "
                         "(no residual degree of freedom; R would fit the data exactly)")
    response = np.column_stack([successes, trials - successes])
    separated = separated_terms(successes, trials, estimable)
    with warnings.catch_warnings():
        # statsmodels' warnings (perfect separation, overflow) are said in the table instead
        warnings.simplefilter("ignore")
        result = sm.GLM(response, estimable, family=sm.families.Binomial()).fit()
    coefficients = pd.DataFrame({"term": list(design.columns)})
    for name, values in (("estimate", result.params), ("standard_error", result.bse), ("z", result.tvalues),
                         ("p_value", result.pvalues)):
        coefficients[name] = coefficients["term"].map(dict(zip(estimable.columns, values.to_numpy())))
    coefficients["estimable"] = ~coefficients["term"].isin(aliased)
    coefficients["identifiable"] = coefficients["estimable"] & ~coefficients["term"].isin(separated)
    coefficients["note"] = np.select([~coefficients["estimable"], ~coefficients["identifiable"]],
                                     [NOT_ESTIMABLE, NOT_IDENTIFIABLE], "")
    rank, observations = estimable.shape[1], len(design)
    # AICc as the paper reports it: AIC with the small-sample correction, k = the model's rank.
    denominator = observations - rank - 1
    aicc = result.aic + 2 * rank * (rank + 1) / denominator if denominator > 0 else np.nan
    summary = pd.DataFrame({"measure": ["null deviance", "residual deviance", "AIC", "AICc", "rank",
                                        "terms", "observations"],
                            "value": [result.null_deviance, result.deviance, result.aic, aicc, rank,
                                      design.shape[1], observations]})
    return FittedGLM(coefficients, summary, result, tuple(aliased), tuple(design.columns), tuple(separated))


def fit_notes(fitted: FittedGLM) -> list[str]:
    """What a reader of the coefficients must know: terms not estimable, estimates not identifiable."""
    notes = []
    if fitted.aliased:
        rank = len(fitted.design_columns) - len(fitted.aliased)
        notes.append(f"the design is rank-deficient (rank {rank} of {len(fitted.design_columns)} terms): "
                     f"{', '.join(fitted.aliased)} cannot be estimated — a constant, or a linear combination of "
                     "the terms before it (R reports NA) — and are left out of the fit; AIC and AICc count "
                     f"{rank} parameter{'s' * (rank != 1)}.")
    if fitted.separated:
        notes.append(f"perfect separation: coefficients not identifiable — {', '.join(fitted.separated)} "
                     f"ha{'ve' if len(fitted.separated) > 1 else 's'} no finite estimate (the data are separated: e.g. every participant cooperated in "
                     "every round, or none did); their estimate, standard error, z and p are where the fit "
                     "stopped, not results (R's glm gives huge standard errors, sometimes with the warning "
                     "\"fitted probabilities numerically 0 or 1 occurred\").")
    return notes


def distinct_values_note(frequency: pd.Series, degree: int) -> str | None:
    """A polynomial of degree k through fewer than k + 1 distinct values of f is rank-deficient."""
    distinct = frequency.dropna().nunique()
    if degree < distinct:
        return None
    which = f"the powers above {distinct - 1} are" if distinct > 1 else "no power of f is"
    return (f"f takes only {distinct} distinct value{'s' if distinct != 1 else ''}: a polynomial of degree "
            f"{degree} needs at least {degree + 1}, so {which} estimable.")


def breach_polynomial_glm(participants: pd.DataFrame, degree: int = 3) -> FittedGLM:
    """Fig. 3: WC cooperation of participants with agent associates on f, f², …, f^degree."""
    if degree < 1:
        raise ValueError(f"the degree of the polynomial in f must be at least 1, not {degree}")
    data = participants.dropna(subset=["agent_breach_frequency", "rounds_WC"])
    data = data[data["rounds_WC"] > 0]
    if len(data) <= degree + 1:
        raise ValueError(f"{len(data)} participants with an agent breach frequency: too few for a "
                         f"degree-{degree} polynomial")
    frequency = data["agent_breach_frequency"].to_numpy(dtype=float)
    design = pd.DataFrame({"intercept": np.ones(len(data))})
    for power in range(1, degree + 1):
        design[POWER_NAMES.get(power, f"power {power}")] = frequency ** power
    return binomial_glm(data["cooperations_WC"].to_numpy(dtype=float), data["rounds_WC"].to_numpy(dtype=float),
                         design)


def breach_curve(fitted: FittedGLM, points: int = 101) -> pd.DataFrame:
    """The fitted cooperation rate over f in [0, 1], for the curve over the scatter."""
    frequency = np.linspace(0.0, 1.0, points)
    degree = len(fitted.design_columns) - 1
    powers = [power for power, name in enumerate(fitted.design_columns) if name not in fitted.aliased]
    design = np.column_stack([frequency ** power for power in powers])
    return pd.DataFrame({"agent_breach_frequency": frequency, "fitted_cooperation_rate":
                         fitted.result.predict(design)})


def perception_glm(participants: pd.DataFrame, treatments: tuple[str, ...],
                   baseline: str = BASELINE_TREATMENT) -> FittedGLM:
    """Table S13 (informed) / S7 (uninformed) for the given treatments, dummies against ``baseline``."""
    data = participants[participants["treatment"].isin(treatments)]
    data = data.dropna(subset=["rounds_WC", *PERCEPTION_PREDICTORS])
    data = data[data["rounds_WC"] > 0]
    predictors = list(PERCEPTION_PREDICTORS)
    if len(data) < 3:
        raise ValueError(f"{len(data)} participants with complete questionnaires in {', '.join(treatments)}: "
                         "too few for the model")
    spread = data[predictors].std(ddof=0)
    # An item everyone answered alike has no z-score: its column is 0 and R reports it as NA.
    standardised = ((data[predictors] - data[predictors].mean()) / spread.where(spread > 0)).fillna(0.0)
    design = pd.concat([pd.Series(1.0, index=data.index, name="intercept"), standardised], axis=1)
    for treatment in treatments:
        if treatment != baseline and len(treatments) > 1:
            design[f"treatment {treatment}"] = (data["treatment"] == treatment).astype(float)
    return binomial_glm(data["cooperations_WC"].to_numpy(dtype=float), data["rounds_WC"].to_numpy(dtype=float),
                         design.astype(float))


def breach_curve_band(fitted: FittedGLM, points: int = 101, confidence: float = 0.95) -> pd.DataFrame:
    """A pointwise confidence band around the fitted curve, as R's
    ``predict(model, type = "link", se.fit = TRUE)`` with fit ± z·se mapped through the logit."""
    from scipy.special import expit
    from scipy.stats import norm

    frequency = np.linspace(0.0, 1.0, points)
    powers = [power for power, name in enumerate(fitted.design_columns) if name not in fitted.aliased]
    design = np.column_stack([frequency ** power for power in powers])
    covariance = np.asarray(fitted.result.cov_params())
    link = design @ np.asarray(fitted.result.params)
    standard_error = np.sqrt(np.einsum("ij,jk,ik->i", design, covariance, design))
    z = norm.ppf(0.5 + confidence / 2)
    return pd.DataFrame({"agent_breach_frequency": frequency, "lower": expit(link - z * standard_error),
                         "upper": expit(link + z * standard_error)})
