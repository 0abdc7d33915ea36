"""The one Wilson interval (intervals.py) that the dashboard, the analysis and the simulation lab
share, against R 4.2.2; and that each of them reports it."""

import math

import pandas as pd
import pytest

from intervals import wilson_interval

# R: options(digits = 15)
#    for (xn in list(c(0,1), c(1,1), c(0,2), c(1,2), c(2,2), c(7,20), c(3,10), c(0,12), c(12,12),
#                    c(30,72), c(72,72), c(1.5,2), c(0.5,2), c(5.5,6)))
#      print(suppressWarnings(prop.test(xn[1], xn[2], correct = FALSE))$conf.int)
# (x = 1.5 of 2: the mean of two agents' rates 0.5 and 1 over the agents; R takes a non-integer x.)
WILSON_FROM_R = [
    (0, 1, 0.0, 0.793450685622763), (1, 1, 0.206549314377238, 1.0),
    (0, 2, 0.0, 0.657619772493347), (1, 2, 0.094531205734231, 0.905468794265769),
    (2, 2, 0.342380227506653, 1.0), (7, 20, 0.181191824101082, 0.567145723314764),
    (3, 10, 0.107791267406301, 0.603221852538855), (0, 12, 0.0, 0.242494006655241),
    (12, 12, 0.757505993344759, 1.0), (30, 72, 0.309852174747399, 0.531923020685344),
    (72, 72, 0.949348827403542, 1.0), (1.5, 2, 0.197867455762311, 0.973322657991015),
    (0.5, 2, 0.026677342008985, 0.802132544237689), (5.5, 6, 0.516817051213657, 0.991237708867872),
]


@pytest.mark.parametrize("successes, trials, low, high", WILSON_FROM_R)
def test_wilson_interval_is_r_prop_test_without_correction(successes, trials, low, high):
    assert wilson_interval(successes, trials) == pytest.approx((low, high), rel=1e-12, abs=1e-15)


def test_wilson_interval_bounds_are_exactly_0_and_1_where_r_puts_them_and_nan_without_trials():
    assert wilson_interval(0, 7)[0] == 0.0 and wilson_interval(7, 7)[1] == 1.0
    # R: prop.test(7, 20, correct = FALSE, conf.level = 0.9)$conf.int -> 0.202260040056761 0.533487311151528
    assert wilson_interval(7, 20, 0.9) == pytest.approx((0.202260040056761, 0.533487311151528), rel=1e-12)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))  # R: prop.test(0, 0) is an error


def test_the_dashboard_and_the_similarity_report_give_this_interval():
    from agents.similarity.report import cooperation_rates
    from lab.experimenter.dashboard import rate_series

    series = rate_series({1: (1, 2), 2: (7, 20), 3: (0, 0)}, reached={1, 2, 3})
    assert series["low"][:2] == [round(0.094531205734231, 4), round(0.181191824101082, 4)]
    assert series["high"][:2] == [round(0.905468794265769, 4), round(0.567145723314764, 4)]
    assert series["low"][2] is None and series["high"][2] is None  # no trials: a gap, not NaN in the JSON
    decisions = pd.DataFrame({"model": ["m"] * 20, "choice": ["A"] * 7 + ["B"] * 13})
    rates = cooperation_rates(decisions, ["model"]).iloc[0]
    assert (rates["ci_low"], rates["ci_high"]) == pytest.approx((0.181191824101082, 0.567145723314764), rel=1e-12)
