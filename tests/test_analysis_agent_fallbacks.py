"""The lab's analysis of agents' behaviour counts only the decisions their model made: a turn that
fell back is the system's random choice (flagged timed_out), reported apart with n and its share,
and an analysis whose agents fell back more than --max-agent-fallback-share exits 3."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis import analyse, load_exports, synthetic
from analysis.__main__ import agent_fallback_problem, main as cli_main


@pytest.fixture(scope="module")
def exports_with_fallbacks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("exports")
    parameters = synthetic.SyntheticParameters(participants_per_session=4, label_settings=("informed",),
                                               game_orders=("WC-WoC",))
    synthetic.write(synthetic.generate(parameters, seed=5), folder)
    for path in folder.glob("decisions*.csv"):
        decisions = pd.read_csv(path, dtype=str, keep_default_na=False)
        agents = decisions.index[decisions["player_kind"] == "agent"]
        fell = agents[::3]  # a third of the agents' decisions fell back: random, here all B
        decisions.loc[fell, "timed_out"], decisions.loc[fell, "choice"] = "True", "B"
        decisions.to_csv(path, index=False)
    return folder


def test_agents_rates_count_only_the_decisions_their_model_made(exports_with_fallbacks):
    analysis = analyse(load_exports(exports_with_fallbacks))
    decisions, agents = analysis.decisions, analysis.agents
    own = decisions[(decisions["player_kind"] == "agent") & (decisions["game"] == "WC")]
    made = own[~own["timed_out"].astype(bool)]
    assert agents["rounds_WC"].sum() == len(made) and agents["timed_out_WC"].sum() == len(own) - len(made)
    assert agents["cooperations_WC"].sum() == made["cooperated"].sum()  # no random B counted
    cooperation = next(s for s in analysis.sections if s.key == "cooperation")
    fell = len(own) - len(made)
    assert (f"Agents' cooperation in WC counts only the decisions their model made: n = {len(made)}; {fell} of "
            f"{len(own)} ({fell / len(own):.0%}) were random fallbacks (no usable answer in time), left out."
            ) in cooperation.notes


def test_the_analysis_exits_3_when_the_agents_fell_back_too_often(exports_with_fallbacks, tmp_path, capsys):
    assert cli_main([str(exports_with_fallbacks), "--out", str(tmp_path / "report")]) == 3
    err = capsys.readouterr().err
    assert "of the lab agents'" in err and "were random fallbacks, more than --max-agent-fallback-share 20%" in err
    assert (tmp_path / "report" / "report.html").exists()  # written all the same, saying so
    agents = analyse(load_exports(exports_with_fallbacks)).agents
    assert "were random fallbacks, more than --max-agent-fallback-share 20%" in agent_fallback_problem(agents, 0.2)
    assert agent_fallback_problem(agents, 0.5) is None  # a third fell back: under a limit of a half
