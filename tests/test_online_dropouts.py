"""Dropouts in online sessions (lab/online/), on the production server, SQLite and PostgreSQL.

- H-H, stand_in = agent: one participant stops answering in round 1 (their tab is gone); oTree's
  timeout worker submits their pages; at the second timed-out form page they are dropped; an
  agent stand-in plays their seat from the next stage on, through the agent runtime (its calls in
  the llm_calls export). Every other participant finishes without waiting for them; in every
  export the stand-in's rows are flagged ``stand_in``, the partners' ``partner_stand_in``; the
  dropped participant's later pages are skipped and the participants export says why and when;
  the dashboard's counts are the exports' recount; the informed partner is told of the stand-in.
- The label-uninformed session is blind: the partner's pages look as they do to everyone else.
- stand_in = none: the partner finishes the pair-round alone (the seat's choice random, flagged).
- H-F: the dropped participant's agents are not left running, the other participant finishes.
- A closed tab is dropped by the server itself (nobody else acts), past the session's grace: in a
  lobby cohort (the stand-in plays the seat, the partner's round starts), and in the lobby (never
  seated in a cohort).
- Everyone arrives by the study link and waits in the lobby (H-H) until their cohort forms;
  completion codes and outcomes (timed_out, partner_dropped, completed) are checked.
- The experimenter's "mark dropped" drops a participant of an online session (login required).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import pytest
import requests

import protocol
from tests import processes
from tests.admin_client import AUTH_ENV, AdminClient
from tests.http_participant import PAGE_RE, WAIT_PAGES, HttpParticipant, PageSockets
from tests.test_online_entry import CODES

TITLE = re.compile(r"<title>(.*?)</title>", re.S)

STAGES = dict(message_1_seconds=4, read_1_seconds=3, message_2_seconds=4, read_2_seconds=3, decision_seconds=4,
              result_seconds=3)
ONLINE = dict(online=True, rounds_per_game=2, language="en", llm_provider="simulated", llm_simulated_latency=0,
              dropout_after_timeouts=2, dropout_closed_tab_seconds=600,
              prolific_completion_codes=",".join(f"{k}={v}" for k, v in CODES.items()), **STAGES)
STUDY = "65f0e1d2c3b4a59687786950"


def study_link(session: dict, number: int) -> str:
    """The study link as Prolific fills it in for its ``number``-th participant."""
    return (f"{session['session_wide_url']}?PROLIFIC_PID=pid{number:021d}&STUDY_ID={STUDY}"
            f"&SESSION_ID=sub{number:021d}")


class Stop(Exception):
    pass


class Recording(HttpParticipant):
    """An HTTP participant that keeps each page's HTML (what the person would have seen)."""

    def __post_init__(self):
        super().__post_init__()
        self.html: dict = {}

    def _request(self, method, url, page, **kwargs):
        response = super()._request(method, url, page, **kwargs)
        self.html[response.url] = response.text
        return response


def leaves_at(page_name: str, times: int = 1):
    """on_page: the participant closes their tab on reaching ``page_name`` for the ``times``-th time
    (no more requests)."""
    seen = []

    def on_page(participant, page, index):
        if page == page_name:
            seen.append(index)
            if len(seen) == times:
                raise Stop()
    return on_page


def play_all(server, session: dict, leave_page: str = "Message1", timeout: float = 400, times: int = 1,
             on_stop=None, think=lambda page: 0.0):
    """Everyone of the session arrives by the study link and plays, each page's socket open as in
    a browser; the first of them closes their tab at ``leave_page``. Returns ({participant code:
    player}, the dropout's code)."""
    numbers = range(len(session["participants"]))
    tabs = PageSockets(server.base_url)
    players = [Recording(server.base_url, "", entry_url=study_link(session, number),
                         on_page=leaves_at(leave_page, times) if number == 0 else None,
                         think_seconds=think if number else (lambda page: 0.0), page_sockets=tabs) for number in numbers]
    errors = {}

    def run(player):
        try:
            player.play(timeout=timeout)
        except Stop:
            tabs.close(player.code)
            if on_stop:
                on_stop(player.code)
        except Exception as error:  # noqa: BLE001  reported below
            errors[player.code] = error

    threads = [threading.Thread(target=run, args=(p,)) for p in players]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tabs.close_all()
    assert not errors, errors
    return {player.code: player for player in players}, players[0].code


