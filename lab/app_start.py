"""Where the apps join lab/: each app's registration, and before the first, the lab's patches of oTree.

Every oTree process that runs the apps (the server, bots, the timeout worker, commands, tests)
imports them first (``otree.main.setup``), and each app calls ``register_app`` at its import: the
first call is the one place the patches are applied (lab/otree_patches/). No module of lab/
imports this one: it stands above them all, beside the apps.
"""

from __future__ import annotations

from lab.base import app_registry
from lab import otree_patches


def register_app(app_name: str, Player, **tables) -> None:
    """The lab's patches of oTree applied (once), then the app's tables registered
    (``lab.base.app_registry.register_app``, which says what each app hands over)."""
    otree_patches.install()
    app_registry.register_app(app_name, Player, **tables)
