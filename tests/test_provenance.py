"""Provenance is the session's, not the export's: the manifest is frozen when the session is
created, and an export made after the code changed shows the frozen record with today's
differences beside it; secrets are redacted by value, not by a word in a key's name. Every number
an export shows is the session's: after protocol.py's payoffs and norm intervals change, its
decisions are byte for byte what they were and its data package still passes frictionless.

The session runs in a real copy of the project with its own git commit (not the suite's symlinked
copy, whose prompts are the working tree's), so a prompt file can be changed after the session.
"""

import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from lab.record.manifest import FROZEN, NOT_FROZEN, REDACTED
from tests import processes
from tests.lab_server import PROJECT, PYTHON, completed_session_code, lab_env, run_bots
from tests.test_data_package import _fields, _resource, _unzip, _validate

ROUNDS = 2
SECRET = "secret-value-of-LAB_TEST_KEY-4711"
OPENAI_KEY_TODAY = "sk-test-openai-key-set-after-the-session"


def make_git_project_copy(work: Path) -> Path:
    """The project's files (copied, not linked) in a git repository of their own, committed."""
    files = processes.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=PROJECT, capture_output=True,
                          text=True, check=True).stdout.splitlines()
    for name in files:
        source = PROJECT / name
        if source.is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, work / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    processes.run(["git", "init", "-q"], cwd=work, check=True)
    processes.run([*git, "add", "-A"], cwd=work, check=True)
    processes.run([*git, "commit", "-q", "-m", "the lab as the session ran it"], cwd=work, check=True)
    return work


