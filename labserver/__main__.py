"""``python -m labserver run|preflight|bots|export|bonus|check-experiment`` — see README.md."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labserver", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="start the server (oTree prodserver) and print its address: a try-out "
                                          "(oTree's debug mode) unless --lab")
    run.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
    run.add_argument("--host", default="0.0.0.0",
                     help="the address to listen on (default: every interface; 127.0.0.1 behind a reverse proxy)")
    run.add_argument("--lab", action="store_true",
                     help="a lab's server: oTree's production mode; refused without OTREE_AUTH_LEVEL=STUDY, "
                          "OTREE_ADMIN_PASSWORD and OTREE_SECRET_KEY")

    preflight = commands.add_parser("preflight", help="the morning's checks of a lab's server, one line each (ok, "
                                                      "or what to do); exit status 1 if any failed")
    preflight.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)),
                           help="the port the lab's server listens on")

    bots = commands.add_parser("bots", help="play a session with oTree's bots (config overrides; never in the "
                                            "lab's database unless --database lab)")
    bots.add_argument("config")
    bots.add_argument("participants", type=int)
    bots.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a session-config value, e.g. --set rounds_per_game=3")
    bots.add_argument("--export", type=Path, help="write every custom export of the session here")
    bots.add_argument("--database", choices=("rehearsal", "lab"), default="rehearsal",
                      help="rehearsal (default): on PostgreSQL a database of its own beside DATABASE_URL's, dropped "
                           "at the end; a SQLite file DATABASE_URL names; else SQLite in memory; never the lab's "
                           "database; lab: the database the lab's server in this folder uses")

    export = commands.add_parser("export", help="write a session's data package (a zip) from the database "
                                                "DATABASE_URL points at")
    export.add_argument("session_code")
    export.add_argument("--out", type=Path, default=Path("."), help="folder for lab_session_CODE.zip")

    bonus = commands.add_parser("bonus", help="an online session's bonus file for Prolific's bulk bonus (PID,amount), "
                                              "recorded as a payout (docs/online.md, Bonus file)")
    bonus.add_argument("session_code")
    bonus.add_argument("--out", type=Path, default=Path("."), help="folder for prolific_bonus_CODE_payoutN.csv")
    bonus.add_argument("--difference", action="store_true",
                       help="after a recorded payout: a new payout of only what is still owed")
    bonus.add_argument("--who", default=os.environ.get("USER", "command line"), help="recorded as who made the payout")

    check = commands.add_parser("check-experiment", help="check experiment files (experiments/*.toml; "
                                                         "docs/experiment-file.md): ok, or every problem, one a line; "
                                                         "exit status 1 for a problem, 2 for a file not read")
    check.add_argument("files", nargs="*", metavar="FILE", help="default: every file of experiments/")

    args = parser.parse_args(argv)
    if args.command == "run":
        from labserver.server import serve

        return serve(args.port, lab=args.lab, host=args.host)
    if args.command == "preflight":
        from labserver.preflight import main as preflight_main

        return preflight_main(args.port)
    if args.command == "bots":
        from labserver import botrun

        botrun.run(args.config, args.participants, botrun.parse_overrides(args.set), args.export, args.database)
        return 0
    if args.command == "export":
        from labserver.export import export_session

        print(export_session(args.session_code, args.out))
        return 0
    if args.command == "bonus":
        from labserver.export import bonus_file

        return bonus_file(args.session_code, args.out, who=args.who, difference=args.difference)
    if args.command == "check-experiment":
        from experiment_design.command import main as check_main

        return check_main(args.files)
    return 2


if __name__ == "__main__":
    sys.exit(main())
