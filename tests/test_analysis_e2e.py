"""End to end: sessions played by oTree's bots (an H-H one and an H-F one with the simulated
agents), exported by oTree's custom exports, analysed into a report."""

import pytest

from analysis import from_otree_bot_export
from analysis.report import write_report
from tests.lab_server import run_bots


@pytest.mark.server
def test_bot_played_sessions_are_analysed(project_copy, tmp_path):
    export = tmp_path / "exports"
    run_bots(project_copy, "hh_informed_wc_first", 4, {"rounds_per_game": 3}, export_dir=export)
    run_bots(project_copy, "hf_informed_woc_first", 3, {"rounds_per_game": 3, "llm_provider": "simulated"},
             export_dir=export)
    exports = from_otree_bot_export(export)
    # oTree's own exports (all apps wide, per app, the quiz attempts) are recognised quietly; the
    # H-H session's empty model-call export is an info.
    assert [str(p) for p in exports.problems if p.level != "info"] == []
    assert any("all_apps_wide" in f for f in exports.files["file"])
    assert set(exports.decisions["game"]) == {"WC", "WoC"}
    assert set(exports.decisions["treatment"]) == {"H-H", "H-F"}
    assert not exports.messages.empty and not exports.llm_calls.empty
    analysis = write_report(exports, tmp_path / "report")
    participants = analysis.participants
    assert len(participants) == 4 + 3
    assert participants["cooperation_rate_WC"].between(0, 1).all()
    cooperation = next(s for s in analysis.sections if s.key == "cooperation" and s.label_setting == "informed")
    rates = cooperation.tables["cooperation_rates"]
    assert {"H-H", "H-F"} <= set(rates.loc[rates["who"] == "participants", "group"])
    assert "fair" in set(rates.loc[rates["who"] == "agents", "group"])
    assert (tmp_path / "report" / "report.html").exists()
    assert (tmp_path / "report" / "annotation_template.csv").exists()
