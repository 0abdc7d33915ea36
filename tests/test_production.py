"""Production mode refuses to start with an open admin or a secret in code."""


import pytest

from tests import processes
from tests.lab_server import PROJECT, PYTHON, lab_env

SECRETS = dict(OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD="pw-from-env", OTREE_SECRET_KEY="key-from-env")


def _import_settings(**env):
    return processes.run([PYTHON, "-c", "import settings"], cwd=PROJECT, env=lab_env(**env),
                         capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_production_mode_refuses_to_start_without_its_settings(missing):
    env = {key: value for key, value in SECRETS.items() if key != missing}
    result = _import_settings(OTREE_PRODUCTION="1", **env)
    assert result.returncode != 0
    assert "Refusing to start in production mode" in result.stderr and missing in result.stderr


def test_production_mode_starts_with_them():
    assert _import_settings(OTREE_PRODUCTION="1", **SECRETS).returncode == 0


def test_development_mode_needs_nothing():
    assert _import_settings().returncode == 0


def test_a_lab_server_is_refused_before_it_starts_without_its_settings(monkeypatch, capsys):
    """`make lab` (labserver run --lab): production mode, refused without the admin login's
    settings, nothing started."""
    from labserver import server

    for key in ("OTREE_PRODUCTION", *SECRETS):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(server.subprocess, "Popen", lambda *a, **k: pytest.fail("a server was started"))
    assert server.serve(8000, lab=True) == 2
    refusal = capsys.readouterr().err
    assert "Not starting the lab server" in refusal and all(key in refusal for key in SECRETS)


def test_the_console_says_which_server_it_is():
    from labserver.server import start_banner

    tryout = start_banner(8000, "SQLite (./db.sqlite3)", {}, "10.0.0.5")
    assert "TRY-OUT SERVER (oTree debug mode): NOT FOR A SESSION WITH PARTICIPANTS" in tryout
    assert "make lab" in tryout and "http://10.0.0.5:8000/room/lab" in tryout
    lab = start_banner(8000, "postgresql://lab:***@db/lab", dict(OTREE_PRODUCTION="1", **SECRETS), None)
    assert "LAB SERVER (oTree production mode)" in lab and "TRY-OUT" not in lab and "labserver preflight" in lab
    assert "pw-from-env" not in lab and "key-from-env" not in lab
