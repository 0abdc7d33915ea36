"""Online sessions without a server: completion codes and study-link settings as the session
config gives them, the refusals at creation, and the bonus file's promise (one file per payout,
never made again with other totals)."""

from types import SimpleNamespace

import pytest

from lab.base import app_registry
from lab.online import bonus
from lab.base import online_settings as config
from lab.base.session_settings import SessionConfigError, config_defaults, validate

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

    preview, note, new = bonus.next_payout(session)
    assert preview == "PIDA,3.40\nPIDB,1.25\n" and new and "not recorded yet" in note and payouts.rows == []
    text, note = bonus.bonus_file(session, "admin")
    assert text == preview and "Payout 1 recorded" in note and "not idempotent" in note
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

    from lab.base import matching

    schedule = matching.private_agent_schedule(3, 4, random.Random(1))
    for human in range(3):
        met = [schedule[r][human] for r in range(4)]
        assert sorted(met) == list(range(human * 4, human * 4 + 4)), "each of their own agents, once"


@pytest.fixture
def fresh_presence(monkeypatch):
    """lab/online/presence.py's memory as a new server's, started at t = 1000."""
    from lab.online import presence

    for name in ("_open", "_closed_at", "_recorded"):
        monkeypatch.setattr(presence, name, {})
    monkeypatch.setattr(presence, "_started_at", 1000.0)
    return presence


def test_closed_tab_grace_counts_from_arrival_and_the_last_page_seen(fresh_presence):
    presence = fresh_presence
    # Arrived long after the server started, no page yet: one grace from the arrival.
    assert presence.drop_due_at("a", 2000.0, None, 10) == 2010.0
    presence.connected("a")
    assert presence.drop_due_at("a", 2000.0, None, 10) is None
    presence.disconnected("a", now=2050.0)
    assert presence.drop_due_at("a", 2000.0, None, 10) == 2060.0
    # A previous run of the server recorded their close: one grace from it, whenever this one started.
    assert presence.drop_due_at("b", 2000.0, (2100.0, False), 10) == 2110.0
    # Their page was open when the server stopped: from then, but not before a tab could reconnect.
    presence._started_at = 3000.0
    assert presence.drop_due_at("c", 2000.0, (2100.0, True), 10) == 3000.0 + 10
    assert presence.drop_due_at("c", 2000.0, (2100.0, True), 90) == 3000.0 + presence.RECONNECT_SECONDS
    presence._started_at = 2105.0
    assert presence.drop_due_at("c", 2000.0, (2100.0, True), 90) == 2190.0
    assert presence.arrival("2026-12-05 10:00:00.250000") == 1796464800.25
    assert presence.arrival(None) is None and presence.arrival("yesterday") is None


def test_presence_is_written_for_the_next_start_at_closes_and_heartbeats(fresh_presence):
    presence = fresh_presence
    presence.connected("open")
    presence.connected("closing")
    presence.disconnected("closing", now=100.0)
    presence.connected("page_change")
    presence.disconnected("page_change", now=100.6)  # its next page's socket is on its way
    # First sight of an open page, and a close: written; a page change in progress: not yet.
    assert presence.presence_changes(["open", "closing", "page_change", "never"], 101.0, heartbeat=False) == [
        ("open", 101.0, True), ("closing", 100.0, False)]
    presence._recorded.update({"open": (101.0, True), "closing": (100.0, False)})
    assert presence.presence_changes(["open", "closing"], 105.0, heartbeat=False) == []  # nothing new
    # The heartbeat: every open page, with one value (one statement).
    presence.connected("closing")
    assert presence.presence_changes(["open", "closing"], 111.0, heartbeat=True) == [
        ("open", 111.0, True), ("closing", 111.0, True)]
