"""The 95 % interval of a rate, computed once for the live dashboard (lab/experimenter/dashboard.py), the
analysis (analysis/) and the simulation lab (agents/simulate/, agents/similarity/).

The standard library only: the lab's server imports it and does not load scipy. Like
``protocol.py``, it imports nothing of the project, so every room may import it.
"""

from __future__ import annotations

import math
from statistics import NormalDist


def wilson_interval(successes: float, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``trials``: R's
    ``prop.test(successes, trials, correct = FALSE)$conf.int``, bound for bound.

    It stays inside [0, 1] and has a positive width at 0 and at 1 (where the normal interval
    collapses). ``successes`` may be a sum of rates (the mean of units' rates, e.g.
    analysis.stats.rate_interval); R takes the same. (nan, nan) without trials: R refuses n = 0."""
    if trials <= 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    z22n = z * z / (2 * trials)
    # R's formula, with R's exact bounds at p = 0 and p = 1 (no rounding a hair inside them).
    spread = z * math.sqrt(p * (1 - p) / trials + z22n / (2 * trials))
    low = 0.0 if p <= 0 else max(0.0, (p + z22n - spread) / (1 + 2 * z22n))
    high = 1.0 if p >= 1 else min(1.0, (p + z22n + spread) / (1 + 2 * z22n))
    return (low, high)
