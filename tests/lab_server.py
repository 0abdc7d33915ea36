"""An oTree production server for tests and benches, and the helpers around it.

oTree always keeps SQLite in ./db.sqlite3 of its working directory, so every server or bot
run works in its own folder (``make_project_copy``) that links to the project's files.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import protocol
from tests import processes

PROJECT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# The quiz's right answers as a participant types them: the payoffs of protocol.py.
QUIZ_ANSWERS = {**{f"quiz_{own}{other}": str(protocol.payoff(own, other)) for own, other in protocol.PAYOFFS},
                "quiz_same_associate": "False"}


def make_project_copy(work: Path) -> Path:
    """A working directory that sees the project's files but has its own database."""
    from labserver.workdir import link_project

    return link_project(work, PROJECT)


def lab_env(database_url: str = "", **extra) -> dict:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    for key in ("OTREE_PRODUCTION", "OTREE_AUTH_LEVEL", "OTREE_IN_MEMORY"):
        env.pop(key, None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(PROJECT)
    env.update(extra)
    return env


# ``python -m labserver`` with oTree's random generator seeded first: the session's and the
# participants' codes, and so everything the session draws from them, are the same every run.
_SEEDED_LABSERVER = ("import sys, otree.common; otree.common.rng.seed({seed}); "
                     "from labserver.__main__ import main; sys.exit(main(sys.argv[1:]))")


def run_bots(workdir: Path, config: str, participants: int, overrides: dict, database_url: str = "",
             export_dir: Path | None = None, timeout: float = 600, extra_env: dict | None = None,
             database: str = "rehearsal", seed: int | None = None) -> subprocess.CompletedProcess:
    """``labserver bots`` in ``workdir``; ``database="lab"`` plays into the database a server
    started there serves (``workdir``'s ./db.sqlite3, or ``database_url``); ``seed`` makes the
    session's codes (and all they seed) the same every run."""
    command = [PYTHON, "-m", "labserver"] if seed is None else [PYTHON, "-c", _SEEDED_LABSERVER.format(seed=seed)]
    args = command + ["bots", config, str(participants), "--database", database]
    args += [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    if export_dir:
        args += ["--export", str(export_dir)]
    # No unplayed rounds to step through: the apps have exactly the rounds the session plays.
    rounds = {"LAB_MAX_ROUNDS_PER_GAME": str(overrides["rounds_per_game"])} if "rounds_per_game" in overrides else {}
    result = processes.run(args, cwd=workdir, env=lab_env(database_url, **rounds, **(extra_env or {})),
                           capture_output=True, text=True,
                           timeout=timeout)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise AssertionError(f"bots failed for {config}:\n{tail}")
    return result


def completed_session_code(result: subprocess.CompletedProcess) -> str:
    """The code of the session a ``run_bots`` run completed (its output names it)."""
    return result.stdout.split("Bots completed session ", 1)[1].split()[0]


def run_test_experiment_bots(workdir: Path, config: str, participants: int, overrides: dict, pages: Path, *,
                             database_url: str = "", export_dir: Path | None = None, database: str = "rehearsal",
                             extra_env: dict | None = None) -> str:
    """``run_bots`` of a config of the tests' own experiment files (LAB_TEST_EXPERIMENTS), the bots
    keeping the pages they check in ``pages`` (LAB_BOT_PAGES, made here); the session's code."""
    pages.mkdir(exist_ok=True)
    result = run_bots(workdir, config, participants, overrides, database_url, export_dir=export_dir,
                      database=database, extra_env={"LAB_TEST_EXPERIMENTS": "1", "LAB_BOT_PAGES": str(pages),
                                                    **(extra_env or {})})
    return completed_session_code(result)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"server did not listen on port {port} within {timeout} s")


class LabServer:
    """An `otree prodserver` in its own folder: as a lab runs it (database on disk, timeouts
    enforced server-side), on a free port. ``restart(kill=True)`` is a kill -9 and a new start."""

    def __init__(self, workdir: Path, database_url: str = "", **env):
        self.workdir = workdir
        self.database_url = database_url
        self.env = lab_env(database_url, **env)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log_path = workdir / f"server-{self.port}.log"

    def start(self) -> "LabServer":
        if not self.database_url:
            from labserver.server import prepare_sqlite

            prepare_sqlite(self.workdir)
        log = self.log_path.open("a")
        self.process = processes.popen(
            ["otree", "prodserver", f"127.0.0.1:{self.port}"], cwd=self.workdir, env=self.env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        wait_for_port(self.port, self.process)
        return self

    def stop(self, kill: bool = False) -> None:
        if self.process and self.process.poll() is None:
            import signal

            # the timeout worker is a child process: signal the whole group
            os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def restart(self, kill: bool = True) -> None:
        self.stop(kill=kill)
        self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def query(self, sql: str) -> list[tuple]:
        """The rows of one SELECT, straight from the server's database (PostgreSQL or its SQLite)."""
        return self._run([sql])

    def execute(self, statements: list[str]) -> None:
        """Write to the server's database behind its back (a test's setting of the scene), in one
        transaction."""
        self._run(statements)

    def _run(self, statements: list[str]) -> list[tuple]:
        """``statements`` in one transaction on a connection of their own (committed, then closed);
        the rows of the last, if it returns any."""
        if self.database_url:
            import psycopg2

            connection = psycopg2.connect(self.database_url)
        else:
            import sqlite3

            connection = sqlite3.connect(self.workdir / "db.sqlite3")
        try:
            cursor = connection.cursor()
            for statement in statements:
                cursor.execute(statement)
            rows = cursor.fetchall() if cursor.description else []
            connection.commit()
            return rows
        finally:
            connection.close()

    # --- oTree's REST API -----------------------------------------------------------
    def rest_headers(self) -> dict:
        """With OTREE_AUTH_LEVEL set, oTree's REST API wants the key of OTREE_REST_KEY."""
        key = self.env.get("OTREE_REST_KEY")
        return {"otree-rest-key": key} if key else {}

    def create_session(self, config: str, participants: int, *, timeout: float = 60, **config_fields) -> dict:
        import requests

        response = requests.post(f"{self.base_url}/api/sessions", json=dict(
            session_config_name=config, num_participants=participants,
            modified_session_config_fields=config_fields,
        ), headers=self.rest_headers(), timeout=timeout)
        assert response.ok, f"{response.status_code}: {response.text[:500]}"
        return dict(self.get_session(response.json()["code"]), created=response.json())  # created: the POST's answer

    def get_session(self, code: str) -> dict:
        import requests

        response = requests.post(f"{self.base_url}/api/get_session/{code}", json={}, headers=self.rest_headers(),
                                 timeout=30)
        assert response.ok, f"{response.status_code}: {response.text[:500]}"
        return response.json()

    def start_url(self, participant_code: str) -> str:
        return f"{self.base_url}/InitializeParticipant/{participant_code}"

    def export(self, app: str, function_name: str, session_code: str) -> list[dict]:
        import csv
        import io

        import requests

        response = requests.get(f"{self.base_url}/api/export_app_custom", params=dict(
            app=app, function_name=function_name, session_code=session_code), timeout=60)
        assert response.ok, f"{response.status_code}: {response.text[:500]}"
        return list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))




def exported_table(export_dir: Path, name: str) -> list[dict]:
    """The rows of one of docs/DATA.md's tables (``decisions``, ``llm_calls``...) that ``labserver
    bots --export`` wrote to ``export_dir``."""
    import csv

    [path] = export_dir.glob(f"payment_custom_export_{name}_*.csv")
    with path.open(encoding="utf8") as handle:
        return list(csv.DictReader(handle))


def journal_rows(server: LabServer) -> list[tuple]:
    """(state, record JSON) of every call in the server's call journal."""
    import sqlite3

    [path] = list(server.workdir.glob("llm_call_journal-*.sqlite3"))
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT state, record FROM calls").fetchall()


def current_page(server: LabServer, code: str) -> str:
    """Where the server has the participant (the start address redirects there)."""
    import requests

    response = requests.get(f"{server.base_url}/InitializeParticipant/{code}", timeout=30, allow_redirects=False)
    return response.headers.get("location", "")
