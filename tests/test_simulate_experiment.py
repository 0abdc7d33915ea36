"""The simulation lab plays any experiment file (agent vs agent) with the offline simulated model:
the file's personas, payoffs, rounds, message exchanges and matching; a file the experiment check
refuses is refused with its problems; the run's folder records which experiment it played."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

import experiment_design as ed
from agents.simulate import run_simulation
from agents.simulate.__main__ import main
from agents.simulate.config import SimulationConfig, load_config
from agents.simulate.design import Matchup, Unit, games_of_round

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"


def write_config(path: Path, output_dir: Path, **design) -> Path:
    values = {"name": "run", "output_dir": str(output_dir), "group_size": 2, "repeats": 1, **design}
    lines = [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    lines += ["", "[[models]]", 'label = "sim"', 'provider = "simulated"', "simulated_seed = 5",
              "requests_per_minute = 1000000"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_stag_hunt_is_played_with_its_payoffs_and_recorded_as_the_stag_hunt(tmp_path, capsys):
    config = write_config(tmp_path / "sim.toml", tmp_path / "runs", rounds=2)
    assert main([str(config), "--experiment", str(EXPERIMENTS / "stag_hunt.toml"), "--no-progress"]) == 0
    run = tmp_path / "runs" / "run"
    decisions = pd.read_csv(run / "decisions.csv")
    stag_hunt = ed.load(EXPERIMENTS / "stag_hunt.toml")
    assert len(decisions) == 6 * 2 * 2 * 2  # 6 matchups x 2 pairs x 2 rounds x both sides
    for row in decisions.itertuples():
        assert (row.payoff, row.associate_payoff) == stag_hunt.payoff_matrix[(row.choice, row.associate_choice)]
    assert set(decisions["persona"]) == {"cooperative", "fair", "selfish"}
    record = json.loads((run / "experiment.json").read_text(encoding="utf-8"))
    assert (record["name"], record["canonical_hash"], record["text_sha256"]) == (
        "stag_hunt", stag_hunt.canonical_hash, stag_hunt.text_sha256)
    assert record["text"] == stag_hunt.text and record["cooperative_choice"] == "A"
    calls = pd.read_csv(run / "llm_calls.csv")
    assert {json.loads(p)["experiment_hash"] for p in calls["parameters"]} == {stag_hunt.canonical_hash}
    system = json.loads(calls["messages"][0])[0]["content"]
    assert "If both you and your associate choose A, both will receive 80." in system
    assert (run / "figures" / "S22_cooperation.png").exists()
    assert "experiment:" in capsys.readouterr().out


def test_personas_of_its_own_meet_a_fixed_partner_every_round(tmp_path):
    config = write_config(tmp_path / "sim.toml", tmp_path / "runs", group_size=3, rounds=4)
    assert main([str(config), "--experiment", str(EXPERIMENTS / "tit_for_tat_en.toml"), "--no-progress"]) == 0
    run = tmp_path / "runs" / "run"
    decisions = pd.read_csv(run / "decisions.csv")
    assert set(decisions["persona"]) == {"tit_for_tat", "unconditional_cooperator"}
    # each agent of a matchup meets one associate in every round, though the rounds are more than the group
    assert decisions.groupby(["matchup", "player_code"])["associate_code"].nunique().eq(1).all()
    assert sorted(decisions["round"].unique()) == [1, 2, 3, 4]
    calls = pd.read_csv(run / "llm_calls.csv")
    systems = {json.loads(m)[0]["content"] for m in calls["messages"]}
    assert any("You are a RECIPROCATING human" in s for s in systems)
    assert all("you will play with the same associate for all rounds." in s for s in systems)
    assert (run / "figures" / "S22_cooperation.png").exists()


def test_one_message_exchange_is_one_message_each_way(tmp_path):
    config = write_config(tmp_path / "sim.toml", tmp_path / "runs", rounds=2, personas=["fair"])
    assert main([str(config), "--experiment", str(EXPERIMENTS / "fixed_partner_one_message.toml"),
                 "--no-progress"]) == 0
    run = tmp_path / "runs" / "run"
    messages = pd.read_csv(run / "messages.csv")
    assert set(messages["stage"]) == {1}
    assert len(messages) == len(pd.read_csv(run / "decisions.csv"))  # one message per side and round
    turns = pd.read_csv(run / "llm_calls.csv")["turn"]
    assert "message_2" not in set(turns)


def test_a_file_the_check_refuses_is_refused_with_its_problems(tmp_path, capsys):
    broken = tmp_path / "broken_hunt.toml"
    broken.write_text((EXPERIMENTS / "stag_hunt.toml").read_text(encoding="utf-8")
                      .replace('cooperative_choice = "A"', 'cooperative_choice = "C"'), encoding="utf-8")
    config = write_config(tmp_path / "sim.toml", tmp_path / "runs", rounds=2)
    assert main([str(config), "--experiment", str(broken), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert "stopped: the experiment file has these problems" in error
    assert f"{broken}: game.cooperative_choice:" in error
    assert not (tmp_path / "runs").exists()


def test_without_a_cooperative_choice_there_is_no_cooperation_rate(tmp_path):
    text = (EXPERIMENTS / "stag_hunt.toml").read_text(encoding="utf-8")
    text = re.sub(r'cooperative_choice = "A".*\n', "", text)
    text = re.sub(r"norm_bonus = .*\n", "norm_bonus = 0.0\n", text)
    text = re.sub(r'"norm_estimates", ', "", text)
    text = re.sub(r"norm_intervals = .*\n", "", text)
    file = tmp_path / "hunt_without_cooperation.toml"
    file.write_text(text, encoding="utf-8")
    assert ed.check(file) == []  # a design without cooperation rate nor norm bonus runs
    logged = []
    config = SimulationConfig(name="run", output_dir=tmp_path / "runs", group_size=2, repeats=1, rounds=1,
                              personas=["fair"], experiment=file, models=[{"provider": "simulated", "label": "sim"}])
    result = run_simulation(config, show_progress=False, log=logged.append)
    assert "S22" not in result.outputs and result.outputs["decisions"].exists()
    assert any("no cooperation rate" in line for line in logged)


def test_the_paper_is_the_default_design():
    config = load_config(ROOT / "configs" / "simulation_quick.toml")
    assert config.design.name == "paper" and config.matching == "perfect_strangers" and config.chat_exchanges == 2
    assert config.payoff("A", "B") == 10 and config.cooperative_choice == "A"


def test_random_matching_draws_a_seeded_pairing_each_round():
    unit = Unit("sim", Matchup("fair", "fair"), 1)
    rounds = [[g.index_b for g in games_of_round(unit, r, 6, "random", seed=1)] for r in range(1, 6)]
    assert all(sorted(partners) == list(range(6)) for partners in rounds)
    assert rounds == [[g.index_b for g in games_of_round(unit, r, 6, "random", seed=1)] for r in range(1, 6)]
    assert len({tuple(p) for p in rounds}) > 1
    assert [g.index_b for g in games_of_round(unit, 3, 6, "fixed_partner")] == list(range(6))
