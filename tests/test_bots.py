"""oTree's bots play every session config through (timeouts included), on SQLite and PostgreSQL.

The bots (each app's tests.py) script hostile messages, a message not sent in time and a
decision not made in time, and check what a participant would see. Rounds are shortened by
session config so the whole matrix runs in minutes.
"""

import csv

import pytest

import settings
from tests.conftest import run_bots

HUMAN_CONFIGS = [c["name"] for c in settings.SESSION_CONFIGS if c["associate_type"] == "human"]
SHORT = {"rounds_per_game": 3}


@pytest.mark.server
@pytest.mark.parametrize("config", HUMAN_CONFIGS)
def test_human_configs_play_through(config, database_url, project_copy):
    run_bots(project_copy, config, 4, SHORT, database_url)


@pytest.mark.server
def test_full_size_human_session_exports_every_decision(project_copy, tmp_path):
    """The paper's size: 12 participants, 10 rounds per game, every row exported."""
    export = tmp_path / "export"
    run_bots(project_copy, "hh_uninformed_woc_first", 12, {}, export_dir=export)
    [decisions] = export.glob("payment_custom_export_decisions_*.csv")
    rows = list(csv.DictReader(decisions.open(encoding="utf8")))
    assert len(rows) == 12 * 10 * 2
    for game in ("WC", "WoC"):
        for participant in {r["player_code"] for r in rows}:
            associates = [r["associate_code"] for r in rows if r["game"] == game and r["player_code"] == participant]
            assert len(associates) == 10 and len(set(associates)) == 10, "perfect strangers"
    [messages] = export.glob("payment_custom_export_messages_*.csv")
    message_rows = list(csv.DictReader(messages.open(encoding="utf8")))
    assert len(message_rows) == 12 * 10 * 2
    late = [m for m in message_rows if m["sent_in_time"] == "False"]
    assert late and all(m["text"] == "" and m["unsent_draft"] == "half-typed" for m in late)
