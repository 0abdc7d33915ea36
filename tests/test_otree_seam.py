"""The oTree seam (lab/otree_patches/): every change to oTree in one place, checked against the
oTree it was written for. The fingerprints of what the patches rely on match the installed oTree
(and a changed oTree function names its patch); a different oTree version is refused; after the
apps are imported every patch is in force exactly once; nothing outside the seam assigns to oTree."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab import otree_patches
from tests.test_architecture import PROJECT, source_files

FINGERPRINTS = [sys.executable, "-m", "tests.otree_fingerprints"]
# Instruments oTree to measure it (bench/lab_load.py --trace), never part of a lab's server.
MAY_ASSIGN_TO_OTREE = {"bench/server_trace.py"}


def run(command: list[str], **env) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_the_fingerprints_match_the_otree_installed():
    result = run(FINGERPRINTS)
    assert result.returncode == 0, f"oTree differs from the one the patches were written for:\n{result.stdout}"


def test_a_changed_otree_function_names_the_patch_to_review(tmp_path):
    import otree

    copy = tmp_path / "otree"
    shutil.copytree(Path(otree.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    tasks = copy / "tasks.py"
    source = tasks.read_text()
    listen = "    def listen(self):\n"
    assert listen in source
    tasks.write_text(source.replace(listen, listen + "        pass  # a new release's change\n"))
    result = run(FINGERPRINTS, PYTHONPATH=str(tmp_path))
    assert result.returncode == 1
    assert result.stdout.strip() == ("review lab/otree_patches/timeout_worker.py: oTree changed "
                                     "otree.tasks.Worker, otree.tasks.Worker.listen")


def test_every_patch_module_says_what_it_replaces_and_why():
    for patch in otree_patches.patch_modules():
        doc = patch.__doc__ or ""
        assert doc.startswith("REPLACES: "), patch.__name__
        assert "WHY:" in doc and "HOW TO CHECK:" in doc, patch.__name__
        # What a patch puts in oTree's place is fingerprinted, itself or within what defines it.
        for name in patch.REPLACED:
            assert any(name == target or name.startswith(target + ".") for target in patch.TARGETS), name
    recorded = json.loads((PROJECT / "tests/data/otree_fingerprints.json").read_text())
    assert recorded["written_for"] == otree_patches.WRITTEN_FOR


def test_the_architecture_doc_has_every_patch_in_its_table_and_the_upgrade_steps():
    doc = (PROJECT / "docs/ARCHITECTURE.md").read_text()
    assert "\n## oTree upgrade\n" in doc  # the refusal's message sends the reader to #otree-upgrade
    seam = doc.split("\n## The oTree seam\n")[1].split("\n## ")[0]
    listed = set(re.findall(r"^\| `(\w+\.py)`", seam, flags=re.MULTILINE))
    assert listed == {f"{patch.__name__.rpartition('.')[2]}.py" for patch in otree_patches.patch_modules()} | {
        "reads.py"}


def test_another_otree_version_is_refused(monkeypatch):
    monkeypatch.setattr(otree_patches, "installed_otree_version", lambda: "6.1.0")
    monkeypatch.delenv(otree_patches.ALLOW_VERSION_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as refused:
        otree_patches.check_otree_version()
    message = str(refused.value)
    assert "oTree 6.1.0 is installed" in message and f"written for oTree {otree_patches.WRITTEN_FOR}" in message
    assert "docs/ARCHITECTURE.md#otree-upgrade" in message and "LAB_ALLOW_OTREE_VERSION=6.1.0" in message


FAKED_VERSION = r'''
import importlib.metadata
real = importlib.metadata.version
importlib.metadata.version = lambda name: "6.1.0" if name == "otree" else real(name)
from otree.main import setup
setup()  # imports the apps, as every oTree process does first
print("started")
'''


def test_an_otree_process_on_another_version_stops_before_it_starts(monkeypatch):
    monkeypatch.delenv(otree_patches.ALLOW_VERSION_VARIABLE, raising=False)
    refused = run([sys.executable, "-c", FAKED_VERSION])
    assert refused.returncode == 1 and "started" not in refused.stdout
    # settings.py's log lines may come first (experiment files checked but not offered)
    [refusal] = [line for line in refused.stderr.splitlines() if line.startswith("Refusing to start")]
    assert refusal.startswith("Refusing to start: oTree 6.1.0 is installed")
    allowed = run([sys.executable, "-c", FAKED_VERSION], LAB_ALLOW_OTREE_VERSION="6.1.0")
    assert allowed.returncode == 0 and "started" in allowed.stdout and "WARNING: oTree 6.1.0" in allowed.stderr


def test_another_otree_version_runs_when_allowed_with_a_loud_warning(monkeypatch, capsys):
    monkeypatch.setattr(otree_patches, "installed_otree_version", lambda: "6.1.0")
    monkeypatch.setenv(otree_patches.ALLOW_VERSION_VARIABLE, "6.1.0")
    otree_patches.check_otree_version()
    warning = capsys.readouterr().err
    assert warning.startswith("WARNING: oTree 6.1.0 is installed") and otree_patches.WRITTEN_FOR in warning
    monkeypatch.setenv(otree_patches.ALLOW_VERSION_VARIABLE, "6.2.0")  # allows another version: refused
    with pytest.raises(SystemExit):
        otree_patches.check_otree_version()


def test_the_otree_the_patches_were_written_for_passes_quietly(monkeypatch, capsys):
    monkeypatch.setattr(otree_patches, "installed_otree_version", lambda: otree_patches.WRITTEN_FOR)
    otree_patches.check_otree_version()
    assert capsys.readouterr().err == ""


IN_FORCE = r'''
import json, sys
sys.argv = ["otree", "timeoutsubprocess"]  # the timeout worker's patch applies in its process only
from otree.main import setup
setup()  # imports the apps, as the server, a bot run and the timeout worker do
from lab import otree_patches
from lab.otree_patches.marks import patched_by
from tests.otree_fingerprints import _module_prefix
import importlib

def current(name):
    module, attributes = _module_prefix(name)
    value = importlib.import_module(module)
    for attribute in attributes:
        value = getattr(value, attribute)
    return value

def unwrapped(value):
    return getattr(value, "__func__", None) or getattr(value, "fget", None) or value

def snapshot():
    return {name: unwrapped(current(name)) for patch in otree_patches.patch_modules() for name in patch.REPLACED}

found = {}
for patch in otree_patches.patch_modules():
    for name in patch.REPLACED:
        value = current(name)
        original = getattr(unwrapped(value), "_lab_otree_original", None)
        found[name] = [patch.__name__.rpartition(".")[2], patched_by(value) or getattr(value, "__module__", None),
                       patched_by(original)]
before = snapshot()
otree_patches.install()
for patch in otree_patches.patch_modules():
    patch.install()
again = snapshot()
from otree.channels.routing import websocket_routes
import otree.views.admin
from lab.server import notices
from lab.experimenter.admin_views import ADMIN_VIEWS
print(json.dumps(dict(
    found=found, unchanged=all(again[name] is before[name] for name in before),
    notices_routes=sum(getattr(r, "path", None) == notices.SOCKET_PATH for r in websocket_routes),
    admin_views=all(getattr(otree.views.admin, view.__name__, None) is view for view in ADMIN_VIEWS))))
'''


def test_after_the_apps_are_imported_every_patch_is_in_force_once():
    result = run([sys.executable, "-c", IN_FORCE])
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for name, (patch, in_force, under_it) in report["found"].items():
        if in_force in ("lab.server.request_lock",):  # a class of the lab's own in oTree's place
            continue
        assert in_force == patch, f"{name}: not {patch}'s replacement"
        assert under_it is None, f"{name}: {patch}'s replacement wraps another patch's ({under_it})"
    assert len(report["found"]) == sum(len(p.REPLACED) for p in otree_patches.patch_modules())
    assert report["unchanged"], "installing again stacked a patch"
    assert report["notices_routes"] == 1 and report["admin_views"]


def _otree_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                         if alias.name.split(".")[0] in ("otree", "starlette"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("otree", "starlette"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root(node: ast.AST):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def assignments_to_otree(path: Path) -> list[str]:
    """``path``'s assignments to an attribute (or item) of something imported from oTree or
    Starlette, its ``setattr`` on one, and its in-place changes of one (append, insert, extend,
    update)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    otree_names, found = _otree_names(tree), []
    for node in ast.walk(tree):
        changed = []  # what the statement changes
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:  # a plain name is rebound, not changed; a tuple's items may be
                items = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                changed += [item for item in items if isinstance(item, (ast.Attribute, ast.Subscript))]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            changed = node.args[:1]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("append", "insert", "extend", "update"):
            changed = [node.func.value]
        found += [f"{path.relative_to(PROJECT)}:{node.lineno}: {ast.unparse(item)}" for item in changed
                  if _root(item) in otree_names]
    return found


def test_nothing_outside_the_seam_assigns_to_otree():
    seam = PROJECT / "lab" / "otree_patches"
    files = [path for path in source_files() if seam not in path.parents]
    files += sorted((PROJECT / "bench").rglob("*.py"))
    found = [line for path in files if str(path.relative_to(PROJECT)) not in MAY_ASSIGN_TO_OTREE
             for line in assignments_to_otree(path)]
    assert found == [], "oTree is changed outside lab/otree_patches/"
    # The check finds what it looks for: the seam's own assignments.
    assert any("Router.startup" in line for line in assignments_to_otree(seam / "router_startup.py"))
    assert any("websocket_routes" in line for line in assignments_to_otree(seam / "notices_socket.py"))
