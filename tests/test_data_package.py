"""A data package that describes itself: every file of a session, each column's meaning,
type and unit, row counts and hashes, checked by the `frictionless` validator; from the bots'
export, the command line and the admin's Data package tab (login required, no REST key).

frictionless (v5) runs from its own virtualenv, ``make frictionless-env`` -> ``.venv-frictionless``
(the ``datapackage`` extra of pyproject.toml): it needs Jinja2 >= 3, and oTree's MarkupSafe 1.1 pin
holds the lab's virtualenv at Jinja2 2.11, so pip cannot install both in one.
``FRICTIONLESS`` may name another ``frictionless`` executable.
"""

import csv
import io
import json
import os
import re
import zipfile

import pandas as pd
import pytest
import requests

from lab.record.data_package import UNDESCRIBED
from tests import processes
from tests.lab_server import PROJECT, PYTHON, completed_session_code, lab_env, run_bots

ROUNDS = 2
ADMIN_PASSWORD = "test-admin-password"
FILES_PER_SESSION = 15  # 7 custom exports, the wide export, 5 apps, page times, the manifest


def _bots(project_copy, database_url, config, participants, export_dir=None, **overrides):
    result = run_bots(project_copy, config, participants, {"rounds_per_game": ROUNDS, **overrides},
                      database_url=database_url, export_dir=export_dir,
                      database="lab")  # kept in the project's database: the admin test serves it
    return completed_session_code(result)


def frictionless_executable() -> str:
    for candidate in (os.environ.get("FRICTIONLESS"), str(PROJECT / ".venv-frictionless" / "bin" / "frictionless")):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.fail("the frictionless validator is not installed: run `make frictionless-env`")


def _validate(descriptor_path):
    """`frictionless validate datapackage.json`: every file against its hash, bytes, rows and schema."""
    result = processes.run([frictionless_executable(), "validate", "--json", descriptor_path.name],
                           cwd=descriptor_path.parent, capture_output=True, text=True, timeout=300)
    report = json.loads(result.stdout)
    errors = [(task["name"], error["type"], error.get("note")) for task in report["tasks"] for error in task["errors"]]
    assert report["valid"] and result.returncode == 0, (report["errors"], errors[:20])
    assert len(report["tasks"]) == len(json.loads(descriptor_path.read_text())["resources"])
    return json.loads(descriptor_path.read_text(encoding="utf-8"))


def _resource(package, prefix):
    [found] = [r for r in package["resources"] if r["path"].startswith(prefix)]
    return found


def _fields(resource):
    return {f["name"]: f for f in resource["schema"]["fields"]}


def _unzip(data: bytes, folder):
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(folder)
    [package_folder] = [p for p in folder.iterdir() if p.is_dir()]
    return package_folder


