"""Every number the dashboard shows an experimenter, against a recount from the exports.

Four bot sessions (H-H and H-F, label-informed and uninformed, both game orders) are played
by oTree's bots into one database (SQLite and PostgreSQL); the dashboard's data of each is
compared with what this file recounts, independently, from the long-format CSV exports of
docs/DATA.md (decisions, messages, participants, llm_calls) and the quiz's: pair-rounds by
``conversation_id``, agreements from each side's latest message, late humans apart from the
agents' fallbacks, earnings and the session's cost, the agents' calls and latency, failed quiz
attempts.

The H-F uninformed session's agents answer in 2 s with a 1 s decision limit: every decision
turn falls back (status timeout), every message turn answers.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

import protocol
from intervals import wilson_interval
from lab.experimenter.proposals import PAPER, ChatReading, proposed_choice
from tests import processes
from tests.lab_server import PYTHON, completed_session_code, lab_env, run_bots

ROUNDS = 3
SIMULATED = {"llm_provider": "simulated"}
SESSIONS = [
    ("hh_informed_wc_first", 4, {}),
    ("hh_uninformed_woc_first", 4, {}),
    ("hf_informed_wc_first", 3, SIMULATED),
    ("hf_uninformed_woc_first", 3, dict(SIMULATED, llm_simulated_latency=2, decision_seconds=1)),
]

DASHBOARDS = """
import json, sys
from otree.main import setup
setup()
from otree.database import session_scope
from otree.models import Session
from lab.experimenter.dashboard import session_dashboard
with session_scope():
    print(json.dumps({code: session_dashboard(Session.objects_get(code=code)) for code in sys.argv[1:]}, default=str))
