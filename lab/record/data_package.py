"""A session's data package: every file of its data, described so that a stranger can open it.

The files: the tables of docs/DATA.md (the apps' custom exports), oTree's own exports of the
session (one per app, the wide one, the page times), the frozen manifest as JSON, a README.txt,
and a Frictionless Data Package (https://specs.frictionlessdata.io/data-package/)
``datapackage.json`` giving each file's SHA-256, bytes, row count and Table Schema (every
column's name, type, description, unit and allowed values, from lab/record/data_dictionary.py and, for
oTree's files, lab/record/data_dictionary_otree.py, with the payoffs, choices, answer scales and
currency the session was created with: lab/record/manifest.py).

Three ways out, one package: the admin's *Data package* tab (lab/experimenter/admin_views.py, a zip),
``python -m labserver export CODE --out DIR`` (the same zip) and ``labserver bots --export DIR``
(the files in DIR; a folder holding several sessions gets one datapackage.json listing them all).
Every function here reads the database: call it inside oTree's database scope.

Secrets' values (lab/record/manifest.py) are redacted in every file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from lab.record import data_dictionary as dd
from lab.record import data_dictionary_otree as dd_otree
from lab.record import manifest as lab_manifest
from lab.base import session_game

UNDESCRIBED = "(not described in lab/record/data_dictionary.py)"
README = "README.txt"
DESCRIPTOR = "datapackage.json"
OTREE_CITATION = ("Chen, D. L., Schonger, M., & Wickens, C. (2016). oTree - An open-source platform for "
                  "laboratory, online, and field experiments. Journal of Behavioral and Experimental Finance, 9, 88-97.")


@dataclass
class DataFile:
    path: str
    data: bytes
    description: str
    columns: dict | None = None  # header name -> Column (None: undescribed); None for non-CSV files
    booleans: tuple = dd.WORDS
    rows: int | None = None
    sessions: list = field(default_factory=list)


# --- the files ------------------------------------------------------------------------------------
def _csv_text(write) -> str:
    buffer = io.StringIO(newline="")
    write(buffer)
    return buffer.getvalue()


def _records(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _csv_file(path: str, text: str, description: str, describe, booleans, secrets, values: dict) -> DataFile:
    """A CSV file; ``describe(name)`` gives a column's description, as the session whose protocol
    values are ``values`` has it (``Column.of_session``)."""
    text = lab_manifest.redact_text(text, secrets)
    records = _records(text)
    header = records[0] if records else []
    columns = {name: describe(name) for name in header}
    return DataFile(path, text.encode("utf-8"), description,
                    {name: column and column.of_session(values) for name, column in columns.items()}, booleans,
                    rows=max(len(records) - 1, 0))


def _page_times_text(session_code: str) -> str:
    """oTree's page-time export, this session's rows only."""
    import otree.export

    lines = _csv_text(otree.export.export_page_times).splitlines(keepends=True)
    return lines[0] + "".join(line for line in lines[1:] if line.startswith(f"{session_code},"))


def session_files(session_code: str) -> list[DataFile]:
    """Every data file of the session (not README.txt and datapackage.json), in package order."""
    import otree.export
    from otree.models import Session

    session = Session.objects_get(code=session_code)
    secrets = lab_manifest.secret_values(dict(session.config))
    apps = list(session.config["app_sequence"])
    manifest = lab_manifest.session_manifest(session)
    values = session_game.session_protocol_values(manifest)
    code = session_code
    files = []
    for app in apps:
        for function_name in sorted(otree.export.get_custom_export_functions(app)):
            table = dd.TABLES.get(dd.CUSTOM_EXPORTS.get((app, function_name)))
            if table is not None and table.title == "manifest":  # the same record as the JSON file
                text = _csv_text(lambda fp: csv.writer(fp).writerows(lab_manifest.manifest_table(code, manifest)))
            else:
                text = _csv_text(lambda fp: otree.export.custom_export_app(app, fp, session_code=code,
                                                                           function_name=function_name))
            description = (f"{table.title} (docs/DATA.md): {table.description}" if table
                           else f"custom export {function_name} of the app {app}")
            columns = table.columns if table else {}
            files.append(_csv_file(f"{app}_{function_name}_{code}.csv", text, description, columns.get,
                                   table.booleans if table else dd.DIGITS, secrets, values))
    files.append(_csv_file(f"all_apps_wide_{code}.csv", _csv_text(lambda fp: otree.export.export_wide(fp, code)),
                           "oTree's wide export: one row per participant, every app's fields in every round",
                           dd_otree.otree_column, dd.DIGITS, secrets, values))
    for app in apps:
        files.append(_csv_file(f"{app}_{code}.csv", _csv_text(lambda fp: otree.export.export_app(app, fp, code)),
                               f"oTree's export of the app {app}: one row per participant and round",
                               lambda name, app=app: dd_otree.app_column(app, name), dd.DIGITS, secrets, values))
    files.append(_csv_file(f"PageTimes_{code}.csv", _page_times_text(code),
                           "oTree's page-time records: one row per page a participant completed",
                           dd_otree.PAGE_TIMES.get, dd.EITHER, secrets, values))
    manifest_json = json.dumps(lab_manifest.redact(manifest, secrets), indent=2, sort_keys=False,
                               ensure_ascii=False, default=str)
    files.append(DataFile(f"manifest_{code}.json", manifest_json.encode("utf-8"),
                          "the session's manifest (docs/DATA.md 'manifest'): how it was run and by what software, "
                          f"{manifest['provenance']}"))
    summary = {key: manifest.get(key) for key in ("session_code", "treatment", "num_participants", "provenance",
                                                  "project_version", "created_at", "started_at", "ended_at")}
    for data_file in files:
        data_file.sessions = [summary]
    return files


# --- the descriptor --------------------------------------------------------------------------------
def _name(path: str) -> str:
    return re.sub(r"[^a-z0-9._-]", "-", Path(path).stem.lower())


def _field(name: str, column, booleans) -> dict:
    if column is None:
        return {"name": name, "type": "any", "description": UNDESCRIBED}
    descriptor = {"name": name, "type": column.type, "description": column.description}
    if column.unit:
        descriptor["unit"] = column.unit
    if column.type == "boolean":
        descriptor["trueValues"], descriptor["falseValues"] = list(booleans[0]), list(booleans[1])
    if column.enum:
        descriptor["constraints"] = {"enum": list(column.enum)}
    return descriptor


def resource(data_file: DataFile) -> dict:
    described = dict(name=_name(data_file.path), path=data_file.path, description=data_file.description,
                     bytes=len(data_file.data), hash="sha256:" + hashlib.sha256(data_file.data).hexdigest())
    if data_file.columns is None:
        described.update(type="file", format="json", mediatype="application/json", encoding="utf-8")
        return described
    described.update(
        type="table", profile="tabular-data-resource", format="csv", mediatype="text/csv", encoding="utf-8",
        rows=data_file.rows,
        schema={"fields": [_field(name, column, data_file.booleans) for name, column in data_file.columns.items()],
                "missingValues": [""]},
    )
    return described


def descriptor(resources: list[dict], sessions: list[dict]) -> dict:
    codes = sorted(s["session_code"] for s in sessions)
    return {
        "profile": "data-package",
        "name": "lab-session-" + codes[0] if len(codes) == 1 else "lab-sessions",
        "title": "Machine-penalty lab: session " + ", ".join(codes),
        "description": "A prisoner's dilemma with pre-play chat against humans or LLM agents, played in oTree. "
                       "Every file, its columns (meaning, type, unit, allowed values), row count and SHA-256; "
                       "how the session was run is in its manifest (frozen at session creation). See README.txt.",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sessions": sessions,
        "resources": resources,
    }


def readme(package: dict) -> str:
    lines = [package["title"], "=" * len(package["title"]), ""]
    for s in package["sessions"]:
        lines.append(f"Session {s['session_code']}: {s['treatment']}, {s['num_participants']} participants, "
                     f"created {_time(s['created_at'])}, played {_time(s['started_at'])} to {_time(s['ended_at'])}; "
                     f"project version {s['project_version']}; manifest {s['provenance']}.")
    lines += [
        "",
        "Every .csv file is UTF-8, comma-separated, with one header row; an empty cell is a missing value.",
        "Times are Unix epoch seconds. datapackage.json (a Frictionless Data Package) describes every file:",
        "each column's meaning, type, unit and allowed values, the row count, bytes and SHA-256. Check the",
        "files against it with `pip install frictionless` and `frictionless validate datapackage.json`.",
        "The tables of docs/DATA.md (decisions, messages, participants, llm_calls, quiz attempts, manifest,",
        "the experimenter's interventions)",
        "are long ('tidy'); oTree's own exports (wide, per app, page times) are as oTree writes them.",
        "manifest_*.json: how the session was run (protocol, software versions, prompts' hashes, model",
        "settings), as frozen when the session was created; `differs_at_export` lists what today's code",
        "would record differently.",
        "",
        "Files:",
    ]
    for r in package["resources"]:
        rows = f"{r['rows']} rows, " if "rows" in r else ""
        lines.append(f"  {r['path']} ({rows}{r['bytes']} bytes): {r['description']}")
    lines += ["", "Made with oTree; publications must cite " + OTREE_CITATION, ""]
    return "\n".join(lines)


def _time(epoch) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(epoch))) if epoch else "?"


def _package(files: list[DataFile], earlier: dict | None = None) -> dict:
    paths = {f.path for f in files}
    codes = {s["session_code"] for f in files for s in f.sessions}
    resources = [r for r in (earlier or {}).get("resources", []) if r["path"] not in paths]
    sessions = [s for s in (earlier or {}).get("sessions", []) if s["session_code"] not in codes]
    for data_file in files:
        for s in data_file.sessions:
            if s not in sessions:
                sessions.append(s)
    return descriptor(resources + [resource(f) for f in files], sessions)


def _json_bytes(package: dict) -> bytes:
    return (json.dumps(package, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8")


# --- out ------------------------------------------------------------------------------------------
def zip_name(session_code: str) -> str:
    return f"lab_session_{session_code}.zip"


def session_zip(session_code: str) -> bytes:
    """The package of one session as a zip: one folder lab_session_CODE/ holding every file."""
    files = session_files(session_code)
    package = _package(files)
    folder = Path(zip_name(session_code)).stem
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for data_file in files:
            archive.writestr(f"{folder}/{data_file.path}", data_file.data)
        archive.writestr(f"{folder}/{DESCRIPTOR}", _json_bytes(package))
        archive.writestr(f"{folder}/{README}", readme(package).encode("utf-8"))
    return buffer.getvalue()


def write_folder(folder: Path, session_code: str) -> Path:
    """The package's files in ``folder``; its datapackage.json and README.txt list the sessions
    exported there before as well (their files are kept when still present)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = session_files(session_code)
    for data_file in files:
        (folder / data_file.path).write_bytes(data_file.data)
    descriptor_path = folder / DESCRIPTOR
    earlier = None
    if descriptor_path.exists():
        earlier = json.loads(descriptor_path.read_text(encoding="utf-8"))
        earlier["resources"] = [r for r in earlier.get("resources", []) if (folder / r["path"]).exists()]
    package = _package(files, earlier)
    descriptor_path.write_bytes(_json_bytes(package))
    (folder / README).write_text(readme(package), encoding="utf-8")
    return descriptor_path
