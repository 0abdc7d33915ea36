"""REPLACES: otree.database.AnyModel.objects_get, otree.database.ExtraModel.filter,
otree.database.DBWrapper.get_or_404

WHY: oTree 6 pins SQLAlchemy 1.3, which builds and compiles every ORM query anew; that, not the
database, was most of a lookup's time (a participant and a player lookup: 918 µs, against 176 µs
through SQLAlchemy's compiled-query cache, bench/lookups.py), paid on every page request and
twice as much for the lab's wide Player tables. lab/server/baked_lookups.py takes the cached path for
plain equality lookups (same rows, same errors) and leaves the rest to oTree.

HOW TO CHECK: bench/lookups.py with and without this patch; tests/test_baked_lookups.py compares
the answers with oTree's own.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.database.AnyModel.objects_get", "otree.database.ExtraModel.filter",
           "otree.database.DBWrapper.get_or_404", "otree.database.DBWrapper", "otree.database.db"]
REPLACED = ["otree.database.AnyModel.objects_get", "otree.database.ExtraModel.filter",
            "otree.database.DBWrapper.get_or_404"]


def install() -> None:
    from otree import database

    from lab.server.baked_lookups import cached_lookups

    if patched_by(database.AnyModel.objects_get) == "model_lookups":
        return
    original_objects_get = database.AnyModel.objects_get.__func__
    original_filter = database.ExtraModel.filter.__func__
    original_get_or_404 = database.DBWrapper.get_or_404
    objects_get, extra_model_filter, get_or_404 = cached_lookups(original_objects_get, original_filter,
                                                                 original_get_or_404)
    database.AnyModel.objects_get = classmethod(marked(objects_get, original_objects_get, __name__))
    database.ExtraModel.filter = classmethod(marked(extra_model_filter, original_filter, __name__))
    database.DBWrapper.get_or_404 = marked(get_or_404, original_get_or_404, __name__)