def exports(server, code):
    return {name: server.export("payment", f"custom_export_{name}", code) if name != "participants" else
            server.export("payment", "custom_export", code) for name in ("decisions", "messages", "llm_calls",
                                                                           "participants")}


def exports_once(server, code, ready, seconds: float = 60) -> dict:
    """The exports once ``ready(exports)`` holds (the server acts by itself: timeouts, closed tabs)."""
    deadline = time.monotonic() + seconds
    while True:
        data = exports(server, code)
        if ready(data) or time.monotonic() > deadline:
            return data
        time.sleep(1)


@pytest.mark.server
def test_hh_dropout_stand_in_everyone_finishes_and_flags_are_right(lab_server, database_url, tmp_path):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME="2")
    session = server.create_session("hh_informed_wc_first", 4, **ONLINE)
    code = session["code"]
    # The four form one cohort in the lobby; one of them closes their tab at the first message.
    players, dropout = play_all(server, session)
    codes = list(players)
    remaining = [c for c in codes if c != dropout]
    assert all(players[c].done for c in remaining)
    # The dropped participant's outcome, and the others' completion codes on their exit page.
    assert all(players[c].completion_code == CODES["completed"] for c in remaining)
    # Nobody waited for the one who left past a stage limit plus the worker's margin.
    for c in remaining:
        assert max(players[c].waited.values()) < 60, players[c].waited

    data = exports(server, code)
    participants = {row["participant_code"]: row for row in data["participants"]}
    assert participants[dropout]["dropped_reason"] == "timeouts" and float(participants[dropout]["dropped_at"]) > 0
    assert all(participants[c]["dropped_reason"] == "" for c in remaining)
    assert participants[dropout]["online_outcome"] == "timed_out" and participants[dropout]["prolific_pid"]
    assert all((participants[c]["online_outcome"], participants[c]["completion_code"]) == ("completed", CODES["completed"])
               for c in remaining)

    decisions = data["decisions"]
    stand_in = [d for d in decisions if d["stand_in"] == "True"]
    # Every round of the dropped seat but none it decided itself: 2 games x 2 rounds, all played by the stand-in
    # (it left at message 1 of round 1).
    assert len(stand_in) == 4, stand_in
    assert {d["player_code"] for d in stand_in} == {dropout}
    assert all(d["player_kind"] == "agent" and d["persona"] == "fair" and d["dropout_rule"] == "stand_in"
               for d in stand_in)
    assert not [d for d in decisions if d["player_code"] == dropout and d["stand_in"] == "False"]
    partners = [d for d in decisions if d["partner_stand_in"] == "True"]
    assert len(partners) == 4 and all(d["player_kind"] == "human" and d["associate_code"] == dropout
                                      for d in partners)
    # Both sides of a stand-in pair-round share its conversation id, and their choices and payoffs agree.
    by_conversation = {d["conversation_id"]: d for d in stand_in}
    for d in partners:
        other = by_conversation[d["conversation_id"]]
        assert (d["associate_choice"], d["associate_payoff"]) == (other["choice"], other["payoff"])
    assert all(d["stand_in"] == d["partner_stand_in"] == "False" for d in decisions
               if d["conversation_id"] not in by_conversation)
    humans = [d for d in decisions if d["player_kind"] == "human"]
    assert Counter(d["player_code"] for d in humans) == {c: 4 for c in remaining}

    messages = data["messages"]
    flagged = [m for m in messages if m["stand_in"] == "True"]
    assert flagged and all(m["sender_code"] == dropout and m["sender_kind"] == "agent" for m in flagged)
    assert all(m["conversation_id"] in by_conversation for m in flagged)
    assert all(m["receiver_code"] == dropout for m in messages if m["partner_stand_in"] == "True")
    assert all(m["stand_in"] == m["partner_stand_in"] == "False" for m in messages
               if m["conversation_id"] not in by_conversation)
    # The stand-in's turns are model calls on record, charged to the partners it played.
    calls = data["llm_calls"]
    assert calls and {c["participant_code"] for c in calls} == {d["associate_code"] for d in stand_in}
    assert {c["agent_id"] for c in calls} == {dropout}

    # The informed partner was told, on the pages of those pair-rounds and no others.
    for c in remaining:
        noticed = [url for url, html in players[c].html.items() if 'id="lab-stand-in-notice"' in html]
        had_stand_in = any(d["player_code"] == c for d in partners)
        assert bool(noticed) == had_stand_in, (c, noticed)

    # The dashboard says what the exports say.
    dashboard = requests.get(f"{server.base_url}/LabDashboardData/{code}", timeout=60).json()
    online = dashboard["control"]["online"]
    assert [row["code"] for row in online["dropped"]] == [dropout]
    assert online["stand_in_pair_rounds"] == len(by_conversation) == 4
    assert online["alone_pair_rounds"] == 0
    if not database_url:
        analysis_leaves_out_stand_ins(data, tmp_path, excluded=len(by_conversation))


