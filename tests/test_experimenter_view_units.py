"""Units of the experimenter's view without a server: the dashboard's statistics, the manifest's
reading and the pooling guard (the agreement proxy's reading: tests/test_proposals.py; the rates'
Wilson interval: tests/test_intervals.py)."""

import csv
import json

import pytest

from analysis import manifest
from lab.experimenter.dashboard import percentile


def test_latency_percentiles_match_r_type_7():
    latencies = [0.81, 1.2, 2.95, 0.4, 1.7, 3.3, 0.95, 1.05]
    # R: x <- c(0.81, 1.2, 2.95, 0.4, 1.7, 3.3, 0.95, 1.05); quantile(x, c(0.5, 0.95), type = 7)
    #    -> 1.1250 3.1775
    assert percentile(latencies, 0.5) == pytest.approx(1.1250)
    assert percentile(latencies, 0.95) == pytest.approx(3.1775)
    assert percentile([], 0.5) is None
    assert percentile([2.0], 0.95) == 2.0


def _manifest(code, **changes):
    base = dict(
        session_code=code, treatment="H-F", num_participants=12, rounds_per_game=10, message_max_chars=300,
        stage_limits={"message_1": 60.0, "decision": 40.0}, payoff_table={"AA": [70, 70], "BB": [40, 40]},
        payment={"participation_fee": 15.0}, prompts_sha256="abc", packages={"otree": "6.0.15"},
        project_version="1234567890abcdef", started_at=1.7e9, ended_at=1.7e9 + 3600,
        model_settings={"provider": "openai", "model": "gpt-4o", "temperature": None, "max_retries": 3},
    )
    base.update(changes)
    return base


def test_sessions_of_one_protocol_pool_and_others_are_refused():
    same = {"a": _manifest("a"), "b": _manifest("b", treatment="H-S", project_version="other",
                                                  model_settings={"provider": "openai", "model": "gpt-4o",
                                                                  "temperature": None, "max_retries": 5})}
    same["h"] = _manifest("h", treatment="H-H", model_settings=None)
    assert manifest.check_poolable(same) == []  # treatment, software, retries and H-H's no-model: poolable

    mixed = dict(same, c=_manifest("c", stage_limits={"message_1": 45.0, "decision": 40.0}),
                 d=_manifest("d", model_settings={"provider": "anthropic", "model": "claude"}))
    with pytest.raises(manifest.MixedProtocols) as refusal:
        manifest.check_poolable(mixed)
    message = str(refusal.value)
    assert "stage_limits" in message and "model_settings" in message and "--allow-mixed-protocols" in message
    assert len(manifest.check_poolable(mixed, allow_mixed=True)) == 2


