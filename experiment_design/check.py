"""The whole check of experiment files: their form and coherence (experiment.py), the files they
name (prompts), the participant texts of each language they offer (texts.py), and session config
names that no two files share. ``check_all_or_exit`` is the server start's: every problem of every
file, or no start."""

from __future__ import annotations

import sys
from pathlib import Path

from experiment_design import texts
from experiment_design.experiment import (EXPERIMENTS_DIR, PROJECT_DIR, Experiment, ExperimentError, experiment_files,
                                          parse, read_text, unreadable)
from experiment_design.problems import Problem


def _file_problems(experiment: Experiment, file: str, root: Path, coherent: bool) -> list[Problem]:
    """The files the design names, and the texts of its languages (each key only of a coherent design:
    the texts a design needs follow from its values)."""
    found = []
    design = experiment.design
    named = []
    for name, persona in design.personas.items():
        named += [(f"personas.{name}.roleplay.{language}", path) for language, path in persona.roleplay.items()]
    if design.agents is not None:
        for key in ("system_prompt", "example_dialogues"):
            named += [(f"agents.{key}.{language}", path) for language, path in getattr(design.agents, key).items()]
    for field, path in named:
        if not (root / path).is_file():
            found.append(Problem(file, field, f"names {path}, which does not exist in {root}: write the file, or "
                                              "correct the path (relative to the project folder)", "files"))
    for problem in texts.text_problems(design, root / "locale", each_key=coherent):
        locale = f"locale/{problem.language}.toml"
        if problem.key is None and not (root / locale).exists():
            found.append(Problem(file, "languages", f"{locale} {problem.message}", "texts"))
        elif problem.key is None:
            found.append(Problem(file, locale, problem.message, "texts"))
        else:
            found.append(Problem(file, locale, f"{problem.key} {problem.message}", "texts"))
    return found


def check_one(path: Path, root: Path = PROJECT_DIR) -> tuple[Experiment | None, list[Problem]]:
    """One file, without comparing it to others: its experiment (None if it cannot be read as one) and
    every problem found."""
    path = Path(path)
    try:
        text = read_text(path)
    except OSError as exc:
        return None, [unreadable(path, exc)]
    except ExperimentError as exc:
        return None, exc.problems
    experiment, problems = parse(text, path.stem, str(path))
    if experiment is not None:
        problems += _file_problems(experiment, str(path), root, coherent=not problems)
    return (experiment if not problems else None), problems


def _clashes(checked: list[tuple[Path, Experiment]]) -> list[Problem]:
    """Session config names (and experiment names) two files share: oTree knows a config by its name."""
    found, owner = [], {}
    for path, experiment in checked:
        for config in experiment.session_configs():
            first = owner.setdefault(config["name"], path)
            if first != path:
                found.append(Problem(str(path), "session_config_prefix", (
                    f"gives the session config {config['name']}, which {first} gives too: set session_config_prefix "
                    f"to a prefix of this experiment's own (such as \"{experiment.name}_\")"), "clash"))
                break
    names = {}
    for path, experiment in checked:
        first = names.setdefault(experiment.name, path)
        if first != path:
            found.append(Problem(str(path), "", f"has the name {experiment.name}, as {first} has: rename one of them",
                                 "clash"))
    return found


def check_files(paths, root: Path = PROJECT_DIR, directory: Path | None = None
                ) -> tuple[list[Experiment], list[Problem]]:
    """Check ``paths``, and their session config names against each other and against every file of
    ``directory`` (default: the project's experiments/, the files the server loads). Returns the
    experiments of the files without problems, and every problem of ``paths``."""
    paths = [Path(path) for path in paths]
    directory = directory or root / "experiments"
    given = {path.resolve() for path in paths}
    others = []  # the server's other files: a clash between one of them and a file checked is the latter's
    for path in experiment_files(directory):
        if path.resolve() not in given:
            try:
                experiment, found = parse(read_text(path), path.stem, str(path))
            except (OSError, ExperimentError):
                continue
            if experiment is not None and not found:
                others.append((path, experiment))
    problems, good = [], []
    for path in paths:
        experiment, found = check_one(path, root)
        problems += found
        if experiment is not None:
            good.append((path, experiment))
    clashes = [problem for problem in _clashes(others + good) if Path(problem.file).resolve() in given]
    bad = {Path(problem.file).resolve() for problem in clashes}
    return [experiment for path, experiment in good if path.resolve() not in bad], problems + clashes


def check(path: Path | str, root: Path = PROJECT_DIR) -> list[Problem]:
    """Every problem of one experiment file (none: it runs), session config names compared with
    experiments/'s other files."""
    return check_files([path], root)[1]


def check_all_or_exit(directory: Path | None = None, root: Path = PROJECT_DIR) -> list[Experiment]:
    """Every experiment of ``directory`` (experiments/), checked: the server start calls it, and a
    server with any problem does not start (no partial start), naming every problem."""
    directory = directory or EXPERIMENTS_DIR
    paths = experiment_files(directory)
    if not paths:
        sys.exit(f"Refusing to start: no experiment files (*.toml) in {directory}.")
    experiments, problems = check_files(paths, root, directory)
    if problems:
        sys.exit("Refusing to start: the experiment files have these problems (python -m labserver check-experiment "
                 "checks a file):\n" + "\n".join(str(problem) for problem in problems))
    return experiments
