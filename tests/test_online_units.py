"""Online sessions without a server: completion codes and study-link settings as the session
config gives them, the refusals at creation, and the bonus file's promise (one file per payout,
never made again with other totals)."""

from types import SimpleNamespace

import pytest

from lab import app_registry
from lab.online import bonus, config
from lab.session_settings import SessionConfigError, config_defaults, validate

CODES = "completed=C1,screened_out=S2,lobby_timeout=L3,partner_dropped=P4,timed_out=T5"


def test_completion_codes_in_either_form_and_refusals():
    assert config.completion_codes({"prolific_completion_codes": CODES})["lobby_timeout"] == "L3"
    as_json = '{"completed": "C1", "screened_out": "S2", "lobby_timeout": "L3", "partner_dropped": "P4", "timed_out": "T5"}'
    assert config.completion_codes({"prolific_completion_codes": as_json}) == config.completion_codes(
        {"prolific_completion_codes": CODES})
    with pytest.raises(ValueError, match="no code for timed_out"):
        config.completion_codes({"prolific_completion_codes": CODES.replace(",timed_out=T5", "")})
    with pytest.raises(ValueError, match="unknown outcomes"):
        config.completion_codes({"prolific_completion_codes": CODES + ",finished=X"})
    with pytest.raises(ValueError, match="letters and digits"):
        config.completion_codes({"prolific_completion_codes": CODES.replace("C1", "C 1")})


def _online(**fields):
    return {**config_defaults(), "associate_type": "human", "label_setting": "informed", "game_order": "WC-WoC",
            "online": True, "prolific_completion_codes": CODES, **fields}


def test_online_session_refused_at_creation_with_the_reason():
    with pytest.raises(SessionConfigError, match="no code for"):
        validate(_online(prolific_completion_codes="completed=C1"), 12)
    with pytest.raises(SessionConfigError, match="cohorts of 12"):
        validate(_online(), 11)  # H-H online: at least one cohort (rounds + 1, even)
    with pytest.raises(SessionConfigError, match="online_cohort_size"):
        validate(_online(online_cohort_size=7), 30)
    with pytest.raises(SessionConfigError, match="online_url_params"):
        validate(_online(online_url_params="PROLIFIC_PID"), 12)
    # An odd number of places is fine online: cohorts form in the lobby.
    assert validate(_online(), 13).associate_type == "human"
    assert validate(dict(_online(), online=False), 12)  # the lab as before


def test_online_page_limits_only_online():
    assert config.page_limit({"online": False, "online_intro_seconds": 60}, "GameIntro", False) is None
    assert config.page_limit(_online(online_intro_seconds=45), "GameIntro", False) == 45
    assert config.page_limit(_online(online_questionnaire_seconds=99), "Perception", True) == 99
    assert config.page_limit(_online(), "Decision", False) is None  # the stage limits stay the paper's


class _Payouts:
    """The payment app's BonusPayout table, in memory."""

    id = "id"

    def __init__(self):
        self.rows = []

    def objects_filter(self, session_code):
        rows = [row for row in self.rows if row.session_code == session_code]
        return SimpleNamespace(order_by=lambda _: list(rows))

    def create(self, **fields):
        self.rows.append(SimpleNamespace(**fields))


@pytest.fixture
def payouts(monkeypatch):
    table = _Payouts()
    monkeypatch.setattr(app_registry, "_bonus_payouts", [table])
    return table


def test_bonus_file_is_one_payout_never_made_again_with_other_totals(payouts, monkeypatch):
    session = SimpleNamespace(code="s1", config={})
    owed = {"PIDA": 3.4, "PIDB": 1.25}
    monkeypatch.setattr(bonus, "owed", lambda s: dict(owed))

    text, note = bonus.bonus_file(session, "admin")
    assert text == "PIDA,3.40\nPIDB,1.25\n" and "Payout 1 recorded" in note and "not idempotent" in note
    assert len(payouts.rows) == 1 and payouts.rows[0].total == 4.65 and payouts.rows[0].who == "admin"

    again, note = bonus.bonus_file(session, "admin")
    assert again == text and "Already paid" in note and len(payouts.rows) == 1

    owed["PIDC"] = 2.0  # someone finished after the payout
    with pytest.raises(bonus.BonusRefused, match="changed since payout 1.*PIDC"):
        bonus.bonus_file(session, "admin")
    assert len(payouts.rows) == 1, "a refusal records nothing"
    difference, note = bonus.bonus_file(session, "admin", difference=True)
    assert difference == "PIDC,2.00\n" and payouts.rows[-1].kind == "difference"
    assert bonus.paid("s1") == owed

    owed["PIDA"] = 1.0  # lower than paid: a file cannot take money back
    with pytest.raises(bonus.BonusRefused, match="less than was paid to PIDA"):
        bonus.bonus_file(session, "admin", difference=True)


def test_nothing_owed_is_refused_not_an_empty_payout(payouts, monkeypatch):
    monkeypatch.setattr(bonus, "owed", lambda s: {})
    with pytest.raises(bonus.BonusRefused, match="No participant"):
        bonus.bonus_file(SimpleNamespace(code="s2", config={}), "admin")
    assert payouts.rows == []


def test_private_agents_online_each_human_meets_own_agents_once():
    import random

    from lab import matching

    schedule = matching.private_agent_schedule(3, 4, random.Random(1))
    for human in range(3):
        met = [schedule[r][human] for r in range(4)]
        assert sorted(met) == list(range(human * 4, human * 4 + 4)), "each of their own agents, once"
