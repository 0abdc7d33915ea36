"""Production mode, as a lab runs it: what the server must have in its environment.

oTree's production mode (OTREE_PRODUCTION) turns its debug pages off, but serves an open admin
without OTREE_AUTH_LEVEL. settings.py refuses to start production mode without these,
``labserver run --lab`` says what is missing before it starts, and ``labserver preflight``
checks them.
"""

from __future__ import annotations

from typing import Mapping


def is_production(environ: Mapping[str, str]) -> bool:
    """oTree's own rule (otree/settings.py: DEBUG unless OTREE_PRODUCTION is set and not 0)."""
    return environ.get("OTREE_PRODUCTION", "") not in ("", "0")


def missing_settings(environ: Mapping[str, str]) -> list[str]:
    """The environment variables production mode needs that are missing, as the fix names them."""
    missing = []
    if environ.get("OTREE_AUTH_LEVEL") != "STUDY":
        missing.append("OTREE_AUTH_LEVEL=STUDY")
    if not environ.get("OTREE_ADMIN_PASSWORD"):
        missing.append("OTREE_ADMIN_PASSWORD")
    if not environ.get("OTREE_SECRET_KEY"):
        missing.append("OTREE_SECRET_KEY")
    return missing
