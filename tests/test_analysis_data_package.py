"""``python -m analysis`` on what the lab's admin downloads: the data package (lab/record/data_package.py) as
a zip, unzipped, several at once or in a downloads folder; anything else refused in one line; the
report's files table counting each file's rows; sessions of two protocols (languages) not pooled.

The packages here have the real layout (one folder lab_session_CODE/ of the DATA.md tables, oTree's
own exports, the manifest as CSV and JSON, datapackage.json, README.txt) around synthetic data;
tests/test_data_package.py runs the analysis on a package the lab exported."""

from __future__ import annotations

import csv
import json
import re
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from analysis import load_exports, manifest, synthetic
from analysis.__main__ import main as cli_main
from lab.record.manifest import FROZEN

TABLE_FILES = {"decisions": "payment_custom_export_decisions", "messages": "payment_custom_export_messages",
               "participants": "payment_custom_export_participants", "llm_calls": "payment_custom_export_llm_calls"}


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    parameters = synthetic.SyntheticParameters(participants_per_session=6, label_settings=("informed",),
                                               treatments=("H-H", "H-F"))
    return synthetic.generate(parameters, seed=7, annotations=False)


def _manifest_rows(code: str, language: str) -> list[list[str]]:
    record = {"manifest_version": 2, "provenance": FROZEN, "session_code": code, "treatment": "H-F",
              "session_config": {"language": language, "name": "hf_informed_wc_first"},
              "stage_limits": {"decision": 40, "message_1": 60}, "rounds_per_game": 10, "message_max_chars": 300,
              "payoff_table": {"AA": [70, 70]}, "payment": {"participation_fee": 15.0}, "prompts_sha256": "abc"}
    return [["session_code", "key", "value", "value_at_export"]] + [
        [code, key, json.dumps(value), ""] for key, value in record.items()]


def package_folder(tables: dict[str, pd.DataFrame], code: str, parent: Path, language: str = "en") -> Path:
    """lab_session_CODE/ as lab/record/data_package.py lays it out."""
    folder = parent / f"lab_session_{code}"
    folder.mkdir(parents=True)
    for name, file_stem in TABLE_FILES.items():
        tables[name][tables[name]["session_code"] == code].to_csv(folder / f"{file_stem}_{code}.csv", index=False)
    with (folder / f"payment_custom_export_manifest_{code}.csv").open("w", newline="", encoding="utf-8") as fp:
        csv.writer(fp).writerows(_manifest_rows(code, language))
    people = tables["participants"][tables["participants"]["session_code"] == code]
    pd.DataFrame({"participant.code": people["participant_code"], "session.code": code,
                  "session.config.language": language}).to_csv(folder / f"all_apps_wide_{code}.csv", index=False)
    pd.DataFrame({"session_code": code, "participant_id_in_session": range(1, 4), "participant_code": "p",
                  "page_index": range(3), "app_name": "instructions", "page_name": "Welcome", "round_number": 1,
                  "timeout_happened": 0, "is_wait_page": 0, "epoch_time_completed": 1.7e9}).to_csv(
        folder / f"PageTimes_{code}.csv", index=False)
    (folder / f"manifest_{code}.json").write_text(json.dumps({"session_code": code}), encoding="utf-8")
    resources = [{"path": p.name, "rows": len(pd.read_csv(p))} for p in sorted(folder.glob("*.csv"))]
    (folder / "datapackage.json").write_text(json.dumps({"resources": resources}), encoding="utf-8")
    (folder / "README.txt").write_text(f"Session {code}\n", encoding="utf-8")
    return folder


def zipped(folder: Path) -> Path:
    """The package as the admin's Data package tab sends it: the folder inside one zip."""
    archive_path = folder.parent / f"{folder.name}.zip"
    with zipfile.ZipFile(archive_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, f"{folder.name}/{path.name}")
    return archive_path


def _sessions(tables) -> list[str]:
    decisions = tables["decisions"]
    return [decisions.loc[decisions["treatment"] == t, "session_code"].iloc[0] for t in ("H-H", "H-F")]


def _decisions_of(tables, codes) -> int:
    return int(tables["decisions"]["session_code"].isin(codes).sum())


