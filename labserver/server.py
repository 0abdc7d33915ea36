"""Start the lab server: oTree's prodserver (database on disk, page timeouts enforced by its
timeout worker even for closed tabs), then print where to open it.

Two modes that cannot be mistaken for each other. ``run`` is the try-out (``make run``): oTree's
debug mode, no passwords, the admin open; the console says so, and every participant page
carries a red "try-out server" ribbon (lab/server/otree_language.py). ``run --lab`` is a lab's server
(``make lab``): oTree's production mode (no debug panel, "Restart as new participant" or
"[debug]" in the tab), refused before it starts without the admin login's settings.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def _lan_address() -> str | None:
    """The address cubicle PCs use to reach this machine (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only selects the outgoing interface
            return s.getsockname()[0]
    except OSError:
        return None


def _wait_until_listening(port: int, process: subprocess.Popen, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.3)
    return False


def prepare_sqlite(workdir: Path = Path(".")) -> None:
    """Put oTree's SQLite file in WAL mode (it persists in the file).

    prodserver runs two processes on the file: the server and its timeout worker, which reads
    inside a transaction while it POSTs timed-out pages to the server. In SQLite's default mode
    that read lock stops the server's commit until "database is locked" (seen with 72
    participants); in WAL mode readers never block the writer, and commits are cheaper.
    """
    import sqlite3

    with sqlite3.connect(workdir / "db.sqlite3") as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def masked_database_url(url: str) -> str:
    """DATABASE_URL as the banner shows it: the password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def database_problem(url: str) -> str | None:
    """Why DATABASE_URL cannot work, in one sentence (None if it looks usable)."""
    try:
        from sqlalchemy.engine.url import make_url

        parsed = make_url(url)
    except Exception:
        return f"DATABASE_URL is not a database URL ({masked_database_url(url)!r})."
    backend = parsed.drivername.split("+")[0]
    if backend not in ("postgresql", "postgres", "sqlite"):
        return f"DATABASE_URL names {backend!r}; this lab runs on postgresql://… or sqlite:///…."
    return None


def start_banner(port: int, database: str, env: dict, lan: str | None) -> str:
    """What the console shows once the server answers: a lab's server, or loudly a try-out."""
    from lab.base import production

    rule = "=" * 72
    lines = ["", rule]
    if production.is_production(env):
        lines += [f"  LAB SERVER (oTree production mode), database: {database}",
                  f"  Admin:         http://localhost:{port}/ (user admin, OTREE_ADMIN_PASSWORD)"]
        if database.startswith("SQLite"):
            lines.append("  SQLite: for small sessions; a lab of 72 runs on PostgreSQL (DATABASE_URL)")
        lines.append("  Before participants arrive: .venv/bin/python -m labserver preflight (another terminal)")
    else:
        banner = "!" * 72
        lines += [banner,
                  "  TRY-OUT SERVER (oTree debug mode): NOT FOR A SESSION WITH PARTICIPANTS",
                  "  Participant pages show a red try-out ribbon and oTree's debug panel, and the admin",
                  "  is open to anyone who can reach this machine. A lab runs `make lab` (production",
                  "  mode, passwords) and `labserver preflight`: docs/running-a-lab.md.",
                  banner,
                  f"  Open:          http://localhost:{port}/ (database: {database})"]
    if lan:
        lines.append(f"  Cubicle PCs:   http://{lan}:{port}/room/lab")
    lines += ["  Stop with Ctrl-C", rule, ""]
    return "\n".join(lines)


def serve(port: int, lab: bool = False, host: str = "0.0.0.0") -> int:
    """``lab``: production mode, or nothing started (2) without its settings. ``host``: the
    address to listen on (127.0.0.1 behind a reverse proxy on the same machine)."""
    from lab.base import production

    env = dict(os.environ)
    if lab:
        env["OTREE_PRODUCTION"] = "1"
        missing = production.missing_settings(env)
        if missing:
            print(f"Not starting the lab server: production mode needs {', '.join(missing)} in the environment "
                  "(docs/running-a-lab.md, Production mode). To try the lab out instead: make run.", file=sys.stderr)
            return 2
    if not env.get("DATABASE_URL", "").strip():
        env.pop("DATABASE_URL", None)  # empty means the default: SQLite
        prepare_sqlite()
    else:
        problem = database_problem(env["DATABASE_URL"])
        if problem:
            print(f"Not starting: {problem} Leave it unset (or empty) for SQLite in ./db.sqlite3; "
                  "see docs/running-a-lab.md.", file=sys.stderr)
            return 2
    # prodserver starts `otree` by name for its timeout worker: the venv's bin must be on PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    database = masked_database_url(env["DATABASE_URL"]) if env.get("DATABASE_URL") else "SQLite (./db.sqlite3)"
    process = subprocess.Popen(["otree", "prodserver", f"{host}:{port}"], env=env)
    try:
        if _wait_until_listening(port, process):
            lan = _lan_address() if host == "0.0.0.0" else None  # behind a proxy: the proxy's address
            print(start_banner(port, database, env, lan), flush=True)
        return process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            return 1
