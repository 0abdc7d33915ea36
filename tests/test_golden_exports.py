"""A seeded bot session's exports, byte for byte, against the copies kept in tests/data/golden_exports/.

An H-F session (the simulated model playing the fair persona, two participants, two rounds per
game, SQLite) with oTree's random generator seeded: the same codes, messages, choices and model
calls every run. What the record holds is compared whole: every custom export, oTree's own
exports, the manifest, README.txt and datapackage.json. Only what must differ from run to run is
masked, in ``masked``: clock times, the commit the code runs at, the model calls' random ids, the
installed packages' versions, the byte counts and hashes of files holding those, and the order of
a table's rows. A change to the code that changes a byte of the data shows here; a deliberate
one is accepted by regenerating the copies:
``LAB_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden_exports.py`` (then read the diff).
"""

import csv
import difflib
import io
import os
import re
from pathlib import Path

import pytest

from tests.lab_server import run_bots

GOLDEN = Path(__file__).parent / "data" / "golden_exports"
CONFIG = "hf_uninformed_woc_first"
PARTICIPANTS = 2
OVERRIDES = {"rounds_per_game": 2, "llm_provider": "simulated"}
SEED = 20261206

_RUN_TO_RUN = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[+-]\d{2}:?\d{2}|Z)?"), "<time>"),
    (re.compile(r"\b1\d{9}(?:\.\d+)?\b"), "<time>"),  # seconds since the epoch (2001-2033)
    (re.compile(r"\b[0-9a-f]{40}\b(?:\+dirty)?"), "<commit>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<call id>"),
    # the versions of the installed packages the manifest records (oTree's is pinned: kept)
    (re.compile(r'("{1,2}(?:anthropic|jinja2|openai|pydantic|python)"{1,2}: "{1,2})[0-9][^"]*'), r"\1<version>"),
    # the sizes and hashes of the files above, which hold times
    (re.compile(r"\b\d+ bytes\b"), "<n> bytes"),
    (re.compile(r'"bytes": \d+'), '"bytes": <n>'),
    (re.compile(r'"hash": "sha256:[0-9a-f]{64}"'), '"hash": "<sha256>"'),
    # how many wait pages were shown (see _WAITED_FOR_THE_ASSOCIATE)
    (re.compile(r"(PageTimes_\w+\.csv \()\d+ rows"), r"\1<n> rows"),
    (re.compile(r'("path": "PageTimes_[^"]*",\n(?:[^\n]*\n){0,10}?\s*"rows": )\d+'), r"\1<n>"),
]
# The page waiting for the associate (WaitDecision, WaitMessage1, ...) is shown only to whoever
# arrives before the agent has acted, which the scheduling of the agent's turn decides.
_WAITED_FOR_THE_ASSOCIATE = re.compile(r",Wait\w+,[^,]*,\d+,\d+,1\r?\n$")


def masked(name: str, text: str) -> str:
    """File ``name``'s ``text`` with what differs from run to run of the same seeded session
    replaced by a placeholder. A table's rows are sorted: several record events in the order they
    happened (model calls as they return, an agent's and a human's message of one stage, page
    completions), which the scheduling of concurrent requests decides."""
    for pattern, placeholder in _RUN_TO_RUN:
        text = pattern.sub(placeholder, text)
    if name.endswith(".csv"):
        header, *rows = text.splitlines(keepends=True)
        assert len(list(csv.reader(io.StringIO(text)))) == len(rows) + 1, f"{name}: one row per line"
        if name.startswith("PageTimes_"):
            assert header.rstrip().endswith(",is_wait_page"), header
            rows = [row for row in rows if not _WAITED_FOR_THE_ASSOCIATE.search(row)]
        text = header + "".join(sorted(rows))
    return text


@pytest.mark.server
def test_a_seeded_bot_session_exports_the_same_bytes(project_copy, tmp_path):
    export = tmp_path / "export"
    run_bots(project_copy, CONFIG, PARTICIPANTS, OVERRIDES, export_dir=export, seed=SEED)
    produced = {path.name: masked(path.name, path.read_text(encoding="utf-8")) for path in sorted(export.iterdir())}
    if os.environ.get("LAB_UPDATE_GOLDEN"):
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for old in GOLDEN.iterdir():
            old.unlink()
        for name, text in produced.items():
            (GOLDEN / name).write_text(text, encoding="utf-8")
    kept = {path.name: path.read_text(encoding="utf-8") for path in sorted(GOLDEN.iterdir())}
    assert sorted(produced) == sorted(kept), "the same files"
    for name, text in kept.items():
        if produced[name] != text:
            diff = difflib.unified_diff(text.splitlines(), produced[name].splitlines(), f"golden/{name}", name,
                                        lineterm="", n=1)
            pytest.fail(f"{name} differs from its golden copy:\n" + "\n".join(list(diff)[:40]))
