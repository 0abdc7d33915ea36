"""``python -m labserver preflight``: the morning's checks of a lab's server, one line each.

Run it in the lab's folder, with the environment the server runs with (its EnvironmentFile),
once the server has started: each line says ``ok`` and what was found, or ``FAIL`` and what to
do; the exit status is 1 when a check failed. No secret is printed (a database URL's password
is masked). The checks (docs/running-a-lab.md, The morning):

- production mode and its settings (lab/base/production.py);
- DATABASE_URL names PostgreSQL, which answers;
- its tables are those oTree makes for the installed apps (every table and column);
- a timeout worker runs for this folder (found among the machine's processes: prodserver
  starts it; only it advances the pages of closed tabs), its server answers, and it runs in
  production mode on the same database;
- each room's participant labels: the file there, not empty, no label twice, only the
  characters oTree accepts;
- the model of the agent session configs answers (agents/models/check.py; the offline simulated
  model passes without a call, a configured model gets its one real call);
- free disk space in the lab's folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional

MIN_FREE_BYTES = 1 << 30  # logs, the model calls' journal, exports and a pg_dump are tens of MB
DB_CONNECT_SECONDS = 5
LABEL_RE = re.compile(r"^[a-zA-Z0-9_]+$")  # otree.common.validate_alphanumeric's rule
SETUP_HELP = "docs/running-a-lab.md"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


def main(port: int, environ: Mapping[str, str] = os.environ, folder: Path = Path(".")) -> int:
    failed = False
    for check in run_checks(port, environ, folder):
        print(check.line(), flush=True)
        failed = failed or not check.ok
    print("Preflight: " + ("FAILED, see the lines marked FAIL." if failed else "every check passed."))
    return 1 if failed else 0


def run_checks(port: int, environ: Mapping[str, str], folder: Path) -> Iterator[Check]:
    folder = folder.resolve()
    yield production_check(environ)
    database = database_check(environ)
    yield database
    if database.ok:
        yield tables_check(environ["DATABASE_URL"], folder)
    else:
        yield Check("tables", False, "not checked: no PostgreSQL database to look in (see the line above)")
    yield server_check(timeout_workers(folder), port, environ)
    with environment(environ):  # settings.py and the model's SDK read it
        settings, problem = project_settings(folder)
        if settings is None:
            yield Check("settings", False, f"settings.py stops: {problem}")
            return
        yield from room_checks(settings, folder)
        yield from model_checks(settings)
    yield disk_check(folder)


# --- production mode --------------------------------------------------------------------
def production_check(environ: Mapping[str, str]) -> Check:
    from lab.base import production

    if not production.is_production(environ):
        return Check("production mode", False, "OTREE_PRODUCTION is not set: oTree's debug mode (a try-out) shows "
                     "participants its debug panel. Start the server with `make lab`, or set OTREE_PRODUCTION=1 "
                     f"with {', '.join(production.missing_settings({}))} ({SETUP_HELP}, Production mode)")
    missing = production.missing_settings(environ)
    if missing:
        return Check("production mode", False, f"set {', '.join(missing)} ({SETUP_HELP}, Production mode)")
    return Check("production mode", True, "OTREE_PRODUCTION, admin login (OTREE_AUTH_LEVEL=STUDY), "
                 "admin password and secret key set")


# --- the database -----------------------------------------------------------------------
def database_check(environ: Mapping[str, str]) -> Check:
    from labserver.server import database_problem, masked_database_url

    url = environ.get("DATABASE_URL", "").strip()
    if not url:
        return Check("database", False, "DATABASE_URL is not set, so the server uses SQLite (./db.sqlite3): a lab "
                     f"runs on PostgreSQL. Create its database and user ({SETUP_HELP}, PostgreSQL) and set "
                     "DATABASE_URL=postgresql://USER:PASSWORD@HOST/DATABASE")
    problem = database_problem(url)
    if problem:
        return Check("database", False, problem)
    shown = masked_database_url(url)
    if not url.startswith(("postgresql", "postgres")):
        return Check("database", False, f"{shown} is SQLite: a lab runs on PostgreSQL ({SETUP_HELP}, PostgreSQL)")
    try:
        import psycopg2

        connection = psycopg2.connect(_psycopg2_url(url), connect_timeout=DB_CONNECT_SECONDS)
        try:
            version = connection.server_version
        finally:
            connection.close()
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        password = _password(url)
        if password:
            reason = reason.replace(password, "***")
        return Check("database", False, f"cannot connect to {shown}: {reason}. Is PostgreSQL running, and are "
                     "the host, user, password and database those you created?")
    return Check("database", True, f"PostgreSQL {version // 10000}.{version % 10000} at {shown}")


def _psycopg2_url(url: str) -> str:
    """SQLAlchemy's spelling (postgresql+psycopg2://, postgres://) as libpq takes it."""
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql://", url)


def _password(url: str) -> Optional[str]:
    from urllib.parse import urlsplit

    return urlsplit(url).password


