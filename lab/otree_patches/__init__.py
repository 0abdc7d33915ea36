"""The oTree seam: every change this project makes to oTree's (and Starlette's) behaviour.

One module per thing patched. Each starts with ``REPLACES:`` (the oTree names it replaces or
wraps), then why (oTree's fault or limit, and what a lab would see without the patch), then how
to check it is still needed; each has ``TARGETS`` (the dotted names it replaces, wraps, copies or
relies on, fingerprinted by tests/otree_fingerprints.py), ``REPLACED`` (those that hold the
patch's code once it is applied: tests/test_otree_seam.py finds each in force, once) and
``install()`` (idempotent). ``reads.py`` lists what the project reads or overrides of oTree's
private parts without patching it.

Importing any module of the project installs nothing. ``install()`` below applies every patch,
once, in ``patch_modules()``' order; it is called by ``lab.app_start.register_app``, which the first
app oTree imports calls (server, bots, timeout worker, commands and tests alike run oTree's
``setup``, which imports the apps). It first checks that the installed oTree is the one the
patches were written for (``WRITTEN_FOR``); docs/ARCHITECTURE.md#otree-upgrade says how to move
to another.
"""

from __future__ import annotations

import logging
import os
import sys

WRITTEN_FOR = "6.0.15"
ALLOW_VERSION_VARIABLE = "LAB_ALLOW_OTREE_VERSION"
UPGRADE_DOC = "docs/ARCHITECTURE.md#otree-upgrade"
logger = logging.getLogger("lab.otree_patches")
_installed = False


def installed_otree_version() -> str:
    from importlib.metadata import version

    return version("otree")


def check_otree_version() -> None:
    """Refuse (SystemExit with the reason) an oTree other than ``WRITTEN_FOR``, unless
    ``LAB_ALLOW_OTREE_VERSION`` names the installed version: then a loud warning."""
    installed = installed_otree_version()
    if installed == WRITTEN_FOR:
        return
    if os.environ.get(ALLOW_VERSION_VARIABLE, "").strip() == installed:
        warning = (f"WARNING: oTree {installed} is installed, but the lab's patches of oTree (lab/otree_patches/) "
                   f"were written for oTree {WRITTEN_FOR}; running anyway because {ALLOW_VERSION_VARIABLE}="
                   f"{installed}. Review every patch ({UPGRADE_DOC}) before a session with participants.")
        print(warning, file=sys.stderr, flush=True)
        logger.warning(warning)
        return
    raise SystemExit(
        f"Refusing to start: oTree {installed} is installed, but the lab's patches of oTree "
        f"(lab/otree_patches/) were written for oTree {WRITTEN_FOR}. Install oTree {WRITTEN_FOR} "
        f"(pip install otree=={WRITTEN_FOR}), or follow {UPGRADE_DOC} to move the patches to {installed}; "
        f"to run anyway, set {ALLOW_VERSION_VARIABLE}={installed}.")


def patch_modules() -> list:
    """The patch modules, in the order they are applied (importing them installs nothing). The
    order matters only where one patch relies on another: the language patch notes each request
    before any other's code runs in it."""
    from lab.otree_patches import (admin_views, channel_layer, language, model_lookups, notices_socket, page_index,
                                   page_order, page_timer, request_guard, request_lock, rooms, router_startup,
                                   session_creation, session_wide_link, static_urls, timeout_worker)

    return [language, rooms, request_lock, request_guard, session_creation, session_wide_link, page_index,
            page_order, model_lookups, channel_layer, static_urls, timeout_worker, page_timer, notices_socket,
            router_startup, admin_views]


def install() -> None:
    """Check the oTree version, then apply every patch once, in order; idempotent."""
    global _installed
    if _installed:
        return
    check_otree_version()
    for patch in patch_modules():
        patch.install()
    _installed = True

