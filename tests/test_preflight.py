"""``labserver preflight``: a lab's server in production mode on PostgreSQL passes every check,
and each check that fails says what is wrong and what to do, without printing a secret."""

import types

import pytest
import requests

from labserver import preflight
from tests import processes
from tests.lab_server import PROJECT, PYTHON, free_port

ADMIN_PASSWORD, SECRET_KEY, REST_KEY, DB_PASSWORD = "admin-pw-7f3a", "secret-key-91c2", "rest-key-55d0", "db-pw-3e8b"
PRODUCTION = dict(OTREE_PRODUCTION="1", OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD=ADMIN_PASSWORD,
                  OTREE_SECRET_KEY=SECRET_KEY, OTREE_REST_KEY=REST_KEY)


def with_password(url: str) -> str:
    """The test server trusts every local connection: a password in the URL is accepted and shows
    whether it is ever printed."""
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{DB_PASSWORD}@")


@pytest.mark.server
def test_a_lab_server_passes_every_check_and_shows_participants_no_debug_page(lab_server, postgres_url,
                                                                             project_copy):
    database_url = with_password(postgres_url)
    server = lab_server(database_url, **PRODUCTION)
    result = processes.run([PYTHON, "-m", "labserver", "preflight", "--port", str(server.port)], cwd=project_copy,
                           env=server.env, capture_output=True, text=True, timeout=300)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    checks = lines[:-1]
    assert [line.split(":")[0].split(None, 1)[1] for line in checks[:4]] == [
        "production mode", "database", "tables", "timeout worker"]
    assert all(line.startswith("ok ") for line in checks), result.stdout
    assert any(line.startswith("ok    room lab: 72 labels") for line in checks)
    import settings

    agent_configs = sum(config["associate_type"] != "human" for config in settings.SESSION_CONFIGS)
    assert agent_configs == 44  # the paper's 12, the stag hunt's 12, example 2's 12 and example 3's 8 (two personas)
    assert any(f"agents' model simulated ({agent_configs} agent session configs)" in line for line in checks)
    assert lines[-1] == "Preflight: every check passed."
    for secret in (ADMIN_PASSWORD, SECRET_KEY, REST_KEY, DB_PASSWORD):
        assert secret not in result.stdout + result.stderr

    # What a participant of this server gets: no try-out ribbon, no debug panel, no "[debug]" tab.
    session = server.create_session("hh_informed_wc_first", 12)
    page = requests.get(server.start_url(session["participants"][0]["code"]), timeout=30)
    assert page.ok and "/instructions/Welcome/" in page.url
    assert '<html lang="zh-Hans">' in page.text
    for debug_only in ("lab-tryout-ribbon", "debug-info", "Restart as new participant", "tab-title-debug-info"):
        assert debug_only not in page.text

    # Tables made by another version of the apps: named, and what to do.
    server.execute(["ALTER TABLE questionnaire_player DROP COLUMN major"])
    tables = preflight.tables_check(database_url, PROJECT)
    assert not tables.ok and "questionnaire_player.major" in tables.detail and "new one" in tables.detail


def test_production_mode_and_its_settings():
    debug = preflight.production_check({})
    assert not debug.ok and "make lab" in debug.detail
    half = preflight.production_check(dict(OTREE_PRODUCTION="1", OTREE_ADMIN_PASSWORD=ADMIN_PASSWORD))
    assert not half.ok and "OTREE_AUTH_LEVEL=STUDY" in half.detail and "OTREE_SECRET_KEY" in half.detail
    assert ADMIN_PASSWORD not in half.line()
    assert preflight.production_check(PRODUCTION).ok


def test_the_database_must_be_postgresql_and_answer():
    sqlite = preflight.database_check({})
    assert not sqlite.ok and "SQLite" in sqlite.detail and "PostgreSQL" in sqlite.detail
    assert not preflight.database_check(dict(DATABASE_URL="sqlite:////tmp/lab.sqlite3")).ok
    unreachable = preflight.database_check(
        dict(DATABASE_URL=f"postgresql://lab:{DB_PASSWORD}@127.0.0.1:{free_port()}/lab"))
    assert not unreachable.ok and unreachable.detail.startswith("cannot connect to postgresql://lab:***@127.0.0.1")
    assert DB_PASSWORD not in unreachable.line()


