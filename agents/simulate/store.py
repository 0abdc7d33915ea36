"""The run folder: every finished game is one JSON line, written as the game ends.

``games.jsonl`` holds, per game, both agents' turns (with every call on the record) and both
agents' states after the game. Each agent plays one game per round, so an agent's state is
the one in its latest game: a rerun skips finished games and restores agents from there.
A line cut by a kill is ignored (that game is played again, its calls served by the cache).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

GAMES_FILE = "games.jsonl"
SPENDING_LOG = "spending.jsonl"  # one line per paid call, appended as its reply arrives
SPENDING_FILE = "spending.json"  # per attempt, written by earlier versions: still counted
FINGERPRINTS_FILE = "fingerprints.json"


class FingerprintMismatch(RuntimeError):
    pass


class RunStore:
    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)  # created on the first write: an estimate leaves no trace
        self.games_path = self.dir / GAMES_FILE
        self._games_file = None
        self._spending_file = None
        self._spending_lock = threading.Lock()  # the annotation step pays from its own thread

    # --- games ---------------------------------------------------------------------------
    def read_games(self, *, failed: bool = False) -> Iterator[dict[str, Any]]:
        """Finished games; with ``failed=True`` also the games written with provider failures
        (``record["failed"]``), which count as not played: a rerun plays them again."""
        for record in _read_lines(self.games_path):
            if failed or not record.get("failed"):
                yield record

    def append_game(self, record: dict[str, Any]) -> None:
        if self._games_file is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._repair_tail()
            self._games_file = open(self.games_path, "a", encoding="utf-8")
        # One write per line, flushed at once: a kill loses at most the game in flight.
        self._games_file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._games_file.flush()

    def _repair_tail(self) -> None:
        _end_cut_line(self.games_path)

    def close(self) -> None:
        if self._games_file is not None:
            self._games_file.close()
            self._games_file = None
        with self._spending_lock:
            if self._spending_file is not None:
                self._spending_file.close()
                self._spending_file = None

    # --- money spent ---------------------------------------------------------------------
    def spending(self) -> dict[str, float]:
        """USD per attempt (simulation or replay) of this run folder, from the per-call log."""
        totals: dict[str, float] = dict(self._read_json(SPENDING_FILE, {}))
        for line in _read_lines(self.dir / SPENDING_LOG):
            if line.get("cost") is not None:
                totals[line["attempt"]] = totals.get(line["attempt"], 0.0) + line["cost"]
        return totals

    def spent(self) -> float:
        return sum(self.spending().values())

    def record_call(self, attempt: str, model: str, reply: Any, scope: str = "") -> None:
        """One line per reply that was not served from the cache, flushed at once, before the
        reply is stored or used: a kill -9 loses only the calls still in flight."""
        if reply.cost is None and not reply.input_tokens and not reply.output_tokens:
            return  # nothing was paid (errors, budget refusals)
        line = json.dumps({"attempt": attempt, "model": model, "scope": scope, "status": reply.status,
                           "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                           "cost": reply.cost, "at": time.time()})
        with self._spending_lock:
            if self._spending_file is None:
                self.dir.mkdir(parents=True, exist_ok=True)
                path = self.dir / SPENDING_LOG
                _end_cut_line(path)
                self._spending_file = open(path, "a", encoding="utf-8")
            self._spending_file.write(line + "\n")
            self._spending_file.flush()

    # --- what the games of each model were played with -----------------------------------
    def check_fingerprints(self, fingerprints: dict[str, str]) -> None:
        """Refuse to mix games of a changed design into one run folder."""
        stored = self._read_json(FINGERPRINTS_FILE, {})
        changed = [k for k, v in fingerprints.items() if k in stored and stored[k] != v]
        if changed:
            raise FingerprintMismatch(
                f"the design or model settings of {changed} changed since this run folder was "
                f"written ({self.dir}); give the run a new name"
            )
        self._write_json(FINGERPRINTS_FILE, {**stored, **fingerprints})

    def _read_json(self, name: str, default: Any) -> Any:
        path = self.dir / name
        return json.loads(path.read_text()) if path.exists() else default

    def _write_json(self, name: str, data: Any) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / (name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(self.dir / name)


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a killed run


def _end_cut_line(path: Path) -> None:
    """End a line cut by a kill so that the next record starts on a line of its own."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
