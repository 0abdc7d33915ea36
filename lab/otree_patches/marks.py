"""How a patch marks what it puts in oTree's place, so that a test can find it in force, once."""

from __future__ import annotations


def marked(new, original, patch: str):
    """``new``, marked as ``patch``'s replacement of ``original`` (how tests/test_otree_seam.py
    finds that every patch is in force once, not stacked); returns ``new``."""
    new._lab_patch = patch.rpartition(".")[2]
    new._lab_otree_original = original
    return new


def patched_by(current) -> str | None:
    """The name of the patch module whose replacement ``current`` is, or None (oTree's own)."""
    function = getattr(current, "__func__", None) or getattr(current, "fget", None) or current
    return getattr(function, "_lab_patch", None)
