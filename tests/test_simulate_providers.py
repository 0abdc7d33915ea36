"""The simulation lab with the real agents: the offline simulated model, and the real SDKs
against the local fake server, including a run killed halfway (SIGKILL) and resumed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from agents.simulate import load_config, run_simulation
from agents.simulate.config import SimulationConfig
from agents.simulate.replay import run_replay
from agents.simulate.store import RunStore
from tests import processes
from tests.fake_llm_server import FakeLLMServer, default_reply

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "FAKE_LLM_TEST_KEY"
SMALL_DESIGN = dict(group_size=2, rounds=2, repeats=1, language="en")  # 24 games, 144 calls


def varied_reply(request: dict, api: str) -> str:
    """The paper's format, choice and message drawn from the request: deterministic, not constant."""
    text = default_reply(request)
    digest = int(hashlib.sha256(json.dumps(request.get("messages"), sort_keys=True).encode()).hexdigest(), 16)
    if "I DECIDE TO CHOOSE" in text:
        return text.replace("[A]", f"[{'AB'[digest % 2]}]")
    return text.replace("70!>", f"70! #{digest % 1000}>")


def write_config(path: Path, *, name: str, output_dir: Path, model: dict, **design) -> Path:
    def value(v):
        return json.dumps(v) if not isinstance(v, bool) else str(v).lower()

    lines = [f"{k} = {value(v)}" for k, v in {"name": name, "output_dir": str(output_dir),
                                                **SMALL_DESIGN, **design}.items()]
    lines += ["", "[[models]]"] + [f"{k} = {value(v)}" for k, v in model.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def fake_openai(server: FakeLLMServer, **extra) -> dict:
    # constrained_output off: these tests count the agents' requests; auto would first probe the
    # server's grammar and speed (tests/test_constrained_output.py)
    return {**dict(label="fake-gpt", provider="openai_compatible", model="fake-gpt",
                   base_url=server.base_url_openai, api_key_env=KEY_ENV, concurrency=16,
                   requests_per_minute=100000, constrained_output="off"), **extra}


def decisions_without_times(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "decisions.csv").drop(columns=["decided_at"])


def messages_without_times(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "messages.csv").drop(columns=["stage_started_at", "sent_at"])


# --- the offline simulated model ---------------------------------------------------------------
def test_quick_config_is_valid_and_paper_config_is_the_si_note_4_design():
    quick = load_config(ROOT / "configs" / "simulation_quick.toml")
    assert quick.models[0].config.provider == "simulated"
    paper = load_config(ROOT / "configs" / "simulation_paper.toml")
    assert (paper.group_size, paper.repeats, paper.rounds, paper.self_play) == (10, 5, 10, True)
    assert [m.config.model for m in paper.models] == [
        "gpt-4-0613", "gpt-4o-2024-05-13", "claude-3-5-sonnet-20241022", "gemini-1.5-pro"]


def test_simulated_model_tournament_is_reproducible(tmp_path):
    results = []
    for name in ("one", "two"):  # separate folders, separate caches: the model itself is seeded
        config = load_config(ROOT / "configs" / "simulation_quick.toml", name=name, output_dir=tmp_path,
                             **SMALL_DESIGN)
        results.append(run_simulation(config, show_progress=False, log=lambda s: None))
    assert results[0].games_played == 24 and results[0].calls >= 144 and results[0].failures == 0
    one, two = decisions_without_times(tmp_path / "one"), decisions_without_times(tmp_path / "two")
    pd.testing.assert_frame_equal(one.drop(columns=["session_code", "conversation_id"]),
                                  two.drop(columns=["session_code", "conversation_id"]))
    cooperation = one.groupby("persona")["choice"].apply(lambda c: c.eq("A").mean())
    assert cooperation["cooperative"] > cooperation["selfish"]
    assert (tmp_path / "one" / "figures" / "S22_cooperation.png").exists()


def test_machine_annotation_draws_figure_s23(tmp_path):
    config = load_config(ROOT / "configs" / "simulation_quick.toml", output_dir=tmp_path, **SMALL_DESIGN,
                         annotation={"provider": "openai_compatible", "model": "fake-annotator",
                                     "base_url": "http://unused"})
    with FakeLLMServer(reply='{"p1_preferred": "A", "p2_preferred": "A", "p1_wants_other": "A", '
                             '"p2_wants_other": "A", "agreement": true}') as server:
        config = config.model_copy(update={"annotation": config.annotation.model_copy(
            update={"config": config.annotation.config.model_copy(update={"base_url": server.base_url_openai})})})
        result = run_simulation(config, show_progress=False, log=lambda s: None)
        assert server.request_count == 24  # one per conversation
    annotations = pd.read_csv(result.outputs["annotations"])
    assert len(annotations) == 24 and set(annotations["annotator"]) == {"machine:fake-annotator"}
    assert result.outputs["S23"].exists()


# --- real SDKs against the fake server ------------------------------------------------------------
@pytest.mark.parametrize("provider", ["openai_compatible", "anthropic"])
def test_real_sdks_against_the_fake_server(tmp_path, monkeypatch, provider):
    monkeypatch.setenv(KEY_ENV, "dummy")
    with FakeLLMServer(latency=0.01, reply=varied_reply) as server:
        model = fake_openai(server) if provider == "openai_compatible" else dict(
            label="fake-claude", provider="anthropic", model="fake-claude", base_url=server.base_url_anthropic,
            api_key_env=KEY_ENV, concurrency=16, requests_per_minute=100000)
        config = SimulationConfig(name="run", output_dir=tmp_path, models=[model], **SMALL_DESIGN)
        result = run_simulation(config, show_progress=False, log=lambda s: None)
        assert result.calls == server.request_count == 144 and result.failures == 0
        assert server.peak_in_flight <= 16
        # an identical rerun is served from the cache: nothing reaches the server
        (tmp_path / "run" / "games.jsonl").unlink()
        again = run_simulation(config, show_progress=False, log=lambda s: None)
        assert server.request_count == 144 and again.cache_hits == 144
    calls = pd.read_csv(tmp_path / "run" / "llm_calls.csv")
    assert set(calls["provider"]) == {provider} and calls["input_tokens"].gt(0).all()
    assert set(decisions_without_times(tmp_path / "run")["choice"]) == {"A", "B"}


def test_killed_run_resumes_without_repeating_a_call(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "dummy")
    with FakeLLMServer(latency=0.05, reply=varied_reply) as server:
        model = fake_openai(server, concurrency=8, price_input_per_mtok=1.0, price_output_per_mtok=2.0)
        whole = write_config(tmp_path / "whole.toml", name="whole", output_dir=tmp_path, model=model)
        run_simulation(load_config(whole), show_progress=False, log=lambda s: None)
        uninterrupted_requests = server.request_count
        assert uninterrupted_requests == 144

        server.reset()
        server.set(latency=0.05, reply=varied_reply)
        killed = write_config(tmp_path / "killed.toml", name="killed", output_dir=tmp_path, model=model)
        process = processes.popen([sys.executable, "-m", "agents.simulate", str(killed), "--no-progress"],
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        games = tmp_path / "killed" / "games.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not games.exists() or games.read_text().count("\n") < 8):
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
        played_before = games.read_text().count("\n")
        assert 8 <= played_before < 24
        with sqlite3.connect(tmp_path / "killed" / "cache.sqlite") as db:
            replies = [json.loads(row[0]) for row in db.execute("SELECT reply FROM replies")]
        replies_received = len(replies)
        # the spending log has every reply that arrived (it is written before the cache)
        assert RunStore(tmp_path / "killed").spent() >= sum(r["cost"] for r in replies) - 1e-12
        sent_before = server.request_count

        server.reset()
        server.set(latency=0.05, reply=varied_reply)
        result = run_simulation(load_config(killed), show_progress=False, log=lambda s: None)
        assert result.games_skipped == played_before
        # Every reply received before the kill was served from the cache; only the calls in
        # flight at the kill (sent, never answered) were sent again.
        assert server.request_count == uninterrupted_requests - replies_received
        assert sent_before - replies_received <= 8  # at most the concurrency limit was in flight
    for table in (decisions_without_times, messages_without_times):
        pd.testing.assert_frame_equal(
            table(tmp_path / "whole").drop(columns=["session_code", "conversation_id"]),
            table(tmp_path / "killed").drop(columns=["session_code", "conversation_id"]))


# --- counterfactual replay with the real agent -----------------------------------------------------
def test_replay_of_a_lab_export_with_the_simulated_model(tmp_path):
    from tests.test_simulate_engine import lab_export

    config = load_config(ROOT / "configs" / "simulation_quick.toml", output_dir=tmp_path)
    outputs = run_replay(config, lab_export(tmp_path / "export"), persona="cooperative", show_progress=False)
    comparison = pd.read_csv(outputs["simulated:comparison"])
    assert len(comparison) == 4 and set(comparison["replayed_choice"]) == {"A"}  # cooperative always plays A
    chat = pd.read_csv(outputs["simulated:messages"])
    assert set(chat["source"]) == {"replay"}


# --- the command line -------------------------------------------------------------------------------
def test_cli_estimate_prints_calls_and_cost_and_writes_nothing(tmp_path, capsys):
    from agents.simulate.__main__ import main

    config = write_config(tmp_path / "paper.toml", name="paper", output_dir=tmp_path / "runs",
                          model=dict(label="GPT-4", provider="openai", model="gpt-4-0613"),
                          group_size=10, rounds=10, repeats=5)
    assert main([str(config), "--estimate"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("  GPT-4: 18000 calls"))
    tokens_in, tokens_out = (int(re.search(rf"([\d,]+) {kind}", line).group(1).replace(",", ""))
                             for kind in ("tokens in", "out"))
    assert tokens_out == 18000 * 300  # the stated reply length
    assert f"~${(tokens_in * 30 + tokens_out * 60) / 1e6:.2f}" in line  # gpt-4-0613: $30 / $60 per Mtok
    # Counted from the rendered prompts of the default memory ("round": this round plus the history
    # lines, ~1.4k tokens each), not a flat guess per call.
    assert 1000 < tokens_in / 18000 < 2500 and tokens_in % 18000 != 0
    assert "agents/prices.toml: https://openai.com/api/pricing/, read 2026-11" in line
    assert not (tmp_path / "runs").exists()


def test_cli_runs_the_quick_config(tmp_path, capsys):
    from agents.simulate.__main__ import main

    config = tmp_path / "quick.toml"
    config.write_text((ROOT / "configs" / "simulation_quick.toml").read_text()
                      .replace('output_dir = "sim_runs"', f'output_dir = "{tmp_path}"'))
    assert main([str(config), "--no-progress"]) == 0
    assert "192 games played" in capsys.readouterr().out
    assert main([str(config), "--no-progress"]) == 0  # a rerun: everything already played
    assert "0 games played, 192 resumed" in capsys.readouterr().out
