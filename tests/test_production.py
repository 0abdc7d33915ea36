"""Production mode refuses to start with an open admin or a secret in code."""

import subprocess

import pytest

from tests.lab_server import PROJECT, PYTHON, lab_env

SECRETS = dict(OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD="pw-from-env", OTREE_SECRET_KEY="key-from-env")


def _import_settings(**env):
    return subprocess.run([PYTHON, "-c", "import settings"], cwd=PROJECT, env=lab_env(**env),
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
