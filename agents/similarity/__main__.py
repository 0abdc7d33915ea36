"""``python -m agents.similarity CONFIG --out DIR``: run the testbed, write tables and report."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from pydantic import ValidationError

from agents.config import ConfigError

from .config import SimilarityConfig, load_config
from .report import write_report
from .runner import ModelBuilder, Tables, estimated_cost, planned_calls, run
from .tables import write_tables


def run_to_folder(config: SimilarityConfig, out_dir: Path, *, builder: Optional[ModelBuilder] = None,
                  report: bool = True) -> tuple[Tables, dict[str, Path]]:
    """Run, then write every table (and the report) to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = run(config, out_dir, builder=builder)
    frames = tables.frames(config.run_id)
    written = write_tables(frames, out_dir)
    (out_dir / "similarity_config.json").write_text(
        json.dumps(config.model_dump(mode="json"), indent=2), encoding="utf-8")
    if report:
        written["report"] = write_report(frames, out_dir, f"Similarity signals — {config.run_id}",
                                         model_order=[spec.label for spec in config.models])
    return tables, written


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents.similarity", description=__doc__)
    parser.add_argument("config", type=Path, help="TOML config (configs/similarity_*.toml)")
    parser.add_argument("--out", type=Path, required=True, help="output folder (cache.sqlite lives here)")
    parser.add_argument("--no-report", action="store_true", help="tables only, no report.html")
    parser.add_argument("--estimate", action="store_true",
                        help="print the planned calls and a rough cost per model, run nothing")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except (ConfigError, ValidationError) as error:
        print(f"invalid config: {error}", file=sys.stderr)
        return 2
    if args.estimate:
        costs = estimated_cost(config)
        for label, calls in planned_calls(config).items():
            cost = "unknown price" if costs[label] is None else f"~${costs[label]:.2f}"
            print(f"{label}: {calls} calls, {cost}")
        return 0
    started = time.monotonic()
    try:
        tables, written = run_to_folder(config, args.out, report=not args.no_report)
    except ConfigError as error:  # e.g. a model's API key is not in the environment
        print(f"stopped: {error}", file=sys.stderr)
        return 2
    print(f"similarity run {config.run_id}: {time.monotonic() - started:.1f} s, "
          f"{tables.cache_misses} calls sent, {tables.cache_hits} served from the cache")
    for name, path in written.items():
        print(f"  {name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