@pytest.mark.server
def test_bot_sessions_export_a_valid_self_describing_package(project_copy, database_url, tmp_path):
    folder = tmp_path / "export"
    hh = _bots(project_copy, database_url, "hh_informed_wc_first", 4, folder)
    hf = _bots(project_copy, database_url, "hf_uninformed_woc_first", 2, folder, llm_provider="simulated")

    # One folder, two sessions: one datapackage.json lists every file of both.
    package = _validate(folder / "datapackage.json")
    assert {s["session_code"]: s["treatment"] for s in package["sessions"]} == {hh: "H-H", hf: "H-F"}
    assert len(package["resources"]) == 2 * FILES_PER_SESSION
    on_disk = {p.name for p in folder.iterdir()} - {"datapackage.json", "README.txt"}
    assert on_disk == {r["path"] for r in package["resources"]}
    for resource in package["resources"]:
        data = (folder / resource["path"]).read_bytes()
        assert resource["bytes"] == len(data) and resource["hash"].startswith("sha256:")
        if resource["path"].endswith(".csv"):
            rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
            assert resource["rows"] == len(rows) - 1, resource["path"]
            assert [f["name"] for f in resource["schema"]["fields"]] == rows[0]
            undescribed = [f["name"] for f in resource["schema"]["fields"] if f["description"] == UNDESCRIBED]
            assert not undescribed, (resource["path"], undescribed)

    # What a stranger reads: meaning, type, unit, allowed values.
    decisions = _fields(_resource(package, f"payment_custom_export_decisions_{hf}"))
    assert decisions["choice"]["constraints"]["enum"] == ["A", "B"]
    assert decisions["decided_at"]["type"] == "number" and decisions["decided_at"]["unit"] == "s (Unix epoch)"
    assert decisions["timed_out"]["type"] == "boolean" and decisions["timed_out"]["trueValues"] == ["True"]
    assert _resource(package, f"payment_custom_export_decisions_{hh}")["rows"] == 4 * 2 * ROUNDS
    wide = _fields(_resource(package, f"all_apps_wide_{hh}"))
    assert "game_with_chat, round 2" in wide["game_with_chat.2.player.choice"]["description"]
    assert wide["questionnaire.1.player.svo_angle"]["unit"] == "degrees"
    readme = (folder / "README.txt").read_text()
    assert f"Session {hh}: H-H, 4 participants" in readme and f"Session {hf}: H-F" in readme
    assert "frictionless validate datapackage.json" in readme and "Chen, D. L." in readme
    manifest = json.loads((folder / f"manifest_{hf}.json").read_text())
    assert manifest["provenance"] == "frozen at session creation"

    # The same package as one zip from the command line, read from the database.
    result = processes.run([PYTHON, "-m", "labserver", "export", hf, "--out", str(tmp_path / "zips")],
                           cwd=project_copy, env=lab_env(database_url or "sqlite:///db.sqlite3"),
                           capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    unzipped = _unzip((tmp_path / "zips" / f"lab_session_{hf}.zip").read_bytes(), tmp_path / "unzipped")
    single = _validate(unzipped / "datapackage.json")
    assert len(single["resources"]) == FILES_PER_SESSION and single["name"] == f"lab-session-{hf}"
    assert (unzipped / "README.txt").exists()

    # The analysis reads the zip as downloaded; its files table counts each file's rows as the package does.
    from analysis.__main__ import main as analysis_main

    archive = tmp_path / "zips" / f"lab_session_{hf}.zip"
    assert analysis_main([str(archive), "--out", str(tmp_path / "report")]) == 0
    files = pd.read_csv(tmp_path / "report" / "tables" / "overview_files.csv").set_index("file")
    tables = [r for r in single["resources"] if r["path"].endswith(".csv")]
    assert sorted(files.index) == sorted(f"{archive}/lab_session_{hf}/{r['path']}" for r in tables)
    for resource in tables:
        assert files.loc[f"{archive}/lab_session_{hf}/{resource['path']}", "rows"] == resource["rows"], resource["path"]
    decisions = pd.read_csv(tmp_path / "report" / "tables" / "tidy_decisions.csv")
    assert set(decisions["session_code"]) == {hf}
    assert len(decisions) == _resource(single, f"payment_custom_export_decisions_{hf}")["rows"]


@pytest.mark.server
def test_admin_downloads_the_package_with_the_login_and_is_refused_without(lab_server, project_copy,
                                                                           database_url, tmp_path):
    assert not os.environ.get("OTREE_REST_KEY"), "the download must work without the REST key"
    code = _bots(project_copy, database_url, "hh_uninformed_wc_first", 4)
    server = lab_server(database_url, OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD=ADMIN_PASSWORD,
                        LAB_MAX_ROUNDS_PER_GAME=str(ROUNDS))
    url = f"{server.base_url}/LabDataPackage/{code}"

    anonymous = requests.get(url, allow_redirects=False, timeout=60)
    assert anonymous.status_code in (302, 303) and "login" in anonymous.headers["location"].lower()
    assert not anonymous.content.startswith(b"PK")

    admin = requests.Session()  # oTree's login form, as a browser fills it (with its CSRF token)
    form = admin.get(f"{server.base_url}/login", timeout=30).text
    csrf = re.search(r'name="csrftoken" value="(\d+)"', form).group(1)
    login = admin.post(f"{server.base_url}/login", allow_redirects=False, timeout=30,
                       data={"username": "admin", "password": ADMIN_PASSWORD, "csrftoken": csrf})
    assert login.status_code in (302, 303)
    monitor = admin.get(f"{server.base_url}/SessionMonitor/{code}", timeout=30)
    assert f'href="/LabDataPackage/{code}"' in monitor.text, "the session's tab bar has the button"
    response = admin.get(url, timeout=120)
    assert response.status_code == 200 and response.headers["content-type"] == "application/zip"
    assert f"lab_session_{code}.zip" in response.headers["content-disposition"]
    package = _validate(_unzip(response.content, tmp_path / "download") / "datapackage.json")
    assert _resource(package, f"payment_custom_export_decisions_{code}")["rows"] == 4 * 2 * ROUNDS