"""


def _csv(folder: Path, name: str, code: str, app: str = "payment") -> list[dict]:
    path = folder / f"{app}_{name}_{code}.csv"
    if not path.exists():
        return []
    with path.open(encoding="utf-8-sig", newline="") as fp:
        return list(csv.DictReader(fp))


def _true(value: str) -> bool:
    return value == "True"


def recount_game(decisions: list[dict], messages: list[dict], game: str, cooperative: str = protocol.COOPERATE,
                 reading: ChatReading = PAPER, rounds_per_game: int = ROUNDS) -> dict:
    """Per round of one game, from the exports' rows alone; cooperation is choosing ``cooperative``, the
    chat is read by ``reading`` (the session's game's; the paper's by default)."""
    rounds = range(1, rounds_per_game + 1)
    out = {key: {r: Counter() for r in rounds} for key in ("human", "agent", "pairs", "msgs")}
    conversations: dict[str, dict] = defaultdict(dict)  # conversation_id -> {player code: choice}
    conversation_round = {}
    for row in decisions:
        if row["game"] != game:
            continue
        r, kind = int(row["round"]), row["player_kind"]
        if not (kind == "human" and _true(row["after_drop"])):  # a dropped seat's random choice is no one's
            counts = out[kind][r]
            counts["n"] += 1
            counts["cooperated"] += row["choice"] == cooperative
            counts["timed_out"] += _true(row["timed_out"])
        if kind == "human":
            conversations[row["conversation_id"]].update({row["player_code"]: row["choice"],
                                                          row["associate_code"]: row["associate_choice"]})
            conversation_round[row["conversation_id"]] = r
    latest: dict[str, dict] = defaultdict(dict)  # conversation_id -> {sender: latest proposal}
    for row in sorted((m for m in messages if m["game"] == game), key=lambda m: int(m["stage"])):
        r = int(row["round"])
        out["msgs"][r][(row["sender_kind"], "n")] += 1
        out["msgs"][r][(row["sender_kind"], "late")] += not _true(row["sent_in_time"])
        choice = proposed_choice(row["text"], reading) if _true(row["sent_in_time"]) else None
        if choice:
            latest[row["conversation_id"]][row["sender_code"]] = choice
    for conversation, choices in conversations.items():
        pair = out["pairs"][conversation_round[conversation]]
        pair["n"] += 1
        proposals = latest.get(conversation, {})
        if len(choices) == 2 and all(proposals.get(code) == cooperative for code in choices):
            pair["agreements"] += 1
            pair["breaches"] += any(choice != cooperative for choice in choices.values())
    return out


def _check_rate(series: dict, successes: list, trials: list):
    assert series["successes"] == successes and series["trials"] == trials
    for k, n, rate, low, high in zip(successes, trials, series["rate"], series["low"], series["high"]):
        if not n:
            assert rate is None and low is None and high is None
            continue
        assert rate == pytest.approx(k / n, abs=1e-4)
        # R's prop.test(x, n, correct = FALSE)$conf.int (tests/test_intervals.py)
        assert (low, high) == pytest.approx(wilson_interval(k, n), abs=1e-4)


def check_game(shown: dict, counted: dict, with_agents: bool, with_chat: bool):
    rounds = sorted(counted["human"])
    human, agent, pairs, msgs = (counted[key] for key in ("human", "agent", "pairs", "msgs"))
    _check_rate(shown["human_cooperation"], [human[r]["cooperated"] for r in rounds], [human[r]["n"] for r in rounds])
    assert shown["humans_timed_out"] == {"count": [human[r]["timed_out"] for r in rounds],
                                         "of": [human[r]["n"] for r in rounds]}
    if with_agents:
        _check_rate(shown["agent_cooperation"], [agent[r]["cooperated"] for r in rounds], [agent[r]["n"] for r in rounds])
        # An agent's fallback: a message not sent in time or a decision timed out (random).
        fallbacks = [agent[r]["timed_out"] + msgs[r][("agent", "late")] for r in rounds]
        turns = [agent[r]["n"] + msgs[r][("agent", "n")] for r in rounds]
        by_reason = shown["agent_fallbacks"].values()
        assert [sum(s["count"][i] for s in by_reason) for i in range(len(rounds))] == fallbacks
        assert all(s["of"] == turns for s in by_reason)
    else:
        assert shown["agent_cooperation"] is None and shown["agent_fallbacks"] is None
    if not with_chat:
        assert shown["agreement"] is None and shown["humans_unsent_messages"] is None
        return
    assert shown["humans_unsent_messages"] == {"count": [msgs[r][("human", "late")] for r in rounds],
                                               "of": [msgs[r][("human", "n")] for r in rounds]}
    _check_rate(shown["agreement"], [pairs[r]["agreements"] for r in rounds], [pairs[r]["n"] for r in rounds])
    _check_rate(shown["breach"], [pairs[r]["breaches"] for r in rounds], [pairs[r]["agreements"] for r in rounds])
    assert shown["pairs_total"] == sum(pairs[r]["n"] for r in rounds)
    assert shown["agreements_total"] == sum(pairs[r]["agreements"] for r in rounds)
    assert shown["breaches_total"] == sum(pairs[r]["breaches"] for r in rounds)


def check_earnings(shown: dict, decisions: list[dict], participants: list[dict], *,
                   bonus_at_most: float = 2 * protocol.NORM_BONUS):
    """``bonus_at_most``: the norm bonuses a participant may earn (the paper's: two estimates)."""
    fee, rate = protocol.SHOW_UP_FEE, protocol.CURRENCY_PER_POINT
    points = Counter({row["participant_code"]: 0 for row in participants})
    for row in decisions:
        if row["player_kind"] == "human":
            points[row["player_code"]] += int(row["payoff"])
    values = list(points.values())
    n = len(values)
    assert shown["participants"] == n and shown["points_total"] == sum(values)
    assert shown["points"] == pytest.approx(dict(mean=sum(values) / n, min=min(values), max=max(values)), abs=0.05)
    money = [fee + v * rate for v in values]
    assert shown["money"] == pytest.approx(dict(mean=sum(money) / n, min=min(money), max=max(money)), abs=0.005)
    assert shown["payout_so_far"] == pytest.approx(n * fee + sum(values) * rate, abs=0.005)
    assert shown["payout_at_most"] == pytest.approx(n * fee + sum(values) * rate + n * bonus_at_most, abs=0.005)
    # The bots finished: the payment page settled every payout (the participants export's column).
    assert shown["settled_participants"] == n
    assert shown["settled_payout"] == pytest.approx(sum(float(row["payout"]) for row in participants), abs=0.005)
    assert shown["settled_payout"] <= shown["payout_at_most"]


def check_agents(shown: dict, calls: list[dict]):
    statuses = Counter(row["status"] for row in calls)
    assert shown["calls"] == len(calls) and shown["calls_by_status"] == dict(statuses)
    assert shown["answered_calls"] == statuses["ok"] and shown["failed_calls"] == len(calls) - statuses["ok"]
    latencies = [float(row["time_done"]) - float(row["time_sent"]) for row in calls if row["status"] == "ok"]
    assert shown["latency_n"] == len(latencies)
    # numpy's default quantile is R's type 7, as lab.experimenter.dashboard.percentile (checked against R's
    # quantile(x, type = 7) in tests/test_experimenter_view_units.py)
    assert shown["latency_p50"] == pytest.approx(float(np.quantile(latencies, 0.5)), abs=1e-6)
    assert shown["latency_p95"] == pytest.approx(float(np.quantile(latencies, 0.95)), abs=1e-6)
    assert shown["spent"] == pytest.approx(sum(float(row["cost"] or 0) for row in calls), abs=1e-6)


@pytest.mark.server
def test_dashboard_numbers_match_a_recount_from_the_exports(project_copy, database_url, tmp_path):
    database = database_url or "sqlite:///db.sqlite3"
    codes = {}
    for config, participants, overrides in SESSIONS:
        result = run_bots(project_copy, config, participants, {"rounds_per_game": ROUNDS, **overrides},
                          database_url=database, export_dir=tmp_path / config,
                          database="lab")  # kept in the project's database: the dashboards are read from it
        codes[config] = completed_session_code(result)
    shown_all = processes.run(
        [PYTHON, "-c", DASHBOARDS, *codes.values()], cwd=project_copy, capture_output=True, text=True, timeout=300,
        env=lab_env(database, LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS)))
    assert shown_all.returncode == 0, shown_all.stderr[-3000:]
    dashboards = json.loads(shown_all.stdout.strip().splitlines()[-1])

    for config, participants, overrides in SESSIONS:
        code, folder = codes[config], tmp_path / config
        shown = dashboards[code]
        decisions = _csv(folder, "custom_export_decisions", code)
        messages = _csv(folder, "custom_export_messages", code)
        with_agents = not config.startswith("hh")
        for game in protocol.GAMES:
            check_game(shown["games"][game], recount_game(decisions, messages, game), with_agents, game == "WC")
        check_earnings(shown["earnings"], decisions, _csv(folder, "custom_export", code))
        # Failed quiz attempts per participant (the quiz's export: one row per attempt).
        failed = Counter({row["participant_code"]: 0 for row in _csv(folder, "custom_export", code)})
        for row in _csv(folder, "custom_export", code, app="instructions"):
            failed[row["participant_code"]] += row["passed"] in ("0", "False")
        assert {p["code"]: p["quiz_failed"] for p in shown["progress"]["participants"]} == dict(failed)
        if with_agents:
            check_agents(shown["agents"], _csv(folder, "custom_export_llm_calls", code))
        else:
            assert shown["agents"] is None
            # 4 people, 3 rounds: 2 pairs a round, 6 pair-rounds a game, each counted once.
            assert shown["games"]["WC"]["pairs_total"] == 2 * ROUNDS

    slow = dashboards[codes["hf_uninformed_woc_first"]]
    assert slow["agents"]["calls_by_status"].get("timeout"), "the slow agents' decisions fell back"
    assert set(slow["agents"]["fallbacks_by_reason"]) == set(slow["games"]["WC"]["agent_fallbacks"])
