"""The experimental protocol of the paper, in one place.

Every number a lab may want to change is here once: payoffs, stage limits, rounds,
payment, questionnaire items. oTree apps, the agents, the simulations and the analysis
all read these names; session configs override the defaults per session (see
``settings.py``). Source: docs/protocol.md and the paper's SI Notes 1 and 5.

This module imports nothing from oTree so that ``agents`` and ``analysis`` can use it.
"""

from __future__ import annotations

import math

# --- The game -----------------------------------------------------------------------
COOPERATE = "A"  # labels are neutral on screen: never "cooperate"/"defect"
DEFECT = "B"
CHOICES = (COOPERATE, DEFECT)

# PAYOFFS[(own choice, other's choice)] = (own points, other's points)
PAYOFFS: dict[tuple[str, str], tuple[int, int]] = {
    ("A", "A"): (70, 70),
    ("A", "B"): (10, 80),
    ("B", "A"): (80, 10),
    ("B", "B"): (40, 40),
}

ROUNDS_PER_GAME = 10
# The game apps' NUM_ROUNDS (fixed at import); a session may play fewer. A server may change it
# with LAB_MAX_ROUNDS_PER_GAME (lab/base/session_settings.py).
MAX_ROUNDS_PER_GAME = 10

# Stage limits in seconds (SI Note 1).
STAGE_LIMITS: dict[str, int] = {
    "message_1": 60,
    "read_1": 30,
    "message_2": 60,
    "read_2": 30,
    "decision": 40,
    "result": 30,
}

MESSAGE_MAX_CHARS = 300  # a chat line, not an essay; the paper's agents use <= 20 words
AGENT_MESSAGE_MAX_WORDS = 20

# --- Treatments ---------------------------------------------------------------------
ASSOCIATE_TYPES = ("human", "cooperative", "fair", "selfish")
TREATMENT_CODES = {"human": "H-H", "cooperative": "H-C", "fair": "H-F", "selfish": "H-S"}
PERSONAS = ("cooperative", "fair", "selfish")
LABEL_SETTINGS = ("informed", "uninformed")
GAME_ORDERS = {"WC-WoC": ("WC", "WoC"), "WoC-WC": ("WoC", "WC")}
GAMES = ("WC", "WoC")  # with communication, without communication
LANGUAGES = ("zh_hans", "en")  # Simplified Chinese as in the paper's lab; English (locale/<code>.toml)

# --- Payment ------------------------------------------------------------------------
SHOW_UP_FEE = 15.0  # CNY
CURRENCY_PER_POINT = 0.06  # CNY per point of both games
NORM_BONUS = 10.0  # CNY per correct norm estimate
CURRENCY_CODE = "CNY"

# --- Questionnaires -------------------------------------------------------------------
# Q1: norm estimate, one per game, answered as an interval of the others' cooperation rate.
NORM_INTERVALS = ((0, 20), (20, 40), (40, 60), (60, 80), (80, 100))
# Q2: perception of the associates, 7-point scale -3..+3.
PERCEPTION_ITEMS = (
    "agency",
    "experience",
    "trustworthiness",
    "intelligence",
    "likability",
    "cooperativeness",
    "fairness",
)
# Q3: communication quality, the 7C standard, -3..+3.
SEVEN_C_ITEMS = (
    "clarity",
    "conciseness",
    "concreteness",
    "coherence",
    "courteousness",
    "correctness",
    "completeness",
)
LIKERT_MIN, LIKERT_MAX = -3, 3
# Q5: familiarity with LLMs, 1 (never heard of them) .. 5 (use them daily).
LLM_FAMILIARITY_LEVELS = (1, 2, 3, 4, 5)
# Q7: demographics' gender options (with age and field of study).
GENDERS = ("female", "male", "other")

# Q6: SVO slider measure (Murphy, Ackermann & Handgraaf 2011), six primary items:
# (self, other) at the first and the last of nine allocations.
SVO_ITEMS: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = (
    ((85, 85), (85, 15)),
    ((85, 15), (100, 50)),
    ((50, 100), (85, 85)),
    ((50, 100), (85, 15)),
    ((100, 50), (50, 100)),
    ((100, 50), (85, 85)),
)
SVO_STEPS = 9


# --- Functions on the rules ---------------------------------------------------------------
def payoff(own: str, other: str) -> int:
    """Points for a player choosing ``own`` against ``other``."""
    return PAYOFFS[(own, other)][0]


def svo_allocation(item: int, position: int) -> tuple[float, float]:
    """(self, other) of slider ``position`` (0..8) on SVO item ``item`` (0..5).

    The nine allocations are evenly spaced on the line between the endpoints, rounded as in
    the published measure: to whole numbers, halves up (item 1, step 6 is 33, not 32).
    """
    (s0, o0), (s1, o1) = SVO_ITEMS[item]
    t = position / (SVO_STEPS - 1)
    return (math.floor(s0 + (s1 - s0) * t + 0.5), math.floor(o0 + (o1 - o0) * t + 0.5))


def svo_angle(self_amounts: list[float], other_amounts: list[float]) -> float:
    """SVO angle in degrees from the allocations chosen on the six primary items."""
    mean_self = sum(self_amounts) / len(self_amounts)
    mean_other = sum(other_amounts) / len(other_amounts)
    return math.degrees(math.atan2(mean_other - 50.0, mean_self - 50.0))


def svo_category(angle: float) -> str:
    if angle > 57.15:
        return "altruistic"
    if angle > 22.45:
        return "prosocial"
    if angle > -12.04:
        return "individualistic"
    return "competitive"


def norm_interval_index(rate_percent: float, intervals=NORM_INTERVALS) -> int:
    """Index into ``intervals`` (the paper's NORM_INTERVALS, or an experiment's) of a cooperation rate
    in percent (100 belongs to the last)."""
    for i, (lo, hi) in enumerate(intervals):
        if lo <= rate_percent < hi:
            return i
    return len(intervals) - 1


def payout(points_total: float, correct_norm_estimates: int, *, show_up_fee: float = SHOW_UP_FEE,
           currency_per_point: float = CURRENCY_PER_POINT, norm_bonus: float = NORM_BONUS) -> float:
    """The paper's payment: fee + rate x points of both games + bonus per correct estimate."""
    return round(show_up_fee + currency_per_point * points_total + norm_bonus * correct_norm_estimates, 2)
