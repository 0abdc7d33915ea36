"""The analysis reads the sessions' experiment from their manifests: cooperation is its cooperative
choice, sessions of different experiments are refused (exit 2), and a design without a cooperative
choice has no cooperation rate to analyse (exit 2, said so)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pandas as pd
import pytest

import experiment_design as ed
from analysis import analyse, load_exports, synthetic
from analysis.__main__ import main as cli_main


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("exports")
    parameters = synthetic.SyntheticParameters(participants_per_session=4, label_settings=("informed",),
                                               game_orders=("WC-WoC",))
    synthetic.write(synthetic.generate(parameters, seed=5), folder)
    return folder


def record(text: str, name: str) -> dict:
    experiment = ed.load_text(text, name)
    return {"name": name, "file": f"experiments/{name}.toml", "text_sha256": experiment.text_sha256,
            "design_sha256": experiment.canonical_hash, "text": text}


def with_manifests(exports: Path, folder: Path, experiments: list[dict]) -> Path:
    """The exports and a manifest per session, the sessions' experiments dealt in turn from ``experiments``."""
    folder.mkdir()
    for path in exports.glob("*.csv"):
        (folder / path.name).write_bytes(path.read_bytes())
    codes = sorted(set(pd.read_csv(exports / "decisions_informed.csv")["session_code"]))
    with (folder / "manifest.csv").open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["session_code", "key", "value"])
        for index, code in enumerate(codes):
            writer.writerow([code, "experiment", json.dumps(experiments[index % len(experiments)])])
    return folder


def text_of(name: str) -> str:
    return (ed.EXPERIMENTS_DIR / f"{name}.toml").read_text(encoding="utf-8")


def test_cooperation_is_the_experiment_s_cooperative_choice(exports):
    paper = analyse(load_exports(exports))
    flipped = analyse(load_exports(exports), cooperative_choice="B")
    decisions = flipped.decisions
    assert (decisions["cooperated"] == decisions["choice"].eq("B")).all()
    rates = paper.participants.set_index("participant_code")["cooperation_rate_WC"]
    other = flipped.participants.set_index("participant_code")["cooperation_rate_WC"]
    assert ((rates + other.loc[rates.index]).round(9) == 1).all()


def test_the_stag_hunt_s_sessions_are_analysed_as_the_stag_hunt(exports, tmp_path, capsys):
    folder = with_manifests(exports, tmp_path / "hunt", [record(text_of("stag_hunt"), "stag_hunt")])
    assert cli_main([str(folder), "--out", str(tmp_path / "report")]) in (0, 3)
    design = ed.load(ed.EXPERIMENTS_DIR / "stag_hunt.toml").canonical_hash[:12]
    assert f"experiment stag_hunt (design {design}): cooperation is choosing A" in capsys.readouterr().out


def test_sessions_of_two_experiments_are_refused(exports, tmp_path, capsys):
    folder = with_manifests(exports, tmp_path / "mixed", [record(text_of("stag_hunt"), "stag_hunt"),
                                                          record(text_of("paper"), "paper")])
    assert cli_main([str(folder), "--out", str(tmp_path / "report"), "--allow-mixed-protocols"]) == 2
    error = capsys.readouterr().err
    assert "the sessions ran different experiments, which are never pooled" in error
    assert "stag_hunt (design " in error and "paper (design " in error
    assert not (tmp_path / "report").exists()


def test_a_design_without_a_cooperative_choice_has_no_cooperation_rate(exports, tmp_path, capsys):
    text = re.sub(r'cooperative_choice = "A".*\n', "", text_of("stag_hunt"))
    text = re.sub(r"norm_bonus = .*\n", "norm_bonus = 0.0\n", text)
    text = re.sub(r"norm_intervals = .*\n", "", text.replace('"norm_estimates", ', ""))
    folder = with_manifests(exports, tmp_path / "none", [record(text, "hunt_without_cooperation")])
    assert cli_main([str(folder), "--out", str(tmp_path / "report")]) == 2
    assert "experiment hunt_without_cooperation names no cooperative choice" in capsys.readouterr().err



@pytest.fixture(scope="module")
def participants(exports) -> pd.DataFrame:
    return analyse(load_exports(exports)).participants


@pytest.mark.parametrize("norm_intervals", [((0, 25), (25, 50), (50, 75), (75, 100)), ()], ids=["quarters", "none"])
def test_the_norm_sections_follow_the_experiment_s_intervals_or_say_it_asks_none(participants, norm_intervals):
    from analysis.results import norms_cooperation_section, norms_perceptions_section

    estimates = norms_perceptions_section(participants, "informed", norm_intervals)
    by_norm = norms_cooperation_section(participants, "informed", norm_intervals)
    notes = " ".join(estimates.notes + by_norm.notes)
    if norm_intervals:
        assert "3 = 75–100 %" in notes and "merged" not in notes
        groups = set(by_norm.tables["cooperation_by_norm"]["norm_group"])
        assert groups and groups <= {"0–25 %", "25–50 %", "50–75 %", "75–100 %"}
        estimates.figures["fig4_norms_perceptions"]()  # drawn on the file's intervals
    else:
        assert "asks no norm estimate" in notes and not by_norm.tables
