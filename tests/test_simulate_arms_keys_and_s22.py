"""The simulation lab on messy runs: two arms of one model stay two rows (grouped by the config's
label), an unset key of an OpenAI-compatible server is refused before any call (a local server
without a key still runs), Fig. S22 shows n and per-agent intervals and says what stopped the
run, and empty tables are written with their header."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agents.simulate import BudgetExhausted, run_simulation
from agents.simulate.config import SimulationConfig
from analysis import analyse, load_exports, stats
from tests.fake_llm_server import FakeLLMServer
from tests.test_simulate_providers import KEY_ENV, SMALL_DESIGN, fake_openai, varied_reply, write_config

# Two arms of the same provider model: a temperature sweep of the offline model.
TWO_ARMS = [{"provider": "simulated", "label": "sim-t0", "temperature": 0.0, "simulated_seed": 1},
            {"provider": "simulated", "label": "sim-t1", "temperature": 1.0, "simulated_seed": 2}]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    config = SimulationConfig(name="sweep", output_dir=tmp_path_factory.mktemp("runs"), models=TWO_ARMS,
                              **SMALL_DESIGN)
    run_simulation(config, show_progress=False, log=lambda s: None)
    return config


def test_two_arms_of_one_model_are_two_rows_of_the_analysis(sweep):
    calls = pd.read_csv(sweep.run_dir / "llm_calls.csv")
    assert calls["model"].nunique() == 1  # the provider's name is the same for both arms
    section = next(s for s in analyse(load_exports(sweep.run_dir)).sections if s.key == "simulation")
    rates = section.tables["cooperation_rates"]
    assert set(rates["model"]) == {"sim-t0", "sim-t1"}
    decisions = pd.read_csv(sweep.run_dir / "decisions.csv")
    for (label, persona), row in rates.set_index(["model", "persona"]).iterrows():
        own = decisions[(decisions["model"] == label) & (decisions["persona"] == persona)]
        assert row["decisions"] == len(own)
        assert row["mean"] == pytest.approx(own["choice"].eq("A").mean())  # balanced: every agent 2 rounds
    assert set(section.tables["pairwise_WC"]["model"]) == {"sim-t0", "sim-t1"}
    assert set(section.tables["cooperation_by_associate"]["model"]) == {"sim-t0", "sim-t1"}


def test_an_agent_is_one_agent_of_one_repeat_and_intervals_are_over_agents(tmp_path):
    from analysis.simulation import agent_rates, summarise

    config = SimulationConfig(name="repeats", output_dir=tmp_path, models=TWO_ARMS[:1],
                              **{**SMALL_DESIGN, "repeats": 2})
    run_simulation(config, show_progress=False, log=lambda s: None)
    decisions = pd.read_csv(config.run_dir / "decisions.csv")
    rates = agent_rates(decisions)
    # fair-a0 plays in three matchups (fair-vs-cooperative, fair-vs-selfish, fair self-play) and two
    # repeats, each with fresh agents: six agents, each with its 2 rounds.
    assert len(rates[rates["agent_id"] == "fair-a0"]) == 6 and (rates["decisions"] == 2).all()
    summary = summarise(rates, ["model", "persona"]).set_index("persona")
    fair = rates.loc[rates["persona"] == "fair", "cooperation_rate"]
    assert summary.loc["fair", "agents"] == len(fair) == 2 * (2 + 2 + 4)  # groups of 2; self-play has two
    assert (summary.loc["fair", "ci_low"], summary.loc["fair", "ci_high"]) == stats.rate_interval(fair)


def test_figure_s22_shows_n_and_the_agents_intervals(sweep):
    from agents.simulate.figures import s22_figure

    decisions = pd.read_csv(sweep.run_dir / "decisions.csv")
    figure = s22_figure(decisions, ["sim-t0", "sim-t1"])
    panel_a = figure.axes[0]
    labels = [t.get_text() for t in panel_a.texts]
    fair_agents = int(((decisions["model"] == "sim-t0") & (decisions["persona"] == "fair")).sum() / 2)
    assert f"n={fair_agents}" in labels and len(labels) == 6  # 3 personas x 2 arms
    # The bars are the mean of the agents' rates; the error bar is their interval over the agents
    # (Wilson with n = agents), not over the pooled decisions.
    from analysis.simulation import agent_rates

    rates = agent_rates(decisions)
    fair = rates.loc[(rates["model"] == "sim-t0") & (rates["persona"] == "fair"), "cooperation_rate"]
    low, high = stats.rate_interval(fair)
    bar = panel_a.patches[1]  # series sim-t0, second persona group (fair)
    assert bar.get_height() == pytest.approx(fair.mean())
    segments = [line for collection in panel_a.collections for line in collection.get_segments()]
    assert any(np.allclose(segment[:, 1], [low, high]) for segment in segments if len(segment) == 2)


def test_the_s22_note_says_whether_the_budget_or_the_provider_stopped_the_run(tmp_path, monkeypatch):
    from agents.simulate.figures import exclusion_note

    assert exclusion_note(5, {"budget", "ok"}) == "5 games excluded (the budget was spent: raise budget_usd and rerun)"
    assert exclusion_note(3, {"provider_error", "ok"}) == "3 games excluded (provider failures: rerun to play them)"
    assert "the budget was spent, and provider failures" in exclusion_note(2, {"budget", "timeout"})
    # A run the budget stopped: the figure's note says budget, not provider failures.
    monkeypatch.setenv(KEY_ENV, "dummy")
    drawn = {}

    def keep_note(decisions, path, model_order=None, note="", cooperative_choice="A"):
        drawn["note"] = note
        path.write_bytes(b"")
        return path

    monkeypatch.setattr("agents.simulate.figures.figure_s22", keep_note)
    with FakeLLMServer(reply=varied_reply) as server:
        # As tests/test_simulate_money_and_failures.py: the estimate ($2.16) starts the run; the
        # longer replies cost ~$3.06 a round (72 calls), so round 1 is played and round 2 is not.
        model = fake_openai(server, concurrency=1, price_input_per_mtok=0.0, price_output_per_mtok=1000.0,
                            max_tokens=100)
        config = SimulationConfig(name="run", output_dir=tmp_path, models=[model], budget_usd=4.5,
                                  estimated_output_tokens=10, **SMALL_DESIGN)
        with pytest.raises(BudgetExhausted):
            run_simulation(config, show_progress=False, log=lambda s: None)
    assert "budget was spent" in drawn["note"] and "provider failures" not in drawn["note"]


def test_an_unset_key_of_an_openai_compatible_server_is_refused_before_any_call(tmp_path, monkeypatch, capsys):
    from agents.simulate.__main__ import main

    monkeypatch.delenv("I23_UNSET_KEY", raising=False)
    with FakeLLMServer(reply=varied_reply) as server:
        config = write_config(tmp_path / "c.toml", name="run", output_dir=tmp_path,
                              model=fake_openai(server, api_key_env="I23_UNSET_KEY"))
        assert main([str(config), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "I23_UNSET_KEY" in err and "Traceback" not in err
        assert server.request_count == 0
        # A local server that needs no key: no api_key_env, a placeholder key is sent, the run works.
        local = {k: v for k, v in fake_openai(server).items() if k != "api_key_env"}
        config = write_config(tmp_path / "local.toml", name="local", output_dir=tmp_path, model=local)
        assert main([str(config), "--no-progress"]) == 0
        assert server.request_count > 0


def test_empty_tables_of_the_simulation_lab_have_their_header(tmp_path, monkeypatch):
    """Every game failed: decisions.csv and messages.csv are there, header only, and read back."""
    from agents.simulate.tables import DECISION_COLUMNS, MESSAGE_COLUMNS

    monkeypatch.setenv(KEY_ENV, "dummy")
    with FakeLLMServer(mode="500") as server:
        config = SimulationConfig(name="down", output_dir=tmp_path, models=[fake_openai(server, max_retries=0)],
                                  **SMALL_DESIGN)
        result = run_simulation(config, show_progress=False, log=lambda s: None)
    assert result.games_excluded == result.plan.games_total
    for name, columns in (("decisions", DECISION_COLUMNS), ("messages", MESSAGE_COLUMNS)):
        table = pd.read_csv(config.run_dir / f"{name}.csv")
        assert table.empty and list(table.columns) == columns
    # and the analysis reads the run folder without a problem about them
    exports = load_exports(config.run_dir)
    assert not [p for p in exports.problems if p.level == "error"]


def test_random_fallbacks_are_never_counted_as_behaviour_and_the_figure_says_how_many(sweep, tmp_path):
    """A decision the model gave no usable answer for is the system's random choice (flagged
    timed_out): the rates, the summaries and S22 count only the decisions the models made, and
    the figure states n and the fallbacks per model."""
    from agents.simulate.figures import s22_figure
    from agents.simulate.tables import decision_fallbacks
    from analysis.simulation import agent_rates, summarise

    decisions = pd.read_csv(sweep.run_dir / "decisions.csv")
    agents = decisions[(decisions["player_kind"] == "agent") & (decisions["model"] == "sim-t0")]
    random_ones = agents.index[: len(agents) // 4]  # a quarter fell back: their choices B, flagged
    decisions.loc[random_ones, ["timed_out", "choice"]] = [True, "B"]
    rates = agent_rates(decisions)
    sim0 = rates[rates["model"] == "sim-t0"]
    assert sim0["fallbacks"].sum() == len(random_ones)
    assert sim0["decisions"].sum() == len(agents) - len(random_ones)
    made = decisions.loc[agents.index.difference(random_ones)]
    assert sim0["cooperations"].sum() == made["choice"].eq("A").sum()  # no random B counted
    summary = summarise(rates, ["model"]).set_index("model")
    assert summary.loc["sim-t0", "fallbacks"] == len(random_ones)
    figure = s22_figure(decisions, ["sim-t0", "sim-t1"])
    note = figure.texts[-1].get_text()
    assert (f"sim-t0: n = {len(agents) - len(random_ones)} decisions made by the model; {len(random_ones)} of "
            f"{len(agents)} (25%) random fallbacks left out") in note
    assert "sim-t1: n = " in note and "; 0 of " in note
    decisions.to_csv(tmp_path / "decisions.csv", index=False)
    assert decision_fallbacks(tmp_path / "decisions.csv")["sim-t0"] == (len(random_ones), len(agents))
