"""The house's rules (docs/ARCHITECTURE.md), read from the source with Python's ast: lab/ imports no
app, no module is over 500 lines, and no modules import each other in a circle. No server."""

from __future__ import annotations

import ast
import os
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
MAX_LINES = 500
# Folders that are not the project's modules: the suite and the benchmarks (they may be long and
# may reach anywhere); hidden folders (virtualenvs) are left out too.
NOT_MODULES = {"tests", "bench"}
# What stands above lab/ besides the oTree apps: the command-line tools and oTree's settings.
ABOVE_LAB = {"labserver", "settings"}
# Loading a module by its name (oTree's get_models_module included) reaches up as an import does.
BY_NAME = {"get_models_module", "import_module", "__import__"}


def source_files() -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(PROJECT):
        subfolders[:] = [name for name in subfolders
                         if not (name.startswith(".") or name in NOT_MODULES or name == "__pycache__")]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return sorted(found)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def otree_apps() -> set[str]:
    """The root folders that are oTree apps: their __init__.py defines a page_sequence."""
    apps = set()
    for init in PROJECT.glob("*/__init__.py"):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "page_sequence" for t in node.targets)
               for node in tree.body):
            apps.add(init.parent.name)
    return apps


def imported_names(path: Path) -> set[str]:
    """What ``path`` imports, at its top or inside a function, as dotted absolute names
    (``from lab import game`` gives ``lab.game``, a module or a name of ``lab``)."""
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}".strip(".")
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def names_loaded_by_name(path: Path) -> set[str]:
    """The by-name loaders ``path`` mentions (called or imported)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id in BY_NAME:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in BY_NAME:
            found.add(node.attr)
        elif isinstance(node, ast.alias) and node.name.rpartition(".")[2] in BY_NAME:
            found.add(node.name.rpartition(".")[2])
    return found


def test_the_apps_are_found():
    assert otree_apps() == {"instructions", "game_with_chat", "game_without_chat", "questionnaire", "payment"}


def test_lab_imports_no_app():
    """lab/ is the floor below the apps: the apps hand it what it needs (lab/app_registry.py)."""
    above = otree_apps() | ABOVE_LAB
    reaching_up = {}
    for path in source_files():
        if path.relative_to(PROJECT).parts[0] != "lab":
            continue
        where = str(path.relative_to(PROJECT))
        imports = sorted(name for name in imported_names(path) if name.split(".")[0] in above)
        loads = sorted(names_loaded_by_name(path))
        if imports or loads:
            reaching_up[where] = imports + loads
    assert reaching_up == {}


def test_no_module_is_over_500_lines():
    long = {str(path.relative_to(PROJECT)): lines for path in source_files()
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these where a concern separates cleanly: {long}"


def test_no_modules_import_each_other_in_a_circle():
    modules = {module_name(path): path for path in source_files()}

    def project_module(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    imports = {name: {found for imported in imported_names(path)
                      if (found := project_module(imported)) not in (None, name)}
               for name, path in modules.items()}
    circles = []
    for start in sorted(imports):
        # Depth-first through the modules after ``start``: a way back to it is a circle, found
        # once, from its first module by name.
        stack, seen = [[start]], {start}
        while stack:
            trail = stack.pop()
            for following in sorted(imports[trail[-1]]):
                if following == start:
                    circles.append(" -> ".join(trail + [start]))
                elif following > start and following not in seen:
                    seen.add(following)
                    stack.append(trail + [following])
    assert circles == []