def analysis_leaves_out_stand_ins(data: dict, folder, excluded: int) -> None:
    """The analysis CLI on these exports: stand-in pair-rounds left out and counted, or kept."""
    import csv
    import sys

    exports = folder / "exports"
    exports.mkdir()
    for name, rows in data.items():
        with open(exports / f"{name}.csv", "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    kept_rows = {}
    for flag in ([], ["--include-stand-ins"]):
        report = folder / ("report" + "".join(flag))
        result = processes.run([sys.executable, "-m", "analysis", str(exports), "--out", str(report), *flag],
                               capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
        said = f"{excluded} stand-in pair-rounds {'kept' if flag else 'excluded'}"
        assert said in result.stdout and said in (report / "report.html").read_text(encoding="utf-8")
        with open(report / "tables" / "tidy_decisions.csv", encoding="utf-8") as tidy:
            kept_rows[bool(flag)] = sum(1 for _ in csv.DictReader(tidy))
    assert kept_rows[True] - kept_rows[False] == 2 * excluded, kept_rows


@pytest.mark.server
def test_uninformed_partner_sees_nothing_of_the_stand_in(lab_server):
    server = lab_server("", LAB_MAX_ROUNDS_PER_GAME="2")
    # The stand-in imitates: it plays from round 2 on, the dropped participant's round 1 in its memory.
    session = server.create_session("hh_uninformed_wc_first", 4, **dict(ONLINE, stand_in_persona="imitate"))
    players, dropout = play_all(server, session, times=2)
    codes = [dropout] + [c for c in players if c != dropout]
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    partners = {d["player_code"] for d in decisions if d["partner_stand_in"] == "True"}
    assert partners
    stand_in = [d for d in decisions if d["stand_in"] == "True"]
    assert len(stand_in) == 3 and all(d["persona"] == "fair" and d["player_code"] == codes[0] for d in stand_in)
    assert len([d for d in decisions if d["player_code"] == codes[0] and d["player_kind"] == "human"]) == 1
    for c in codes[1:]:
        assert players[c].done
        assert not [html for html in players[c].html.values() if "lab-stand-in-notice" in html]
    # The same pages, in the same order, with the same titles, as a participant who never met the stand-in
    # (wait pages aside: whether one shows depends on who arrives first, for humans and agents alike).
    def sequence(c):
        shown = []
        for url, html in players[c].html.items():
            match = PAGE_RE.search(url)
            if match and match["page"] not in WAIT_PAGES:
                shown.append((match["page"], TITLE.search(html).group(1).strip()))
        return shown
    assert all(sequence(c) == sequence(codes[1]) for c in codes[2:])


@pytest.mark.server
def test_stand_in_none_partner_finishes_alone(lab_server):
    server = lab_server("", LAB_MAX_ROUNDS_PER_GAME="2")
    session = server.create_session("hh_informed_woc_first", 4, **dict(ONLINE, stand_in="none"))
    players, dropout = play_all(server, session, leave_page="Decision")
    codes = [dropout] + [c for c in players if c != dropout]
    assert all(players[c].done for c in codes[1:])
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    alone = [d for d in decisions if d["dropout_rule"] == "alone"]
    seat = [d for d in alone if d["player_code"] == dropout]
    # The seat's rounds after the drop: a random choice, flagged, that pays the dropped participant nothing.
    assert seat and all((d["timed_out"], d["after_drop"], d["payoff"]) == ("True", "True", "0") for d in seat)
    assert all(d["after_drop"] == "False" for d in decisions if d not in seat)
    assert len(alone) == 2 * len(seat) and not [d for d in decisions if d["stand_in"] == "True"]
    # The partners who finished alone played to the end and leave with the partner-dropped code; the
    # dropped participant's outcome is timed_out, everyone else's completed.
    partners = {d["player_code"] for d in alone if d["player_code"] != dropout}
    assert partners and all(players[c].completion_code == CODES["partner_dropped"] for c in partners)
    assert all(players[c].completion_code == CODES["completed"] for c in codes[1:] if c not in partners)
    rows = {r["participant_code"]: r for r in server.export("payment", "custom_export", session["code"])}
    assert rows[dropout]["online_outcome"] == "timed_out"
    assert all(rows[c]["online_outcome"] == ("partner_dropped" if c in partners else "completed") for c in codes[1:])
    assert all(float(rows[c]["payout"]) > 0 for c in partners)
    # The dropped participant is paid the show-up fee and the points of the rounds they played themselves.
    played = [d for d in decisions if d["player_code"] == dropout and d["dropout_rule"] != "alone"]
    for game in ("WC", "WoC"):
        assert int(rows[dropout][f"points_{game}"]) == sum(int(d["payoff"]) for d in played if d["game"] == game)
    assert float(rows[dropout]["payout"]) == pytest.approx(
        protocol.SHOW_UP_FEE + protocol.CURRENCY_PER_POINT * sum(int(d["payoff"]) for d in played))
    # Everyone else's norm estimate is checked against the others' own choices, not the seat's random ones.
    for c in codes[1:]:
        for game in ("WC", "WoC"):
            others = [d for d in decisions if d["game"] == game and d["player_kind"] == "human"
                      and d["player_code"] != c and d["after_drop"] == "False"]
            rate = 100.0 * sum(d["choice"] == "A" for d in others) / len(others)
            assert int(rows[c][f"norm_true_{game}"]) == protocol.norm_interval_index(rate), (c, game)
    dashboard = requests.get(f"{server.base_url}/LabDashboardData/{session['code']}", timeout=60).json()
    assert dashboard["control"]["online"]["alone_pair_rounds"] == len(seat)
    # The dashboard counts the same humans' decisions as the exports (the seat's after the drop are no one's).
    for game in ("WC", "WoC"):
        assert sum(dashboard["games"][game]["decisions"]) == len(
            [d for d in decisions if d["game"] == game and d["player_kind"] == "human" and d["after_drop"] == "False"])


@pytest.mark.server
def test_hf_dropout_the_other_finishes(lab_server, postgres_url):
    # PostgreSQL only: a drop's database path is the H-H test's, run on both
    server = lab_server(postgres_url, LAB_MAX_ROUNDS_PER_GAME="2")
    session = server.create_session("hf_informed_wc_first", 2, **ONLINE)
    players, dropout = play_all(server, session)
    codes = [dropout] + [c for c in players if c != dropout]
    assert players[codes[1]].done and players[codes[1]].completion_code == CODES["completed"]
    # Online, each participant has agents of their own and waits for nobody: the other may be done before
    # the server has timed out the one who left twice.
    data = exports_once(server, session["code"], lambda data: any(r["dropped_reason"] for r in data["participants"]))
    participants = {row["participant_code"]: row for row in data["participants"]}
    assert participants[codes[0]]["dropped_reason"] == "timeouts"
    assert not [d for d in data["decisions"] if d["stand_in"] == "True" or d["partner_stand_in"] == "True"]
    humans = Counter(d["player_code"] for d in data["decisions"] if d["player_kind"] == "human")
    assert humans[codes[1]] == 4 and humans[codes[0]] <= 1
    # The turn their agent had begun against them was settled at the drop: its call is on record.
    assert [c for c in data["llm_calls"] if c["participant_code"] == codes[0]]


@pytest.mark.server
def test_closed_tab_in_a_cohort_is_dropped_by_the_server_alone(lab_server):
    """One of a cohort closes their tab on the game's intro page: the server drops them past the
    grace, the stand-in plays their seat, and the partner's round starts without them."""
    server = lab_server("", LAB_MAX_ROUNDS_PER_GAME="1")
    session = server.create_session("hh_informed_wc_first", 2, **dict(ONLINE, rounds_per_game=1,
                                                                       dropout_closed_tab_seconds=4))
    code = session["code"]
    left = {}
    players, leaving = play_all(server, session, leave_page="GameIntro", timeout=200,
                                on_stop=lambda c: left.setdefault("at", time.time()))
    staying = next(c for c in players if c != leaving)
    player = players[staying]
    assert player.done and player.completion_code == CODES["completed"]
    assert player.waited.get("RoundStart", 0) < 4 + 10, player.waited
    rows = {r["participant_code"]: r for r in server.export("payment", "custom_export", code)}
    assert (rows[leaving]["dropped_reason"], rows[leaving]["online_outcome"]) == ("closed_tab", "timed_out")
    assert float(rows[leaving]["dropped_at"]) - left["at"] >= 4 - 1.5
    decisions = server.export("payment", "custom_export_decisions", code)
    assert {(d["player_code"], d["stand_in"], d["partner_stand_in"]) for d in decisions} == {
        (staying, "False", "True"), (leaving, "True", "False")}
    # Their pages are skipped: their link now shows the exit page, with the timed-out code.
    back = requests.get(server.start_url(leaving), timeout=30)
    assert "/OnlineExit/" in back.url and f'id="completion-code">{CODES["timed_out"]}<' in back.text


class LeavesTheLobby(HttpParticipant):
    """Waits in the lobby a few seconds, alone, then closes the tab."""

    def wait_in_lobby(self, response, deadline):
        super().wait_in_lobby(response, time.monotonic() + 3)
        raise Stop()


@pytest.mark.server
def test_closed_tab_in_the_lobby_is_never_seated(lab_server):
    """A participant who closes their tab in the lobby is dropped there by the server and never put
    in a cohort; the two who come after form one and finish; nobody has a stand-in."""
    server = lab_server("", LAB_MAX_ROUNDS_PER_GAME="1")
    session = server.create_session("hh_informed_wc_first", 3, **dict(ONLINE, rounds_per_game=1,
                                                                       dropout_closed_tab_seconds=4))
    code = session["code"]
    tabs = PageSockets(server.base_url)
    leaver = LeavesTheLobby(server.base_url, "", entry_url=study_link(session, 0), page_sockets=tabs)
    with pytest.raises(Stop):
        leaver.play(timeout=60)
    tabs.close(leaver.code)
    data = exports_once(server, code, lambda data: any(r["dropped_reason"] for r in data["participants"]), 30)
    rows = {r["participant_code"]: r for r in data["participants"]}
    assert (rows[leaver.code]["dropped_reason"], rows[leaver.code]["online_outcome"]) == ("closed_tab", "timed_out")
    others = [Recording(server.base_url, "", entry_url=study_link(session, n), page_sockets=tabs) for n in (1, 2)]
    threads = [threading.Thread(target=p.play, kwargs=dict(timeout=200)) for p in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tabs.close_all()
    assert all(p.done and p.completion_code == CODES["completed"] for p in others)
    decisions = server.export("payment", "custom_export_decisions", code)
    assert {d["player_code"] for d in decisions} == {p.code for p in others}
    assert all(d["associate_code"] in {p.code for p in others} and d["stand_in"] == d["partner_stand_in"] == "False"
               for d in decisions)
    rows = {r["participant_code"]: r for r in server.export("payment", "custom_export", code)}
    assert rows[leaver.code]["online_outcome"] == "timed_out" and rows[leaver.code]["completion_code"] == ""


@pytest.mark.server
def test_experimenter_marks_dropped_with_the_login(lab_server):
    server = lab_server("", LAB_MAX_ROUNDS_PER_GAME="1", **AUTH_ENV)
    session = server.create_session("hh_informed_wc_first", 2, **dict(ONLINE, rounds_per_game=1))
    code = session["code"]
    admin = AdminClient(server.base_url)
    acted = {}

    def act(dropout):
        # The two have formed their cohort in the lobby; one stops on the game's intro page and the
        # experimenter marks them dropped while the partner waits for the round to start.
        anonymous = requests.post(f"{server.base_url}/LabIntervene/{code}",
                                  data=dict(action="mark_dropped", participant=dropout), timeout=30)
        acted["anonymous"] = anonymous.status_code
        acted["first"] = admin.act(code, "mark_dropped", participant=dropout)
        acted["again"] = admin.act(code, "mark_dropped", participant=dropout)  # dropped already, on the exit page

    # The partner reads the intro a while: they reach the round's start after the drop (their pair's
    # start must count the dropped seat as arrived).
    players, dropout = play_all(server, session, leave_page="GameIntro", timeout=200, on_stop=act,
                                think=lambda page: 4.0 if page == "GameIntro" else 0.0)
    partner = next(c for c in players if c != dropout)
    assert acted["anonymous"] == 401
    assert acted["first"].status_code == 200, acted["first"].text
    # Dropped already (they are on the exit page): refused with the reason, and not recorded.
    again = acted["again"]
    assert again.status_code == 409 and "dropped already" in again.json()["error"], again.text
    assert [(row["action"], row["participant_code"]) for row in admin.interventions(code)] == [("mark_dropped", dropout)]
    rows = {r["participant_code"]: r for r in admin.export("custom_export", code)}
    assert rows[dropout]["dropped_reason"] == "experimenter" and rows[partner]["dropped_reason"] == ""
    assert rows[dropout]["online_outcome"] == "timed_out"
    # The partner played the whole session against the stand-in, and completed it.
    assert players[partner].done and players[partner].completion_code == CODES["completed"]
    decisions = admin.export("custom_export_decisions", code)
    assert {(d["player_code"], d["stand_in"]) for d in decisions} == {(partner, "False"), (dropout, "True")}


@pytest.mark.server
def test_one_message_exchange_stand_in_takes_the_seat_with_no_message_2(lab_server):
    """A perfect-strangers design of one message exchange, online: the stand-in that takes a dropped
    seat goes on to the decision (no second message is waited for), and everyone else finishes.
    SQLite only: the stand-in's database path is the H-H test's, run on both."""
    server = lab_server("", LAB_MAX_ROUNDS_PER_GAME="2", LAB_TEST_EXPERIMENTS="1")  # one_message_strangers.toml
    stages = {key: value for key, value in ONLINE.items() if not key.startswith(("message_2", "read_2"))}
    session = server.create_session("test_one_message_hh_informed_wc_first", 4, **stages)
    # Gone at round 1's decision: dropped at round 2's message 1 (the second timed-out page), so the
    # stand-in takes the seat in the middle of a round, after the seat's only message.
    players, dropout = play_all(server, session, leave_page="Decision")
    remaining = [c for c in players if c != dropout]
    assert all(players[c].done and players[c].completion_code == CODES["completed"] for c in remaining)
    assert not any("Message2" in url for c in remaining for url in players[c].html)

    data = exports(server, session["code"])
    assert {m["stage"] for m in data["messages"]} == {"1"}
    stand_in = [d for d in data["decisions"] if d["stand_in"] == "True"]
    assert len(stand_in) >= 3 and {d["player_code"] for d in stand_in} == {dropout}
    # Each of the stand-in's decisions is the model's answer, in time: none waited for a message 2.
    assert all(d["choice"] in protocol.CHOICES and d["timed_out"] == "False" for d in stand_in), stand_in
    turns = {c["turn"] for c in data["llm_calls"]}
    assert "decision" in turns and "message_2" not in turns, turns
