"""``python -m analysis EXPORT_DIR [EXPORT_DIR ...] --out REPORT_DIR``"""

from __future__ import annotations

import argparse
import sys

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
    args = parser.parse_args(argv)
    analysis = run(list(args.exports), args.out, glm_degree=args.degree)
    for problem in analysis.exports.problems:
        if problem.level != "info":
            print(f"{problem.level}: {problem}", file=sys.stderr)
    print(f"report: {args.out}/report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
