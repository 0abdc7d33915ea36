"""Fingerprints of the oTree source the patches replace, wrap, copy or rely on.

Each name of a patch module's ``TARGETS`` (and of reads.py's) is hashed (sha256 of its source as
oTree defines it: a function's or class's text, a module-level value's assignment, a module's
file, ``template:<path>`` a template under otree/templates). tests/data/otree_fingerprints.json
records them for the oTree the patches were written for; tests/test_otree_seam.py recomputes them
and names the patch to review for each that differs. Run in a process of its own, where no patch
is applied (importing the project applies none), from the project's folder:

    .venv/bin/python -m tests.otree_fingerprints            # check: exit 1 naming the patches to review
    .venv/bin/python -m tests.otree_fingerprints --write    # record the installed oTree's
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path

RECORD = Path(__file__).resolve().parent / "data" / "otree_fingerprints.json"
TEMPLATE = "template:"


def targets() -> dict[str, list[str]]:
    """Every fingerprinted name, with the patches (module names; ``reads``) that rely on it."""
    from lab.otree_patches import patch_modules, reads

    found: dict[str, list[str]] = {}
    for module in [*patch_modules(), reads]:
        for name in module.TARGETS:
            found.setdefault(name, []).append(module.__name__.rpartition(".")[2])
    return found


def _module_prefix(name: str) -> tuple[str, list[str]]:
    """The module part of a dotted name and the attributes after it; only packages are imported
    to find it (``find_spec`` of ``a.b.c`` imports ``a.b``: ``otree.urls`` would import the apps)."""
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        spec = importlib.util.find_spec(".".join(parts[:end]))
        if spec is None:
            raise LookupError(f"{name}: no such module")
        if spec.submodule_search_locations is None or end == len(parts) or \
                importlib.util.find_spec(".".join(parts[:end + 1])) is None:
            return ".".join(parts[:end]), parts[end:]
    raise LookupError(f"{name}: no such module")


def _member(body: list, attribute: str):
    """The definition of ``attribute`` among a module's or class's statements (an ``ImportFrom``
    for a name the module imports), or None."""
    found = None
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and any(
                (alias.asname or alias.name) == attribute for alias in node.names):
            found = node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == attribute:
            found = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id == attribute for target in names):
                found = node
    return found  # the last definition wins, as at run time


def source_of(name: str) -> str:
    """The source oTree defines ``name`` with (see the module's docstring)."""
    if name.startswith(TEMPLATE):
        import otree

        return (Path(otree.__file__).parent / "templates" / name[len(TEMPLATE):]).read_text(encoding="utf-8")
    module, attributes = _module_prefix(name)
    text = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
    node, body = None, ast.parse(text).body
    for index, attribute in enumerate(attributes):
        node = _member(body, attribute)
        if isinstance(node, ast.ImportFrom):  # defined where it is imported from
            imported = next(alias.name for alias in node.names if (alias.asname or alias.name) == attribute)
            return source_of(".".join([node.module, imported, *attributes[index + 1:]]))
        if node is None or (not isinstance(node, ast.ClassDef) and index < len(attributes) - 1):
            return _source_by_import(module, attributes)  # inherited, or an attribute of a value
        body = getattr(node, "body", [])
    return text if node is None else ast.get_source_segment(text, node)


def _source_by_import(module: str, attributes: list[str]) -> str:
    """A name the module's text does not define: found on the class (or a value's class) that
    defines it, by importing the module (no oTree module here imports the apps)."""
    owner = importlib.import_module(module)
    for index, attribute in enumerate(attributes):
        if not isinstance(owner, type) and not inspect.ismodule(owner):
            owner = type(owner)  # an attribute of a value: defined by its class
        if isinstance(owner, type):
            definer = next((klass for klass in owner.__mro__ if attribute in vars(klass)), None)
            if definer is None:
                raise LookupError(f"{module}.{'.'.join(attributes)}: {attribute} is not defined")
            if definer is not owner:  # inherited: the definer's own text
                return source_of(".".join([definer.__module__, definer.__qualname__, *attributes[index:]]))
            owner = vars(definer)[attribute]
        else:
            owner = getattr(owner, attribute)
    function = getattr(owner, "__func__", None) or getattr(owner, "fget", None) or owner
    try:
        return inspect.getsource(function)
    except TypeError:  # a built-in (object.__init__): nothing of oTree's to change
        return f"<built-in {getattr(function, '__qualname__', function)!r}>"


def fingerprint(name: str) -> str:
    return hashlib.sha256(source_of(name).encode("utf-8")).hexdigest()


def compute() -> dict:
    from lab.otree_patches import WRITTEN_FOR, installed_otree_version

    return {"written_for": WRITTEN_FOR, "otree": installed_otree_version(),
            "fingerprints": {name: {"sha256": fingerprint(name), "patches": patches}
                             for name, patches in sorted(targets().items())}}


def differences(recorded: dict, now: dict) -> dict[str, list[str]]:
    """Per patch to review, the names whose fingerprint changed, appeared or went."""
    review: dict[str, list[str]] = {}
    old, new = recorded["fingerprints"], now["fingerprints"]
    for name in sorted(set(old) | set(new)):
        if old.get(name, {}).get("sha256") != new.get(name, {}).get("sha256"):
            for patch in (new.get(name) or old[name])["patches"]:
                review.setdefault(patch, []).append(name)
    return review


def main(argv: list[str]) -> int:
    now = compute()
    if "--write" in argv:
        RECORD.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{len(now['fingerprints'])} fingerprints of oTree {now['otree']} written to {RECORD}")
        return 0
    review = differences(json.loads(RECORD.read_text(encoding="utf-8")), now)
    for patch, names in review.items():
        print(f"review lab/otree_patches/{patch}.py: oTree changed {', '.join(names)}")
    return 1 if review else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
