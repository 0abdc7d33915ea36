"""The paper's generalized linear models (statsmodels, binomial family, logit link).

- Fig. 3 / S19: a participant's cooperation (cooperations out of rounds) on the powers 1..k
  of the agents' promise-breaking frequency f; k = 3 in Fig. 3, 4 in Fig. S19.
- Table S13 / S7: a participant's cooperation on the perception, 7C and norm-estimate
  answers, standardised (z-scores, so the intercept is the log-odds at the average answers),
  one model for H-H and one for the agent treatments with H-F as the baseline treatment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm

from analysis.load import PERCEPTION_COLUMNS, SEVEN_C_COLUMNS

POWER_NAMES = {1: "linear", 2: "quadratic", 3: "cubic", 4: "biquadratic"}
NORM_COLUMN = "norm_estimate_WC"
PERCEPTION_PREDICTORS = SEVEN_C_COLUMNS + PERCEPTION_COLUMNS + (NORM_COLUMN,)
BASELINE_TREATMENT = "H-F"


@dataclass
class FittedGLM:
    coefficients: pd.DataFrame  # term, estimate, standard_error, z, p_value
    fit_summary: pd.DataFrame  # null deviance, residual deviance, AIC, AICc, observations
    result: object  # the statsmodels results object


def _binomial_fit(successes: np.ndarray, trials: np.ndarray, design: pd.DataFrame) -> FittedGLM:
    response = np.column_stack([successes, trials - successes])
    result = sm.GLM(response, design, family=sm.families.Binomial()).fit()
    coefficients = pd.DataFrame({
        "term": design.columns, "estimate": result.params.to_numpy(), "standard_error": result.bse.to_numpy(),
        "z": result.tvalues.to_numpy(), "p_value": result.pvalues.to_numpy()})
    parameters, observations = design.shape[1], len(design)
    # AICc as the paper reports it: AIC with the small-sample correction.
    aicc = result.aic + 2 * parameters * (parameters + 1) / max(observations - parameters - 1, 1)
    summary = pd.DataFrame({"measure": ["null deviance", "residual deviance", "AIC", "AICc", "observations"],
                            "value": [result.null_deviance, result.deviance, result.aic, aicc, observations]})
    return FittedGLM(coefficients, summary, result)


def breach_polynomial_glm(participants: pd.DataFrame, degree: int = 3) -> FittedGLM:
    """Fig. 3: WC cooperation of participants with agent associates on f, f², …, f^degree."""
    data = participants.dropna(subset=["agent_breach_frequency", "rounds_WC"])
    data = data[data["rounds_WC"] > 0]
    if len(data) <= degree + 1:
        raise ValueError(f"{len(data)} participants with an agent breach frequency: too few for a "
                         f"degree-{degree} polynomial")
    frequency = data["agent_breach_frequency"].to_numpy(dtype=float)
    design = pd.DataFrame({"intercept": np.ones(len(data))})
    for power in range(1, degree + 1):
        design[POWER_NAMES.get(power, f"power {power}")] = frequency ** power
    return _binomial_fit(data["cooperations_WC"].to_numpy(dtype=float), data["rounds_WC"].to_numpy(dtype=float),
                         design)


def breach_curve(fitted: FittedGLM, points: int = 101) -> pd.DataFrame:
    """The fitted cooperation rate over f in [0, 1], for the curve over the scatter."""
    frequency = np.linspace(0.0, 1.0, points)
    degree = len(fitted.coefficients) - 1
    design = np.column_stack([frequency ** power for power in range(degree + 1)])
    return pd.DataFrame({"agent_breach_frequency": frequency, "fitted_cooperation_rate":
                         fitted.result.predict(design)})


def perception_glm(participants: pd.DataFrame, treatments: tuple[str, ...]) -> FittedGLM:
    """Table S13 (informed) / S7 (uninformed) for the given treatments."""
    data = participants[participants["treatment"].isin(treatments)]
    data = data.dropna(subset=["rounds_WC", *PERCEPTION_PREDICTORS])
    data = data[data["rounds_WC"] > 0]
    predictors = [c for c in PERCEPTION_PREDICTORS if data[c].std(ddof=0) > 0]
    if len(data) <= len(predictors) + len(treatments) + 1:
        raise ValueError(f"{len(data)} participants with complete questionnaires in {', '.join(treatments)}: "
                         "too few for the model")
    standardised = (data[predictors] - data[predictors].mean()) / data[predictors].std(ddof=0)
    design = pd.concat([pd.Series(1.0, index=data.index, name="intercept"), standardised], axis=1)
    for treatment in treatments:
        if treatment != BASELINE_TREATMENT and len(treatments) > 1:
            design[f"treatment {treatment}"] = (data["treatment"] == treatment).astype(float)
    design = design.loc[:, (design != 0).any()]  # a treatment without participants has no effect
    return _binomial_fit(data["cooperations_WC"].to_numpy(dtype=float), data["rounds_WC"].to_numpy(dtype=float),
                         design.astype(float))
