"""``python -m analysis EXPORT_DIR [EXPORT_DIR ...] --out REPORT_DIR``"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.report import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=(
        "The paper's results from the CSV exports of one or more sessions (docs/DATA.md): tables as "
        "CSV, figures as PNG and SVG, and report.html."))
    parser.add_argument("exports", nargs="+", help="folders (read recursively) or CSV files: exports, "
                        "filled annotation files, the motives file")
    parser.add_argument("--out", required=True, help="the report folder (created if missing)")
    parser.add_argument("--degree", type=int, default=None,
                        help="degree of the Fig. 3 polynomial GLM for both label settings "
                             "(default: the paper's, 3 informed, 4 uninformed)")
    # --- session manifests (analysis/manifest.py): printed, checked, added to the report ---
    parser.add_argument("--allow-mixed-protocols", action="store_true",
                        help="pool sessions even when their manifests' protocols differ")
    args = parser.parse_args(argv)
    from analysis import manifest

    manifests = manifest.load_manifests(args.exports)
    for line in manifest.summary_lines(manifests):
        print(f"manifest {line}")
    try:
        differences = manifest.check_poolable(manifests, allow_mixed=args.allow_mixed_protocols)
    except manifest.MixedProtocols as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    # --- end of manifests ---
    analysis = run(list(args.exports), args.out, glm_degree=args.degree)
    manifest.add_to_report(Path(args.out) / "report.html", manifests, differences)
    for problem in analysis.exports.problems:
        if problem.level != "info":
            print(f"{problem.level}: {problem}", file=sys.stderr)
    print(f"report: {args.out}/report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
