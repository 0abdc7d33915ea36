"""The house's rules (docs/ARCHITECTURE.md), read from the source with Python's ast: lab/ imports no
app, no module is over 500 lines, and no modules import each other in a circle. No server."""

from __future__ import annotations

import ast
import os
import re
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
    (``from lab.shared_pages import game`` gives ``lab.shared_pages.game``, a module or a name of ``lab.shared_pages``)."""
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
    """lab/ is the floor below the apps: the apps hand it what it needs (lab/base/app_registry.py)."""
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


ARCHITECTURE = PROJECT / "docs" / "ARCHITECTURE.md"
FLOOR_LINE = re.compile(r"^(\w+/|\w+\.py)\s+(.*)$")


def drawn_floors() -> list[dict]:
    """lab/'s floors as docs/ARCHITECTURE.md draws them, top to bottom: each its name (``record``,
    ``app_start``), the modules drawn in it (None where it is described, not listed), and the
    floors its ``->`` line says it imports."""
    lines = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("+-- lab/"))
    floors: list[dict] = []
    for line in lines[start + 1:]:
        if line.startswith("+"):
            break
        text = line.strip("|").strip()
        header = FLOOR_LINE.match(line.strip("|")[1:]) if not line[2:3].isspace() else None
        if header:
            name = header.group(1).removesuffix("/").removesuffix(".py")
            floors.append(dict(name=name, modules=set(), described=False, imports=set()))
            text = header.group(2)
        if text.startswith("->"):
            floors[-1]["imports"] |= {word.strip() for word in text[2:].split(",")}
        elif ":" in text:
            floors[-1]["described"] = True
        else:
            floors[-1]["modules"] |= set(text.split())
    return floors


def floor_of(module: str) -> str | None:
    """``lab.record.manifest`` -> ``record``; ``lab.app_start`` -> ``app_start``; None for lab."""
    parts = module.split(".")
    return parts[1] if parts[0] == "lab" and len(parts) > 1 else None


def lab_imports_between_floors() -> dict[str, set[str]]:
    """For each floor, the other floors its modules import (at the top or inside a function)."""
    modules = {module_name(path): path for path in source_files()}
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        floor = floor_of(name)
        if floor is None:
            continue
        for imported in imported_names(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            target = floor_of(imported or "")
            if target is not None and target != floor:
                found.setdefault(floor, set()).add(target)
    return found


def test_lab_folders_hold_the_modules_their_floor_draws():
    floors = drawn_floors()
    assert [f["name"] for f in floors][-1] == "base"
    drawn = {f["name"] for f in floors}
    on_disk = {path.stem if path.suffix == ".py" else path.name for path in (PROJECT / "lab").iterdir()
               if not path.name.startswith(("_", ".")) and (path.suffix == ".py" or path.is_dir())}
    assert on_disk == drawn, "every file and folder of lab/ is a floor of the diagram, and every floor is there"
    for floor in floors:
        folder = PROJECT / "lab" / floor["name"]
        if floor["described"] or not folder.is_dir():
            continue
        held = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
        assert held == floor["modules"], f"lab/{floor['name']}/ holds {sorted(held)}; the diagram draws {sorted(floor['modules'])}"


def test_no_floor_imports_a_floor_drawn_above_it():
    order = [f["name"] for f in drawn_floors()][::-1]  # bottom first
    upward = sorted(f"{floor} -> {target}" for floor, targets in lab_imports_between_floors().items()
                    for target in targets if order.index(target) > order.index(floor))
    assert upward == []


def test_the_diagram_draws_every_import_between_floors_and_no_other():
    drawn = {f["name"]: f["imports"] for f in drawn_floors()}
    found = lab_imports_between_floors()
    assert {name: found.get(name, set()) for name in drawn} == drawn