def test_manifest_csv_is_read_from_a_folder_and_shown(tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    entries = _manifest("s1")
    with (folder / "payment_custom_export_manifest_s1.csv").open("w", newline="", encoding="utf8") as fp:
        writer = csv.writer(fp)
        writer.writerow(["session_code", "key", "value"])
        for key, value in entries.items():
            writer.writerow(["s1", key, json.dumps(value)])
    (folder / "unrelated.csv").write_text("a,b\n1,2\n", encoding="utf8")
    found = manifest.load_manifests([folder])
    assert found == {"s1": entries}
    line = manifest.summary_lines(found)[0]
    assert line.startswith("s1: H-F, 12 participants, 10 rounds") and "openai/gpt-4o" in line
    report = tmp_path / "report.html"
    report.write_text("<html><body><h1>Analysis report</h1><p>rest</p></body></html>", encoding="utf8")
    manifest.add_to_report(report, found, [])
    text = report.read_text(encoding="utf8")
    assert text.index("id='manifest'") < text.index("rest") and "one protocol" in text
    assert "No manifest" in manifest.report_html({}, [])


class _Session:
    def __init__(self, vars=None, config=None):
        self.vars, self.config = vars or {}, config or {}


def test_model_check_status_shows_a_recorded_check_or_not_run():
    from lab.experimenter.dashboard import model_check_status

    assert model_check_status(_Session()) == "not run"
    assert model_check_status(_Session(vars={"model_check": "passed 2026-12-01"})) == "passed 2026-12-01"
    assert model_check_status(_Session(vars={"model_check": {"status": "failed", "detail": "401"}})) == "failed"


MID_SESSION = """
import json, os, sys, time
sys.path.insert(0, os.environ["LAB_BENCH_DIR"])
from otree.main import setup
setup()
import otree.session
from otree.database import session_scope
import dashboard as bench
from lab.experimenter.dashboard import session_dashboard
from game_with_chat import LlmCall, Player as ChatPlayer
from instructions import Player as QuizPlayer
with session_scope():  # a design of one game: its game only, one norm estimate each
    s = otree.session.create_session("test_one_chat_hf_informed_wc_only", num_participants=2,
                                     modified_session_config_fields=dict(rounds_per_game=3, llm_provider="simulated"))
    bench.fill_session(s, 2, games=("game_with_chat",))
    one_game = session_dashboard(s)
    print("ONE_GAME " + json.dumps(dict(games=list(one_game["games"]), earnings=one_game["earnings"])))
with session_scope():
    s = otree.session.create_session("hf_informed_wc_first", num_participants=9,
                                     modified_session_config_fields=dict(rounds_per_game=3, llm_provider="simulated"))
    bench.fill_session(s, 2, games=("game_with_chat",))
    now = int(time.time())
    # Four calls that failed at the stage limit (40 s): not answers, so not in the latency.
    for player in ChatPlayer.objects_filter(session=s, round_number=1)[:4]:
        LlmCall.create(player=player, session_code=s.code, call_id=f"failed-{player.id}", agent_id=player.associate_code,
                       round_number=1, turn="decision", attempt=2, provider="openai", model="gpt-4o", status="timeout",
                       time_sent=now - 100, time_done=now - 60, cost=0.0)
    quiz = {7: (3, 20), 8: (1, 400), 9: (1, 30)}  # failed attempts, seconds on the quiz page
    for pp in s.get_participants():
        pp._current_app_name, pp._round_number = "game_with_chat", 3
        if pp.id_in_session in quiz:
            failed, seconds = quiz[pp.id_in_session]
            pp._current_app_name, pp._round_number, pp._current_page_name = "instructions", 1, "Quiz"
            pp._last_page_timestamp = now - seconds
            QuizPlayer.objects_get(participant=pp).quiz_attempts = failed
        elif pp.id_in_session <= 4:  # arrived at round 3's start; participant 2 closed the tab there
            pp._current_page_name, pp.is_on_wait_page = "RoundStart", True
            pp._waitpage_is_connected = pp.id_in_session != 2
            pp._last_page_timestamp = now - 10 * pp.id_in_session
        else:  # still on round 2's result; participant 6 for 10 minutes
            pp._round_number, pp._current_page_name = 2, "Result"
            pp._last_page_timestamp = now - (600 if pp.id_in_session == 6 else 5)
    print(json.dumps(session_dashboard(s), default=str))
"""


@pytest.mark.server
def test_dashboard_mid_session_shows_who_holds_the_round_start(project_copy):
    from tests import processes
    from tests.lab_server import PROJECT, PYTHON, lab_env

    result = processes.run([PYTHON, "-c", MID_SESSION], cwd=project_copy, capture_output=True, text=True,
                           timeout=300, env=lab_env(OTREE_IN_MEMORY="1", LAB_MAX_ROUNDS_PER_GAME="3",
                                                        LAB_BENCH_DIR=str(PROJECT / "bench"), LAB_TEST_EXPERIMENTS="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    one_game = json.loads(result.stdout.split("ONE_GAME ", 1)[1].splitlines()[0])
    assert one_game["games"] == ["WC"] and one_game["earnings"]["norm_estimates"] == 1
    assert one_game["earnings"]["norm_bonuses_at_most"] == 2 * 1 * 10.0  # of two participants who opened their link
    data = json.loads(result.stdout.strip().splitlines()[-1])
    progress = data["progress"]
    codes = {p["id"]: p["code"] for p in progress["participants"]}
    hold = progress["round_start_hold"]
    assert hold["round"] == 3 and hold["waiting"] == 4 and hold["held_seconds"] >= 40
    assert sorted(hold["held_by"]) == sorted(codes[i] for i in (5, 6, 7, 8, 9))
    assert progress["closed_tabs"] == [codes[2]]
    assert progress["idle"] == [codes[6], codes[8]]
    assert {s["stage"]: s["participants"] for s in progress["stages"]} == {
        "game_with_chat r3 RoundStart": 4, "game_with_chat r2 Result": 2, "instructions r1 Quiz": 3}
    # Stuck in the quiz: 3 failed attempts (participant 7), or 5 minutes on it (8); not 9.
    assert progress["stuck_in_quiz"] == [codes[7], codes[8]]
    assert [p["quiz_failed"] for p in progress["participants"]][6:] == [3, 1, 1]
    wc = data["games"]["WC"]
    assert wc["decisions"] == [9, 9, 0] and wc["humans_timed_out"]["count"][2] is None  # round 3: a gap
    assert wc["human_cooperation"]["trials"] == [9, 9, None]
    agents = data["agents"]
    assert agents["calls"] == 9 * 2 * 3 + 4 and agents["failed_calls"] == 4
    assert agents["calls_by_status"] == {"ok": 54, "timeout": 4}
    # Latency of the 54 answered calls (0.8-3.0 s): the four 40 s failures are counted apart.
    assert agents["latency_n"] == 54 and agents["latency_p95"] <= 3.0
    assert data["earnings"]["participants"] == 9
    assert [w["round"] for w in data["round_start_waits"]] == [2]  # round 1's start has no previous page


def test_sessions_of_different_experiments_are_never_pooled():
    import experiment_design as ed

    def ran(name):
        experiment = ed.load(ed.EXPERIMENTS_DIR / f"{name}.toml")
        return {"name": experiment.name, "file": f"experiments/{name}.toml", "text_sha256": experiment.text_sha256,
                "design_sha256": experiment.canonical_hash, "text": experiment.text}

    # a session recorded before experiment files ran the paper's design: it pools with the paper's
    paper = {"old": _manifest("old"), "new": _manifest("new", experiment=ran("paper"))}
    assert manifest.check_poolable(paper) == []
    mixed = dict(paper, hunt=_manifest("hunt", experiment=ran("stag_hunt")))
    for allow_mixed in (False, True):
        with pytest.raises(manifest.MixedExperiments) as refusal:
            manifest.check_poolable(mixed, allow_mixed=allow_mixed)
        message = str(refusal.value)
        assert "never pooled" in message and "stag_hunt (design " in message and "in hunt" in message
        assert "paper (design " in message and "in new, old" in message
    # the same design under another file's name is the same experiment; an unreadable record is not
    renamed = dict(paper["new"]["experiment"], name="paper_copy")
    assert manifest.check_poolable(dict(paper, copy=_manifest("copy", experiment=renamed))) == []
    unreadable = {"name": "gone", "file": "experiments/gone.toml", "error": "cannot be read"}
    with pytest.raises(manifest.MixedExperiments, match="gone \\(design unreadable\\)"):
        manifest.check_poolable(dict(paper, gone=_manifest("gone", experiment=unreadable)))
