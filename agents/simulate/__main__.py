"""``python -m agents.simulate CONFIG [--experiment FILE]``: run (or continue) a tournament of the
design of an experiment file (default: the config's ``experiment``, else experiments/paper.toml);
a file the experiment check refuses is refused with its problems (exit 2).

``python -m agents.simulate replay CONFIG EXPORT [--persona P]``: replay the human messages
of a recorded lab session (its data package, or a folder of its exports) against the config's
models, into a new folder of the run's ``replays/``. See docs/simulation.md.
"""

from __future__ import annotations

import argparse
import sys

import protocol
from agents.config import ConfigError

from .config import load_config
from .runner import BudgetExceeded, BudgetExhausted, plan_run, run_simulation
from .store import FingerprintMismatch
from .tournament import ProviderConfigError

# Printed as one line (no traceback), exit code 2.
STOPPING_ERRORS = (BudgetExceeded, BudgetExhausted, ProviderConfigError, ConfigError, FingerprintMismatch)


EXIT_OK, EXIT_STOPPED, EXIT_INCOMPLETE, EXIT_FALLBACKS, EXIT_INTERRUPTED = 0, 2, 3, 4, 130


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "replay":
        return _replay(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m agents.simulate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="TOML file, e.g. configs/simulation_quick.toml")
    parser.add_argument("--experiment", metavar="FILE",
                        help="the experiment file whose design the agents play (its personas, payoffs, rounds, game "
                             "and message exchanges, matching), e.g. experiments/stag_hunt.toml")
    parser.add_argument("--estimate", action="store_true",
                        help="print the number of calls and the estimated cost, then stop")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, experiment=args.experiment)
        if args.estimate:
            from .backend import agents_backend
            from .store import RunStore

            print(plan_run(config, agents_backend(), RunStore(config.run_dir)).describe())
            return EXIT_OK
        result = run_simulation(config, show_progress=not args.no_progress)
    except STOPPING_ERRORS as error:
        print(f"stopped: {error}", file=sys.stderr)
        return EXIT_STOPPED
    except KeyboardInterrupt:
        print("interrupted: finished games are saved; rerun the same command to continue",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"{result.games_played} games played, {result.games_skipped} resumed from earlier attempts; "
          f"{result.calls} calls ({result.cache_hits} from the cache, {result.failures} failed); "
          f"spent ${result.spent:.4f}")
    for name, path in result.outputs.items():
        print(f"  {name}: {path}")
    return _exit_status(result)


def _exit_status(result) -> int:
    """3 when games are left to play; 4 when an arm's decisions were random fallbacks too often
    (its figures count only the decisions its model made); else 0."""
    if result.excluded_line():
        print(result.excluded_line(), file=sys.stderr)
    exceeded = result.fallbacks_exceeded()
    for arm in exceeded:
        fell, total = result.fallbacks[arm]
        print(f"fallbacks: {fell} of {arm}'s {total} decisions were random fallbacks, more than max_fallback_share "
              f"{result.max_fallback_share:.0%}: its tables and figures count only the {total - fell} its model made",
              file=sys.stderr)
    return EXIT_INCOMPLETE if result.excluded_line() else EXIT_FALLBACKS if exceeded else EXIT_OK


def _replay(argv: list[str]) -> int:
    from .replay import run_replay

    parser = argparse.ArgumentParser(prog="python -m agents.simulate replay")
    parser.add_argument("config", help="TOML file: the models (and language) to replay with")
    parser.add_argument("export_dir", help="the lab session's data package (zip as downloaded, or unzipped) or a "
                        "folder of its export CSVs (decisions + messages)")
    parser.add_argument("--persona", help=f"replay with this persona ({', '.join(protocol.PERSONAS)}; default: "
                        "each agent's own)")
    parser.add_argument("--estimate", action="store_true",
                        help="print the number of calls and the estimated cost, then stop")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        result = run_replay(config, args.export_dir, persona=args.persona, estimate_only=args.estimate,
                            show_progress=not args.no_progress)
    except STOPPING_ERRORS as error:
        print(f"stopped: {error}", file=sys.stderr)
        return EXIT_STOPPED
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to continue (answered calls come from the cache)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.folder is not None:
        print(f"replay written to {result.folder}")
    for name, path in result.outputs.items():
        print(f"  {name}: {path}")
    return _exit_status(result)


if __name__ == "__main__":
    sys.exit(main())
