"""``python -m labserver check-experiment [FILE ...]``: each file ok, or each of its problems, one a
line. Exit status 0: every file runs; 1: a problem; 2: a file that cannot be read."""

from __future__ import annotations

from pathlib import Path

from experiment_design.check import check_files
from experiment_design.experiment import experiment_files
from experiment_design.problems import UNREADABLE


def main(files: list[str], out=print) -> int:
    here = Path.cwd()
    paths = [Path(file) for file in files] or [path.relative_to(here) if path.is_relative_to(here) else path
                                               for path in experiment_files()]
    if not paths:
        out("no experiment files given, and none in experiments/")
        return 2
    experiments, problems = check_files(paths)
    by_file = {file: [p for p in problems if p.file == str(path)] for file, path in zip(files or paths, paths)}
    counts = {experiment.name: len(experiment.session_configs()) for experiment in experiments}
    for file, path in zip(files or paths, paths):
        if by_file[file]:
            for problem in by_file[file]:
                out(str(problem))
        else:
            out(f"ok: {file} ({counts[path.stem]} session configs)")
    if any(problem.kind == UNREADABLE for problem in problems):
        return 2
    return 1 if problems else 0
