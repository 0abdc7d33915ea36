"""A new session's groups, round by round, as the design says (SQLite and PostgreSQL).

lab/base/grouping.py regroups each round in one commit where oTree commits once per group; what it
writes must be what oTree's ``set_group_matrix`` writes: every player in exactly one group, the
subsession's groups numbered 1..G with none left empty, ``id_in_group`` 1..k, and the design's
grouping: perfect-stranger pairs in a lab H-H session (a new associate every round, the pair's
``associate_code`` the other's code), a group of one per participant in H-F and online (online
H-H participants are paired when their cohort forms in the lobby).
"""

from __future__ import annotations

import pytest

from tests.test_online_entry import CODES

ROUNDS = 3
PARTICIPANTS = 8
REGROUPED = ("game_with_chat", "game_without_chat")
ONLINE = dict(online=True, stand_in="agent", prolific_completion_codes=",".join(f"{k}={v}" for k, v in CODES.items()),
              llm_provider="openai_compatible", llm_model="fake-gpt", llm_base_url="http://127.0.0.1:9/v1",
              llm_api_key_env="FAKE_LLM_KEY", llm_check_model=False)


def groups_by_round(server, session_code: str, app: str) -> dict[int, list[list[tuple]]]:
    """Per round: the subsession's groups in order of ``id_in_subsession``, each its players as
    (id_in_group, participant code, associate code), checked to be numbered as oTree numbers them."""
    rows = server.query(
        f"SELECT g.round_number, g.id_in_subsession, p.id_in_group, pa.code, "
        f"{'p.associate_code' if app in REGROUPED else 'NULL'}, g.subsession_id = p.subsession_id "
        f"FROM {app}_group g LEFT JOIN {app}_player p ON p.group_id = g.id "
        f"LEFT JOIN otree_participant pa ON pa.id = p.participant_id "
        f"WHERE g.session_id = (SELECT id FROM otree_session WHERE code = '{session_code}') "
        f"ORDER BY g.round_number, g.id_in_subsession, p.id_in_group")
    ungrouped = server.query(
        f"SELECT COUNT(*) FROM {app}_player WHERE group_id IS NULL AND session_id = "
        f"(SELECT id FROM otree_session WHERE code = '{session_code}')")
    assert ungrouped == [(0,)], f"{app}: players in no group"
    rounds: dict[int, dict[int, list[tuple]]] = {}
    for round_number, group, id_in_group, code, associate, same_subsession in rows:
        assert code is not None, f"{app} round {round_number}: group {group} is empty"
        assert same_subsession, f"{app} round {round_number}: a player grouped across subsessions"
        rounds.setdefault(round_number, {}).setdefault(group, []).append((id_in_group, code, associate))
    for round_number, groups in rounds.items():
        assert sorted(groups) == list(range(1, len(groups) + 1)), f"{app} round {round_number}: {sorted(groups)}"
        for members in groups.values():
            assert [m[0] for m in members] == list(range(1, len(members) + 1)), members
    return {round_number: [groups[g] for g in sorted(groups)] for round_number, groups in rounds.items()}


def check_all_apps(server, session: dict, pairs: bool) -> None:
    codes = {p["code"] for p in session["participants"]}
    for app in REGROUPED:
        rounds = groups_by_round(server, session["code"], app)
        assert sorted(rounds) == list(range(1, ROUNDS + 1))
        met: dict[str, set] = {code: set() for code in codes}
        for round_number, groups in rounds.items():
            assert {m[1] for members in groups for m in members} == codes
            if not pairs:
                assert all(len(members) == 1 for members in groups), f"{app} round {round_number}"
                continue
            assert all(len(members) == 2 for members in groups), f"{app} round {round_number}"
            for (_, first, first_associate), (_, second, second_associate) in groups:
                assert (first_associate, second_associate) == (second, first)
                met[first].add(second)
                met[second].add(first)
        if pairs:  # perfect strangers: a new associate every round
            assert all(len(others) == ROUNDS for others in met.values()), met
    for app in ("instructions", "questionnaire", "payment"):
        groups_by_round(server, session["code"], app)
    payment = groups_by_round(server, session["code"], "payment")[1]
    if session.get("online"):  # a group of one each until the cohort's payment groups it
        assert all(len(members) == 1 for members in payment)


@pytest.mark.server
def test_each_round_is_grouped_as_the_design_says(lab_server, database_url):
    server = lab_server(database_url, LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS), FAKE_LLM_KEY="dummy-key")
    lab_hh = server.create_session("hh_informed_wc_first", PARTICIPANTS, rounds_per_game=ROUNDS)
    check_all_apps(server, lab_hh, pairs=True)
    lab_hf = server.create_session("hf_informed_wc_first", PARTICIPANTS, rounds_per_game=ROUNDS)
    check_all_apps(server, lab_hf, pairs=False)
    for config in ("hh_informed_wc_first", "hf_informed_wc_first"):
        online = server.create_session(config, PARTICIPANTS, rounds_per_game=ROUNDS, **ONLINE)
        check_all_apps(server, {**online, "online": True}, pairs=False)
    assert "Traceback" not in server.log(), server.log()[-3000:]
