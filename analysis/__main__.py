"""``python -m analysis EXPORT_DIR [EXPORT_DIR ...] --out REPORT_DIR``

``python -m analysis annotate REPORT_DIR --provider P [--model M]``: machine annotation of the
report's blind template (analysis/machine_cli.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis import inputs
from analysis.report import run

EXIT_NO_INPUT = 2  # a path that does not exist or is no CSV, zip or folder, or no CSV at all: nothing was read
EXIT_MIXED_PROTOCOLS = 2  # sessions of different protocols, not to be pooled without --allow-mixed-protocols
EXIT_NOTHING_TO_ANALYSE = 1  # CSVs read, but no decisions or participants among them
EXIT_AGENT_FALLBACKS = 3  # report written, but the lab agents' decisions were random fallbacks too often


def polynomial_degree(text: str) -> int:
    """--degree: a whole number ≥ 1 (degree 0 would be a model of the intercept alone)."""
    try:
        degree = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if degree < 1:
        raise argparse.ArgumentTypeError(f"{degree}: the degree of the polynomial in f must be at least 1 "
                                         "(1 = linear, the paper's 3 and 4 are cubic and quartic)")
    return degree


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["annotate"]:  # machine annotation of the blind template (analysis/machine_cli.py)
        from analysis.machine_cli import main as annotate_main

        return annotate_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m analysis", description=(
        "The paper's results from the CSV exports of one or more sessions (docs/DATA.md): tables as "
        "CSV, figures as PNG, SVG and PDF, and report.html."), epilog=(
        "Machine annotation of the report's blind template: python -m analysis annotate REPORT_DIR "
        "--provider P [--model M] (see --help there). Exit status: 0 report written; 1 no decisions or "
        "participants table among the CSVs; 2 a path does not exist, is no CSV, zip or folder, or holds no "
        "CSV, or the sessions' protocols differ (without --allow-mixed-protocols) or their experiments do "
        "(always); 3 report written, but more of the lab agents' decisions than --max-agent-fallback-share were "
        "random fallbacks."))
    parser.add_argument("exports", nargs="+", help="data packages as downloaded (lab_session_CODE.zip) or "
                        "unzipped, folders (read recursively, zips in them too) or CSV files: exports, filled "
                        "annotation files, the motives file")
    parser.add_argument("--out", required=True, help="the report folder (created if missing)")
    parser.add_argument("--degree", type=polynomial_degree, default=None, metavar="N",
                        help="degree of the Fig. 3 polynomial GLM for both label settings "
                             "(default: the paper's, 3 informed, 4 uninformed)")
    # --- session manifests (analysis/manifest.py): printed, checked, added to the report ---
    parser.add_argument("--allow-mixed-protocols", action="store_true",
                        help="pool sessions even when their manifests' protocols differ")
    parser.add_argument("--include-stand-ins", action="store_true",
                        help="keep online sessions' stand-in pair-rounds (left out by default: docs/online.md)")
    parser.add_argument("--max-agent-fallback-share", type=float, default=0.2, metavar="SHARE",
                        help="exit 3 when more of the lab agents' decisions than this were random fallbacks "
                             "(they are never counted as the agents' behaviour; default 0.2)")
    args = parser.parse_args(argv)
    refusal = inputs.collect(args.exports).refusal()
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return EXIT_NO_INPUT
    from analysis import manifest

    manifests = manifest.load_manifests(args.exports)
    for line in manifest.summary_lines(manifests):
        print(f"manifest {line}")
    try:
        differences = manifest.check_poolable(manifests, allow_mixed=args.allow_mixed_protocols)
    except manifest.MixedProtocols as mixed:
        print(f"error: {mixed}", file=sys.stderr)
        return EXIT_MIXED_PROTOCOLS
    try:
        experiment = manifest.sessions_experiment(manifests)
    except (ValueError, OSError) as problem:  # ExperimentError is a ValueError
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_MIXED_PROTOCOLS
    if experiment.cooperative_choice is None:
        print(f"error: experiment {experiment.name} names no cooperative choice (game.cooperative_choice), so there "
              "is no cooperation rate, which every result of the report is about", file=sys.stderr)
        return EXIT_MIXED_PROTOCOLS
    print(f"experiment {experiment.name} (design {experiment.canonical_hash[:12]}): cooperation is choosing "
          f"{experiment.cooperative_choice}")
    # --- end of manifests ---
    analysis = run(list(args.exports), args.out, glm_degree=args.degree, include_stand_ins=args.include_stand_ins,
                   cooperative_choice=experiment.cooperative_choice, experiment=experiment)
    manifest.add_to_report(Path(args.out) / "report.html", manifests, differences)
    for problem in analysis.exports.problems:
        if problem.level != "info":
            print(f"{problem.level}: {problem}", file=sys.stderr)
        elif problem.column == "stand_in":
            print(problem.message)
    print(f"report: {args.out}/report.html")
    if analysis.decisions.empty and analysis.exports.participants.empty:
        print("error: none of the CSV files is a decisions or participants table of docs/DATA.md: nothing "
              "to analyse (the report lists what was read)", file=sys.stderr)
        return EXIT_NOTHING_TO_ANALYSE
    too_many = agent_fallback_problem(analysis.agents, args.max_agent_fallback_share)
    if too_many:
        print(f"error: {too_many}", file=sys.stderr)
        return EXIT_AGENT_FALLBACKS
    return 0


def agent_fallback_problem(agents, max_share: float) -> str | None:
    """A sentence when more of the lab agents' decisions than ``max_share`` were random fallbacks."""
    from analysis.tidy import agent_fallbacks

    fell, total = agent_fallbacks(agents)
    if not total or fell / total <= max_share:
        return None
    return (f"{fell} of the lab agents' {total} decisions ({fell / total:.0%}) were random fallbacks, more than "
            f"--max-agent-fallback-share {max_share:.0%}: the report counts only the {total - fell} their models made")


if __name__ == "__main__":
    sys.exit(main())
