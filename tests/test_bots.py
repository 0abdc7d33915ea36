"""oTree's bots play every session config through (timeouts included), on SQLite and PostgreSQL.

The bots (each app's tests.py) script hostile messages, a message not sent in time and a
decision not made in time, and check what a participant would see. Rounds are shortened by
session config so the whole matrix runs in minutes.
"""

import csv

import pytest

import settings
from tests.lab_server import exported_table, run_bots

# The paper's configs, every one (another experiment's sessions: tests/test_experiment_sessions.py).
PAPER_CONFIGS = [c for c in settings.SESSION_CONFIGS if c["experiment"] == "paper"]
HUMAN_CONFIGS = [c["name"] for c in PAPER_CONFIGS if c["associate_type"] == "human"]
AGENT_CONFIGS = [c["name"] for c in PAPER_CONFIGS if c["associate_type"] != "human"]
SHORT = {"rounds_per_game": 3}
TREATMENT_KEYS = ("associate_type", "label_setting", "game_order")


def covering(names: list[str]) -> list[str]:
    """The fewest of ``names`` (picked greedily, in order) that between them hold every associate
    type, label setting and game order the configs have: what PostgreSQL plays (every config plays
    on SQLite; what differs between the databases is the code path, not the treatment)."""
    configs = {c["name"]: c for c in PAPER_CONFIGS if c["name"] in names}
    missing = {(key, config[key]) for config in configs.values() for key in TREATMENT_KEYS}
    chosen = []
    while missing:
        best = max(configs, key=lambda name: len(missing & {(k, configs[name][k]) for k in TREATMENT_KEYS}))
        chosen.append(best)
        missing -= {(key, configs[best][key]) for key in TREATMENT_KEYS}
    return chosen


def on_both_databases(names: list[str]) -> list:
    return ([pytest.param(name, "sqlite", id=f"{name}-sqlite") for name in names]
            + [pytest.param(name, "postgres", id=f"{name}-postgres", marks=pytest.mark.postgres)
               for name in covering(names)])


def database(request, kind: str) -> str:
    return "" if kind == "sqlite" else request.getfixturevalue("postgres_url")


def test_postgres_plays_every_treatment_value():
    for names in (HUMAN_CONFIGS, AGENT_CONFIGS):
        chosen = [c for c in PAPER_CONFIGS if c["name"] in covering(names)]
        for key in TREATMENT_KEYS:
            assert {c[key] for c in chosen} == {c[key] for c in PAPER_CONFIGS if c["name"] in names}
    assert len(covering(HUMAN_CONFIGS)) == 2 and len(covering(AGENT_CONFIGS)) == 3


@pytest.mark.server
@pytest.mark.parametrize("config, database_kind", on_both_databases(HUMAN_CONFIGS))
def test_human_configs_play_through(config, database_kind, request, project_copy):
    run_bots(project_copy, config, 4, SHORT, database(request, database_kind))


@pytest.mark.server
@pytest.mark.parametrize("config, database_kind", on_both_databases(AGENT_CONFIGS))
def test_agent_configs_play_through_with_the_simulated_model(config, database_kind, request, project_copy, tmp_path):
    export = tmp_path / "export"
    run_bots(project_copy, config, 3, {**SHORT, "llm_provider": "simulated"}, database(request, database_kind),
             export_dir=export)
    decisions = exported_table(export, "decisions")
    agent_rows = [r for r in decisions if r["player_kind"] == "agent"]
    assert len(agent_rows) == 3 * 3 * 2, "one agent decision per human decision"
    persona = settings.SESSION_CONFIGS[[c["name"] for c in settings.SESSION_CONFIGS].index(config)]["associate_type"]
    assert {r["persona"] for r in agent_rows} == {persona}
    calls = exported_table(export, "llm_calls")
    assert len(calls) >= 3 * 3 * 4 and all(c["simulated"] == "True" for c in calls)
    for participant in {r["player_code"] for r in decisions if r["player_kind"] == "human"}:
        for game in ("WC", "WoC"):
            agents_met = [r["associate_code"] for r in decisions if r["player_code"] == participant and r["game"] == game]
            assert len(set(agents_met)) == len(agents_met) == 3, "never the same agent twice in a game"


@pytest.mark.server
def test_agent_session_through_the_real_sdk_against_the_fake_server(project_copy, tmp_path):
    """The real OpenAI SDK, the local fake server, every second call failing: all rounds complete,
    the failures are re-tried or fall back, flagged."""
    from tests.fake_llm_server import FakeLLMServer

    export = tmp_path / "export"
    with FakeLLMServer() as fake:
        fake.set(mode="500", fail_every_nth=2)
        run_bots(project_copy, "hs_uninformed_woc_first", 2, {
            **SHORT, "llm_provider": "openai_compatible", "llm_model": "fake-model",
            "llm_base_url": fake.base_url_openai, "llm_api_key_env": "FAKE_LLM_KEY", "llm_max_retries": 0,
        }, extra_env={"FAKE_LLM_KEY": "dummy-key"}, export_dir=export)
    decisions = exported_table(export, "decisions")
    assert len([r for r in decisions if r["player_kind"] == "agent"]) == 2 * 3 * 2
    calls = exported_table(export, "llm_calls")
    assert {c["provider"] for c in calls} == {"openai_compatible"}
    assert {"ok", "provider_error"} <= {c["status"] for c in calls}
    assert all("dummy-key" not in str(c) for c in calls), "the key never reaches the record"


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


@pytest.mark.server
def test_spent_budget_stops_the_calls_and_falls_back_flagged(project_copy, tmp_path):
    """A budget of a fraction of a cent: after the first priced calls, agents stop calling the
    model; their turns fall back (no message / random choice), flagged as 'budget'."""
    from tests.fake_llm_server import FakeLLMServer

    export = tmp_path / "export"
    with FakeLLMServer() as fake:
        run_bots(project_copy, "hf_informed_wc_first", 1, {
            **SHORT, "llm_provider": "openai_compatible", "llm_model": "fake-model",
            "llm_base_url": fake.base_url_openai, "llm_api_key_env": "FAKE_LLM_KEY",
            "llm_price_input_per_mtok": 100.0, "llm_price_output_per_mtok": 100.0, "session_budget": 0.0001,
        }, extra_env={"FAKE_LLM_KEY": "dummy-key"}, export_dir=export)
        # the model check at session creation is not an agent's call: its call, and on an
        # openai_compatible server its grammar probes and its capacity measurement, all of them
        # asking for shorter replies than the agents' llm_max_tokens (the default, 1024)
        sent = sum(1 for _, request in fake.requests if request.get("max_tokens") == 1024)
    calls = sorted(exported_table(export, "llm_calls"), key=lambda c: float(c["time_done"] or c["time_sent"] or 0))
    statuses = [c["status"] for c in calls]
    assert "budget" in statuses
    assert sent == len(statuses) - statuses.count("budget"), "nothing is sent past the budget"
    # Once spent, it stays spent: every later call is refused without being sent.
    first_refusal = statuses.index("budget")
    assert set(statuses[first_refusal:]) == {"budget"}
    decisions = exported_table(export, "decisions")
    assert len([d for d in decisions if d["player_kind"] == "agent"]) == 3 * 2, "the session went on"