def tables_check(database_url: str, folder: Path) -> Check:
    try:
        expected = expected_schema(folder)
    except RuntimeError as error:
        return Check("tables", False, f"oTree's schema for the apps could not be read: {error}")
    import sqlalchemy

    engine = sqlalchemy.create_engine(database_url)
    try:
        inspector = sqlalchemy.inspect(engine)
        present = {table: {column["name"] for column in inspector.get_columns(table)}
                   for table in inspector.get_table_names()}
    finally:
        engine.dispose()
    return judge_tables(expected, present)


def judge_tables(expected: dict[str, set[str]], present: dict[str, set[str]]) -> Check:
    if not set(expected) & set(present):
        return Check("tables", False, "the database has none of oTree's tables yet: start the server (make lab, "
                     "or its service) once, it makes them; then run preflight again")
    missing_tables = sorted(set(expected) - set(present))
    missing_columns = sorted(f"{table}.{column}" for table in set(expected) & set(present)
                             for column in expected[table] - present[table])
    if missing_tables or missing_columns:
        missing = missing_tables + missing_columns
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        return Check("tables", False, f"the database was made by another version of the apps (missing: {shown}); "
                     "oTree adds no column to an existing table. Keep that database for its data and give this "
                     f"version a new one ({SETUP_HELP}, PostgreSQL)")
    return Check("tables", True, f"all {len(expected)} of oTree's tables for the installed apps, every column there")


SCHEMA_SCRIPT = (
    "import json; from otree.main import setup; setup(); from otree.database import AnyModel; "
    "print('LAB_SCHEMA ' + json.dumps({t.name: sorted(c.name for c in t.columns) "
    "for t in AnyModel.metadata.sorted_tables}))"
)


def expected_schema(folder: Path) -> dict[str, set[str]]:
    """The tables and columns oTree makes for the apps of ``folder``: oTree set up in a process of
    its own, in a folder linked to the project, on SQLite in memory (the lab's database untouched)."""
    from labserver.workdir import link_project

    with tempfile.TemporaryDirectory(prefix="lab-preflight-") as temporary:
        project = link_project(Path(temporary) / "project", folder)
        env = {key: value for key, value in os.environ.items()
               if key not in ("DATABASE_URL", "OTREE_PRODUCTION", "OTREE_AUTH_LEVEL")}
        env.update(OTREE_IN_MEMORY="1", PYTHONPATH=str(folder))
        result = subprocess.run([sys.executable, "-c", SCHEMA_SCRIPT], cwd=project, env=env,
                                capture_output=True, text=True, timeout=300)
    for line in result.stdout.splitlines():
        if line.startswith("LAB_SCHEMA "):
            return {table: set(columns) for table, columns in json.loads(line[len("LAB_SCHEMA "):]).items()}
    raise RuntimeError((result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1])


# --- the running server and its timeout worker ----------------------------------------------
@dataclass(frozen=True)
class Worker:
    pid: int
    port: int
    environ: Optional[dict]  # None: not readable (another user's process)