def export_zip(workdir: Path, database_url: str, code: str, out: Path, **env) -> dict:
    """`python -m labserver export CODE --out DIR`; the zip's files by name."""
    result = processes.run([PYTHON, "-m", "labserver", "export", code, "--out", str(out)], cwd=workdir,
                           env=lab_env(database_url, **env), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    with zipfile.ZipFile(out / f"lab_session_{code}.zip") as archive:
        return {Path(name).name: archive.read(name) for name in archive.namelist()}


def manifest_csv(files: dict, code: str) -> dict:
    text = files[f"payment_custom_export_manifest_{code}.csv"].decode("utf-8")
    return {row["key"]: row for row in csv.DictReader(io.StringIO(text))}


def _delete_frozen_record(database_url: str, workdir: Path, code: str) -> None:
    """What a session created before the freeze looks like: no frozen record."""
    statement = "DELETE FROM instructions_sessionmanifest WHERE session_code = %s"
    if database_url.startswith("postgresql"):
        import psycopg2

        with psycopg2.connect(database_url) as connection:
            connection.cursor().execute(statement, (code,))
        connection.close()
    else:
        import sqlite3

        with sqlite3.connect(workdir / "db.sqlite3") as connection:
            connection.execute(statement.replace("%s", "?"), (code,))


def _frozen_rows(database_url: str, workdir: Path, code: str) -> list:
    statement = "SELECT record FROM instructions_sessionmanifest WHERE session_code = %s"
    if database_url.startswith("postgresql"):
        import psycopg2

        with psycopg2.connect(database_url) as connection:
            cursor = connection.cursor()
            cursor.execute(statement, (code,))
            rows = cursor.fetchall()
        connection.close()
        return rows
    import sqlite3

    with sqlite3.connect(workdir / "db.sqlite3") as connection:
        return connection.execute(statement.replace("%s", "?"), (code,)).fetchall()


@pytest.mark.server
def test_prompt_changed_after_the_session_does_not_change_its_manifest(tmp_path, database_url):
    project = make_git_project_copy(tmp_path / "project")
    commit = processes.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True,
                           check=True).stdout.strip()
    database_url = database_url or "sqlite:///db.sqlite3"
    at_creation = tmp_path / "at_creation"
    # No OpenAI key at creation: the default model resolves to the simulated one. The session's key
    # variable holds a secret that also appears in a config value (the model's name).
    result = run_bots(project, "hf_informed_wc_first", 2, {
        "rounds_per_game": ROUNDS, "llm_api_key_env": "LAB_TEST_KEY", "llm_model": f"persona-{SECRET}",
        "llm_max_tokens": 700}, database_url, export_dir=at_creation, extra_env={"LAB_TEST_KEY": SECRET},
        database="lab")  # the session stays in the project's database for the later exports
    code = completed_session_code(result)
    created = json.loads((at_creation / f"manifest_{code}.json").read_text())
    assert created["provenance"] == FROZEN and created["differs_at_export"] == {}
    assert created["project_version"] == commit, "a clean commit at creation"
    assert created["model_settings"]["provider"] == "simulated"

    # After the session: a prompt is edited (not committed), the experiment's payoffs and
    # protocol.py's norm intervals change, and an OpenAI key is set.
    prompt = project / "prompts" / "_game_rules.j2"
    prompt.write_text(prompt.read_text() + "\n{# edited after the session #}\n")
    experiment = project / "experiments" / "paper.toml"
    experiment.write_text(experiment.read_text().replace("A = { A = [70, 70], B = [10, 80] }",
                                                         "A = { A = [90, 90], B = [5, 95] }").replace(
        "B = { A = [80, 10], B = [40, 40] }", "B = { A = [95, 5], B = [40, 40] }"))
    rules = project / "protocol.py"
    rules.write_text(rules.read_text().replace(
        "NORM_INTERVALS = ((0, 20), (20, 40), (40, 60), (60, 80), (80, 100))",
        "NORM_INTERVALS = ((0, 25), (25, 50), (50, 75), (75, 100))"))
    files = export_zip(project, database_url, code, tmp_path / "later", LAB_TEST_KEY=SECRET,
                       OPENAI_API_KEY=OPENAI_KEY_TODAY)
    later = json.loads(files[f"manifest_{code}.json"])
    assert later["provenance"] == FROZEN
    for key in ("prompts", "prompts_sha256", "project_version", "packages", "model_settings", "session_config",
                "stage_limits", "payoff_table", "choices", "answer_scales", "payment", "created_at", "experiment"):
        assert later[key] == created[key], key
    assert later["differs_at_export"]["payoff_table"]["AA"] == [90, 90]
    assert created["experiment"]["text"] == (PROJECT / "experiments" / "paper.toml").read_text()
    assert "A = { A = [90, 90]" in later["differs_at_export"]["experiment"]["text"]
    # The session's numbers: the decisions (both sides' points) as exported at creation, and its
    # package's allowed values the session's payoffs and intervals (today's would refuse its data).
    decisions = f"payment_custom_export_decisions_{code}.csv"
    assert files[decisions] == (at_creation / decisions).read_bytes()
    package_folder = _unzip((tmp_path / "later" / f"lab_session_{code}.zip").read_bytes(), tmp_path / "later_package")
    package = _validate(package_folder / "datapackage.json")
    assert _fields(_resource(package, f"instructions_{code}"))["player.quiz_AA"]["constraints"]["enum"] == [10, 40, 70, 80]
    assert _fields(_resource(package, f"payment_custom_export_{code}"))["norm_estimate_WC"]["constraints"][
        "enum"] == [0, 1, 2, 3, 4]
    # Beside the frozen record: what today's code and environment would record.
    differs = later["differs_at_export"]
    assert differs["project_version"] == commit + "+dirty"
    assert differs["prompts_sha256"] != created["prompts_sha256"]
    assert differs["prompts"]["_game_rules.j2"] != created["prompts"]["_game_rules.j2"]
    # The model was resolved and written into the session at its creation: an OpenAI key set later
    # changes nothing of it.
    assert "packages" not in differs and "stage_limits" not in differs and "model_settings" not in differs
    rows = manifest_csv(files, code)
    assert json.loads(rows["prompts_sha256"]["value"]) == created["prompts_sha256"]
    assert json.loads(rows["prompts_sha256"]["value_at_export"]) == differs["prompts_sha256"]
    assert json.loads(rows["project_version"]["value_at_export"]) == commit + "+dirty"
    assert rows["rounds_per_game"]["value_at_export"] == ""
    assert len(_frozen_rows(database_url, project, code)) == 1, "written once, at creation"

    # Secrets by value, wherever they are; a setting named like a token is not a secret.
    assert later["session_config"]["llm_max_tokens"] == 700
    assert later["session_config"]["llm_model"] == f"persona-{REDACTED}"
    for name, data in files.items():
        text = data.decode("utf-8")
        assert SECRET not in text and OPENAI_KEY_TODAY not in text, name
    assert REDACTED in files[f"all_apps_wide_{code}.csv"].decode("utf-8")

    # The analysis compares frozen records only and says which are frozen.
    from analysis import manifest as analysis_manifest

    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "manifest.csv").write_bytes(files[f"payment_custom_export_manifest_{code}.csv"])
    loaded = analysis_manifest.load_manifests([tmp_path / "csv"])[code]
    assert loaded["prompts_sha256"] == created["prompts_sha256"]
    assert loaded["differs_at_export"]["prompts_sha256"] == differs["prompts_sha256"]
    assert "frozen at creation; today's code differs in" in analysis_manifest.summary_lines({code: loaded})[0]

    # A session created before the freeze (no record) still exports, marked, with today's values.
    _delete_frozen_record(database_url, project, code)
    files = export_zip(project, database_url, code, tmp_path / "unfrozen")
    unfrozen = json.loads(files[f"manifest_{code}.json"])
    assert unfrozen["provenance"] == NOT_FROZEN and unfrozen["differs_at_export"] == {}
    assert unfrozen["prompts_sha256"] == differs["prompts_sha256"]
    assert unfrozen["project_version"] == commit + "+dirty"
    assert json.loads(manifest_csv(files, code)["provenance"]["value"]) == NOT_FROZEN


def test_a_manifest_holds_no_bare_nan():
    """NaN and infinity (which no session config can hold: tests/test_refused_session.py) would be
    written as bare NaN / Infinity, which JSON has not: a manifest holds them as text."""
    from lab.record.manifest import manifest_table, without_bare_nan

    manifest = without_bare_nan(dict(session_config={"decision_seconds": float("nan"), "fee": float("-inf")},
                                     stage_limits=[float("inf"), 40.0]))
    assert manifest == dict(session_config={"decision_seconds": "nan", "fee": "-inf"}, stage_limits=["inf", 40.0])

    def strict(constant):
        raise ValueError(f"bare {constant} in a manifest")

    for _, _, value, _ in manifest_table("code", manifest)[1:]:
        json.loads(value, parse_constant=strict)
