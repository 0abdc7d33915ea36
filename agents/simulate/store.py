"""The run folder: every finished game is one JSON line, written as the game ends.

``games.jsonl`` holds, per game, both agents' turns (with every call on the record) and both
agents' states after the game. Each agent plays one game per round, so an agent's state is
the one in its latest game: a rerun skips finished games and restores agents from there.
A line cut by a kill is ignored (that game is played again, its calls served by the cache).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

GAMES_FILE = "games.jsonl"
SPENDING_FILE = "spending.json"
FINGERPRINTS_FILE = "fingerprints.json"


class FingerprintMismatch(RuntimeError):
    pass


class RunStore:
    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)  # created on the first write: an estimate leaves no trace
        self.games_path = self.dir / GAMES_FILE
        self._games_file = None

    # --- games ---------------------------------------------------------------------------
    def read_games(self) -> Iterator[dict[str, Any]]:
        if not self.games_path.exists():
            return
        with open(self.games_path, encoding="utf-8") as f:
            for line in f:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line of a killed run

    def append_game(self, record: dict[str, Any]) -> None:
        if self._games_file is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._repair_tail()
            self._games_file = open(self.games_path, "a", encoding="utf-8")
        # One write per line, flushed at once: a kill loses at most the game in flight.
        self._games_file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._games_file.flush()

    def _repair_tail(self) -> None:
        """End a line cut by a kill so that the next record starts on a line of its own."""
        if self.games_path.exists() and self.games_path.stat().st_size:
            with open(self.games_path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def close(self) -> None:
        if self._games_file is not None:
            self._games_file.close()
            self._games_file = None

    # --- money spent by earlier attempts -------------------------------------------------
    def spending(self) -> dict[str, float]:
        return self._read_json(SPENDING_FILE, {})

    def record_spending(self, attempt: str, usd: float) -> None:
        self._write_json(SPENDING_FILE, {**self.spending(), attempt: usd})

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