def timeout_workers(folder: Path, proc: Path = Path("/proc")) -> Optional[list[Worker]]:
    """The `otree timeoutsubprocess PORT` processes working in ``folder``; None where processes
    cannot be listed (no /proc)."""
    if not proc.is_dir():
        return None
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if "timeoutsubprocess" not in arguments or os.path.realpath(entry / "cwd") != str(folder):
                continue
            port = int(arguments[arguments.index("timeoutsubprocess") + 1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or another user's (its folder cannot be read)
        try:
            pairs = (entry / "environ").read_bytes().decode(errors="replace").split("\0")
            environ = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        except OSError:
            environ = None
        found.append(Worker(int(entry.name), port, environ))
    return found


def server_check(workers: Optional[list[Worker]], port: int, environ: Mapping[str, str]) -> Check:
    from lab.base import production
    from labserver.server import masked_database_url

    name = "timeout worker"
    if workers is None:
        return Check(name, False, "not checked: this system does not list its processes in /proc. Check that the "
                     "server was started with `make lab` (prodserver, which starts the timeout worker)")
    mine = [worker for worker in workers if worker.port == port] or workers
    if not mine:
        return Check(name, False, "no server with its timeout worker runs in this folder: start it with `make lab` "
                     "(or its service). Only prodserver's timeout worker advances the pages of closed tabs")
    worker = mine[0]
    if worker.port != port:
        return Check(name, False, f"the server of this folder runs on port {worker.port}, not {port}: give "
                     f"--port {worker.port}")
    if worker.environ is not None:
        if not production.is_production(worker.environ):
            return Check(name, False, "the running server is in oTree's debug mode (a try-out, `make run`): "
                         "participants would see its debug panel. Stop it and start `make lab`")
        theirs, ours = worker.environ.get("DATABASE_URL", "").strip(), environ.get("DATABASE_URL", "").strip()
        if theirs != ours:
            return Check(name, False, f"the running server uses {masked_database_url(theirs) if theirs else 'SQLite'}"
                         f", this shell {masked_database_url(ours) if ours else 'SQLite'}: run preflight with the "
                         "server's environment (its EnvironmentFile)")
    if not _answers(worker.port):
        return Check(name, False, f"the timeout worker runs (pid {worker.pid}) but no server answers on port "
                     f"{worker.port}: restart the server (make lab, or its service)")
    if worker.environ is None:
        return Check(name, True, f"running (pid {worker.pid}, port {worker.port}); its environment is another "
                     "user's, so the lines above are of this shell's environment, not the server's")
    return Check(name, True, f"running with its server (pid {worker.pid}, port {worker.port}), production mode, "
                 "the same database")


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/favicon.ico", timeout=10):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False


# --- the project's settings: rooms and agent models -------------------------------------
@contextlib.contextmanager
def environment(environ: Mapping[str, str]) -> Iterator[None]:
    """The process's environment is ``environ`` for the block."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def project_settings(folder: Path):
    """(settings module of ``folder``, None) or (None, why it does not load). Production mode's own
    refusal is the first line's business, not a reason to leave the rooms and models unchecked."""
    import importlib

    production = os.environ.pop("OTREE_PRODUCTION", None)
    sys.path.insert(0, str(folder))
    try:
        sys.modules.pop("settings", None)
        return importlib.import_module("settings"), None
    except SystemExit as stop:
        return None, str(stop)
    finally:
        sys.path.remove(str(folder))
        if production is not None:
            os.environ["OTREE_PRODUCTION"] = production


def room_checks(settings, folder: Path) -> Iterator[Check]:
    for room in getattr(settings, "ROOMS", []):
        if room.get("participant_label_file"):
            yield labels_check(room["name"], folder / room["participant_label_file"])


def labels_check(room: str, path: Path) -> Check:
    name = f"room {room}"
    try:
        labels = path.read_text(encoding="utf-8").split()  # oTree's reading: any whitespace separates
    except OSError as error:
        return Check(name, False, f"its participant label file {path} cannot be read ({error.strerror}): one label "
                     "per cubicle PC, one per line")
    if not labels:
        return Check(name, False, f"{path} has no labels: write one per cubicle PC, one per line")
    bad = [label for label in labels if not LABEL_RE.match(label)]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    problems = []
    if bad:
        problems.append(f"{', '.join(map(repr, bad[:5]))}: only letters, digits and _ (oTree refuses the room)")
    if twice:
        problems.append(f"{', '.join(twice[:5])} more than once (two PCs would share a participant)")
    if problems:
        return Check(name, False, f"{path}: " + "; ".join(problems))
    return Check(name, True, f"{len(labels)} labels ({labels[0]} … {labels[-1]})")


def model_checks(settings) -> Iterator[Check]:
    """One model check per distinct model of the agent session configs."""
    from agents.config import ConfigError, ModelConfig
    from agents.models import build_model, check_model

    by_model: dict[str, tuple[Optional[ModelConfig], list[str], Optional[str]]] = {}
    for config in settings.SESSION_CONFIGS:
        merged = {**settings.SESSION_CONFIG_DEFAULTS, **config}
        if merged.get("associate_type") == "human":
            continue
        try:
            model_config, problem = ModelConfig.from_session_config(merged), None
            key = model_config.model_dump_json()
        except ConfigError as error:
            model_config, problem = None, str(error)
            key = f"refused: {problem}"
        by_model.setdefault(key, (model_config, [], problem))[1].append(merged["name"])
    for model_config, names, problem in by_model.values():
        configs = f"{len(names)} agent session config{'s' if len(names) > 1 else ''}"
        if model_config is None:
            yield Check("agents' model", False, f"{configs} ({names[0]}, …): {problem}")
            continue
        model = "" if model_config.provider == "simulated" else f" {model_config.model}"
        label = f"{model_config.provider}{model} ({configs})"
        try:
            problem, reply = check_model(model_config, model=build_model(model_config))
        except ConfigError as error:
            yield Check(f"agents' model {label}", False, f"{error} (docs/lab-agents.md)")
            continue
        if problem:
            yield Check(f"agents' model {label}", False, problem)
        elif model_config.provider == "simulated":
            yield Check(f"agents' model {label}", True, "the offline simulated agents: no model to call")
        else:
            yield Check(f"agents' model {label}", True, f"answered the model check ({reply.status})")


# --- the disk ------------------------------------------------------------------------------
def disk_check(folder: Path, min_free: int = MIN_FREE_BYTES) -> Check:
    free = shutil.disk_usage(folder).free
    shown = f"{free / (1 << 30):.1f} GiB free in {folder}"
    if free < min_free:
        return Check("disk space", False, f"only {shown}; free at least {min_free / (1 << 30):.0f} GiB (the "
                     "server's logs, exports and backups grow during a session)")
    return Check("disk space", True, shown)