def test_tables_none_yet_or_of_another_version():
    expected = {"otree_session": {"id", "code"}, "questionnaire_player": {"id", "age", "major"}}
    empty = preflight.judge_tables(expected, {})
    assert not empty.ok and "start the server" in empty.detail
    older = preflight.judge_tables(expected, {"otree_session": {"id", "code"}, "questionnaire_player": {"id", "age"}})
    assert not older.ok and "questionnaire_player.major" in older.detail
    assert preflight.judge_tables(expected, {**expected, "other": {"x"}}).ok


def test_the_running_server_and_its_timeout_worker():
    port = free_port()  # nothing listens there
    lab = dict(PRODUCTION, DATABASE_URL="postgresql://lab@db/lab")
    none = preflight.server_check([], port, lab)
    assert not none.ok and "make lab" in none.detail
    debug = preflight.server_check([preflight.Worker(4321, port, {"DATABASE_URL": lab["DATABASE_URL"]})], port, lab)
    assert not debug.ok and "debug mode" in debug.detail
    elsewhere = preflight.server_check([preflight.Worker(4321, port, dict(lab, DATABASE_URL=""))], port, lab)
    assert not elsewhere.ok and "SQLite" in elsewhere.detail and "EnvironmentFile" in elsewhere.detail
    silent = preflight.server_check([preflight.Worker(4321, port, lab)], port, lab)
    assert not silent.ok and "no server answers" in silent.detail
    other_port = preflight.server_check([preflight.Worker(4321, port, lab)], port + 1, lab)
    assert not other_port.ok and f"--port {port}" in other_port.detail
    assert not preflight.server_check(None, port, lab).ok  # no /proc: not checked
    assert preflight.timeout_workers(PROJECT) == [] or all(w.port for w in preflight.timeout_workers(PROJECT))


def test_room_labels(tmp_path):
    missing = preflight.labels_check("lab", tmp_path / "none.txt")
    assert not missing.ok and "cannot be read" in missing.detail
    (tmp_path / "empty.txt").write_text("\n")
    assert not preflight.labels_check("lab", tmp_path / "empty.txt").ok
    (tmp_path / "bad.txt").write_text("cubicle01\ncubicle-02\ncubicle03\ncubicle01\n")
    bad = preflight.labels_check("lab", tmp_path / "bad.txt")
    assert not bad.ok and "'cubicle-02'" in bad.detail and "cubicle01 more than once" in bad.detail
    (tmp_path / "good.txt").write_text("cubicle01\ncubicle02\n")
    good = preflight.labels_check("lab", tmp_path / "good.txt")
    assert good.ok and good.detail == "2 labels (cubicle01 … cubicle02)"


def _agent_settings(**model):
    from lab.base.session_settings import config_defaults

    config = dict(name="hf_informed_wc_first", associate_type="fair", **model)
    return types.SimpleNamespace(SESSION_CONFIGS=[config, dict(config, name="hf_h", associate_type="human")],
                                 SESSION_CONFIG_DEFAULTS=config_defaults())


def test_the_agents_model_makes_its_one_call(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_LLM_KEY", "dummy-key")
    model = dict(llm_provider="openai_compatible", llm_model="fake-gpt", llm_api_key_env="FAKE_LLM_KEY",
                 llm_max_retries=0)
    [answered] = preflight.model_checks(_agent_settings(llm_base_url=fake_llm.base_url_openai, **model))
    assert answered.ok and answered.name == "agents' model openai_compatible fake-gpt (1 agent session config)"
    [unreachable] = preflight.model_checks(_agent_settings(llm_base_url=f"http://127.0.0.1:{free_port()}/v1", **model))
    assert not unreachable.ok and "the model check" in unreachable.detail and "failed" in unreachable.detail
    monkeypatch.delenv("FAKE_LLM_KEY")
    [no_key] = preflight.model_checks(_agent_settings(llm_base_url=fake_llm.base_url_openai, **model))
    assert not no_key.ok and "FAKE_LLM_KEY" in no_key.detail


def test_disk_space(tmp_path):
    assert preflight.disk_check(tmp_path, min_free=1).ok
    short = preflight.disk_check(tmp_path, min_free=1 << 60)
    assert not short.ok and "GiB free" in short.detail