def test_the_zip_as_downloaded_is_analysed_and_the_files_table_counts_every_files_rows(tables, tmp_path, capsys):
    _, hf = _sessions(tables)
    folder = package_folder(tables, hf, tmp_path)
    (folder / "header_only.csv").write_text(",".join(tables["llm_calls"].columns) + "\n", encoding="utf-8")
    (folder / "empty.csv").write_text("", encoding="utf-8")
    blank_lines = folder / f"PageTimes_{hf}.csv"
    blank_lines.write_text(blank_lines.read_text(encoding="utf-8") + "\n\n", encoding="utf-8")
    archive = zipped(folder)
    out = tmp_path / "report"
    assert cli_main([str(archive), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error" not in err, err
    decisions = pd.read_csv(out / "tables" / "tidy_decisions.csv")
    assert set(decisions["session_code"]) == {hf} and len(decisions) == _decisions_of(tables, [hf])

    # Every file with its rows as the file holds them (not 0 for oTree's own exports or the manifest).
    files = pd.read_csv(out / "tables" / "overview_files.csv").set_index("file")
    inside = f"{archive}/lab_session_{hf}"  # a member of the zip is named inside its archive
    assert sorted(files.index) == sorted(f"{inside}/{path.name}" for path in folder.glob("*.csv"))
    for path in folder.glob("*.csv"):
        with path.open(newline="", encoding="utf-8") as fp:
            records = [row for row in csv.reader(fp) if row]
        assert files.loc[f"{inside}/{path.name}", "rows"] == max(len(records) - 1, 0), path.name
    for resource in json.loads((folder / "datapackage.json").read_text(encoding="utf-8"))["resources"]:
        assert files.loc[f"{inside}/{resource['path']}", "rows"] == resource["rows"]  # the package's own count
    assert (files.loc[f"{inside}/PageTimes_{hf}.csv", "rows"], files.loc[f"{inside}/all_apps_wide_{hf}.csv", "rows"],
            files.loc[f"{inside}/payment_custom_export_manifest_{hf}.csv", "rows"]) == (3, 6, 11)
    used = files.loc[f"{inside}/{TABLE_FILES['decisions']}_{hf}.csv"]
    assert used["table"] == "decisions" and used["rows_used"] == used["rows"] == len(decisions)
    assert files.loc[f"{inside}/PageTimes_{hf}.csv", "table"] == "page times"
    assert pd.isna(files.loc[f"{inside}/PageTimes_{hf}.csv", "rows_used"])  # read, not analysed
    html = (out / "report.html").read_text(encoding="utf-8")
    row = re.search(rf"<td>{re.escape(f'{inside}/PageTimes_{hf}.csv')}</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>"
                    r"\s*<td>(.*?)</td>", html)  # the report's files table: file, table, rows, rows used
    assert row.groups() == ("page times", "3", "") and "&lt;NA&gt;" not in html


def test_unzipped_several_at_once_or_in_a_downloads_folder(tables, tmp_path):
    hh, hf = _sessions(tables)
    unzipped = {code: package_folder(tables, code, tmp_path / "unzipped") for code in (hh, hf)}
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    zips = {code: zipped(folder).rename(downloads / f"lab_session_{code}.zip") for code, folder in unzipped.items()}
    cases = {"two zips": ([zips[hh], zips[hf]], [hh, hf]), "unzipped folder": ([unzipped[hh]], [hh]),
             "downloads folder": ([downloads], [hh, hf]),
             "a zip and its own folder": ([zips[hf], unzipped[hf]], [hf]),  # the same rows count once
             "its datapackage.json": ([unzipped[hf] / "datapackage.json"], [hf])}
    for case, (given, codes) in cases.items():
        exports = load_exports(given)
        assert sorted(set(exports.decisions["session_code"])) == sorted(codes), case
        assert len(exports.decisions) == _decisions_of(tables, codes), case
        assert not [p for p in exports.problems if p.level == "error"], case


def test_anything_else_is_refused_in_one_line_with_what_to_give_and_exit_2(tables, tmp_path, capsys):
    hh, _ = _sessions(tables)
    good = zipped(package_folder(tables, hh, tmp_path / "good"))
    cut = tmp_path / "cut.zip"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # a download cut off
    no_csv = tmp_path / "photos.zip"
    with zipfile.ZipFile(no_csv, "w") as archive:
        archive.writestr("holiday.jpg", b"\xff\xd8")
    spreadsheet = tmp_path / "results.xlsx"
    spreadsheet.write_bytes(b"PK\x03\x04")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {cut: "not a zip archive that can be read", no_csv: "a zip without CSV files",
             spreadsheet: "neither a CSV file, a zip nor a folder", tmp_path / "missing.zip": "no such file or folder",
             empty: "no CSV files in it"}
    for given, reason in cases.items():
        out = tmp_path / f"report_{given.name}"
        assert cli_main([str(good), str(given), "--out", str(out)]) == 2, given
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert reason in err and str(given) in err and "lab_session_CODE.zip" in err, err
        assert not out.exists()  # nothing written


def test_a_cut_off_row_is_named_by_its_line_inside_a_zip(tables, tmp_path):
    _, hf = _sessions(tables)
    folder = package_folder(tables, hf, tmp_path)
    decisions = folder / f"{TABLE_FILES['decisions']}_{hf}.csv"
    lines = decisions.read_text(encoding="utf-8").splitlines()
    decisions.write_text("\n".join(lines[:-1] + [lines[-1][: len(lines[-1]) // 3]]), encoding="utf-8")
    exports = load_exports(zipped(folder))
    [cut] = [p for p in exports.problems if "fewer fields than the header" in p.message]
    assert cut.file.endswith(f".zip/lab_session_{hf}/{decisions.name}") and f"line {len(lines)}" in cut.message
    entry = exports.files.set_index("file").loc[cut.file]
    assert (entry["rows"], entry["rows_used"]) == (len(lines) - 1, len(lines) - 2)


def test_sessions_in_two_languages_are_not_pooled_unless_asked(tables, tmp_path, capsys):
    hh, hf = _sessions(tables)
    english = package_folder(tables, hh, tmp_path / "en", language="en")
    chinese = package_folder(tables, hf, tmp_path / "zh", language="zh_hans")
    assert cli_main([str(english), str(chinese), "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f'language: "en" in {hh}; "zh_hans" in {hf}' in err and "--allow-mixed-protocols" in err
    assert not (tmp_path / "refused").exists()

    out = tmp_path / "pooled"
    assert cli_main([str(english), str(chinese), "--out", str(out), "--allow-mixed-protocols"]) == 0
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Pooled although the protocols differ" in report and "language" in report
    assert "share one protocol" not in report

    # the same two sessions in one language: poolable (its report says so)
    same = manifest.load_manifests([english, package_folder(tables, hf, tmp_path / "en-too", language="en")])
    assert sorted(same) == sorted([hh, hf]) and manifest.check_poolable(same) == []
    assert "All sessions share one protocol" in manifest.report_html(same, [])
