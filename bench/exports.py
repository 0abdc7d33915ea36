"""Bench: how long each export of a finished lab session holds the server.

An export runs under oTree's global lock (lab/server/request_lock.py says why), so every page of every
session on the server waits while one is written. Creates an H-F session of 72 participants x 10
rounds with oTree (in memory, or beside ``--database-url``'s database), fills it as
bench/dashboard.py does (choices, chat messages, the agents' turns, one model call per turn with a
realistic prompt, page times), then downloads each export through oTree's own ASGI app (routing,
middleware, lock): the lab's data package (``/LabDataPackage/<code>``), the lab's custom exports,
oTree's wide export (the baseline, measured in the same run). The figure (last line) is the data
package's median time and its ratio to oTree's wide export.

Run: ``.venv/bin/python bench/exports.py [--participants 72] [--rounds 10] [--repeat 3]
[--database-url postgresql://...]``. It never touches the lab's database: SQLite in memory by
default, or a new database on --database-url's PostgreSQL server, dropped at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

from dashboard import bench_arguments, finished_session, timed_get  # noqa: E402

CUSTOM_EXPORTS = ("custom_export", "custom_export_decisions", "custom_export_messages", "custom_export_llm_calls",
                  "custom_export_manifest")


def main() -> None:
    args = bench_arguments(__doc__.splitlines()[0], repeat=3)
    with finished_session(args) as (client, code):
        measure(args, client, code)


def measure(args, client, code: str) -> None:
    urls = {"oTree's wide export (baseline)": f"/api/export_wide?session_code={code}",
            "data package": f"/LabDataPackage/{code}",
            **{name: f"/api/export_app_custom?app=payment&function_name={name}&session_code={code}"
               for name in CUSTOM_EXPORTS}}
    timed_get(client, urls["data package"], 1)  # warm: imports, caches
    seconds = {}
    for label, url in urls.items():
        seconds[label], size = timed_get(client, url, args.repeat)
        print(f"{label:<32} {seconds[label]:6.3f} s  {size / 1024:7.0f} KiB", flush=True)
    database = "PostgreSQL" if args.database_url.startswith("postgres") else "SQLite"
    baseline = seconds["oTree's wide export (baseline)"]
    print(f"data package of {args.participants} participants x {args.rounds} rounds ({database}, median of "
          f"{args.repeat}): {seconds['data package']:.2f} s = {seconds['data package'] / baseline:.1f} x oTree's wide export")


if __name__ == "__main__":
    main()
