"""What the analysis reads: CSV files, folders of them, and data packages as downloaded.

A data package (lab/record/data_package.py) is a zip holding one folder ``lab_session_CODE/`` of CSVs
(the tables of docs/DATA.md and oTree's own exports), the manifest as JSON, ``datapackage.json``
and ``README.txt``. It may be given zipped, as downloaded, or unzipped; several at once; or
inside a folder (a downloads folder of several zips). Folders are read recursively:
``otree test --export`` folders, folders of single exports, annotation and motive files. A
member of a zip is named ``ARCHIVE.zip/FOLDER/FILE.csv`` in problems and the files table.

Anything else is listed in ``Inputs.bad``; ``Inputs.refusal`` turns it into the command line's one
line saying what was given and what to give instead (load_exports lists it as a problem).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable

WHAT_TO_GIVE = ("give the data package as downloaded (lab_session_CODE.zip) or its unzipped folder, a folder "
                "of CSV exports, or CSV files")
DESCRIPTOR = "datapackage.json"  # lab/record/data_package.py's; given alone, its folder is meant


@dataclass(frozen=True)
class CsvSource:
    """One CSV to read: a file, or a member of a zip archive."""

    name: str  # as problems and the files table show it
    path: Path
    member: str | None = None

    def read(self) -> bytes:
        if self.member is None:
            return self.path.read_bytes()
        with zipfile.ZipFile(self.path) as archive:
            return archive.read(self.member)


@dataclass
class Inputs:
    sources: list[CsvSource] = field(default_factory=list)
    bad: list[tuple[str, str]] = field(default_factory=list)  # (path, what is wrong with it)

    def refusal(self) -> str | None:
        """One line for the command line when a given path holds nothing to read, else None."""
        if self.bad:
            return "; ".join(f"{path}: {reason}" for path, reason in self.bad) + f" — {WHAT_TO_GIVE}"
        return None


def _is(path: PurePosixPath | Path, suffix: str) -> bool:
    return path.suffix.lower() == suffix


def _zip_members(path: Path, *, inside_folder: bool) -> tuple[list[CsvSource], str | None]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = [info.filename for info in archive.infolist() if not info.is_dir()]
    except (zipfile.BadZipFile, OSError) as error:
        return [], f"not a zip archive that can be read ({error}): a download cut off? Download it again"
    members = [name for name in sorted(names)
               if _is(PurePosixPath(name), ".csv") and not name.startswith("__MACOSX/")
               and not PurePosixPath(name).name.startswith("._")]  # macOS' resource forks: not CSV
    if not members and not inside_folder:
        return [], "a zip without CSV files, not a data package"
    return [CsvSource(f"{path}/{member}", path, member) for member in members], None


def collect(paths: Iterable[str | Path]) -> Inputs:
    """Every CSV the given paths hold, in a stable order, and the paths that hold nothing readable."""
    found = Inputs()
    for path in map(Path, paths):
        if path.is_file() and path.name == DESCRIPTOR:
            path = path.parent
        before = len(found.sources), len(found.bad)
        if path.is_dir():
            for inner in sorted(path.rglob("*")):
                if inner.is_file() and _is(inner, ".csv"):
                    found.sources.append(CsvSource(str(inner), inner))
                elif inner.is_file() and _is(inner, ".zip"):
                    members, problem = _zip_members(inner, inside_folder=True)
                    found.sources += members
                    if problem:
                        found.bad.append((str(inner), problem))
        elif path.is_file() and _is(path, ".zip"):
            members, problem = _zip_members(path, inside_folder=False)
            found.sources += members
            if problem:
                found.bad.append((str(path), problem))
        elif path.is_file() and _is(path, ".csv"):
            found.sources.append(CsvSource(str(path), path))
        elif path.exists():
            found.bad.append((str(path), "neither a CSV file, a zip nor a folder"))
        else:
            found.bad.append((str(path), "no such file or folder"))
        if (len(found.sources), len(found.bad)) == before:  # a folder without CSV: the wrong one?
            found.bad.append((str(path), "no CSV files in it"))
    return found
