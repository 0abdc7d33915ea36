"""REPLACES: otree.lookup._get_session_lookups (wrapped)

WHY: oTree gives an app's pages one order in every session (the app's ``page_sequence``), but an
experiment file lists its questionnaire pages in an order of its own (``[questionnaires] pages``).
A page class more per position would change the number of pages, and with it the index of every
later page in the paper's sessions' exports (PageTimes' ``page_index``, ``_max_page_index``); one
page standing for whatever page a session puts at its position would be addressed and recorded
under another page's name. oTree builds each session's page list once (index -> app, round, page
class) and takes every page's address, display, bot check and timeout from it: for an app that
registered a ``page_order`` (lab/base/app_registry.py) the list holds its pages in the session's
order. The same classes, so the same count, routes and indexes, each page under its own name.

HOW TO CHECK: tests/test_questionnaire_order.py's bot session without this patch (remove it from
patch_modules()): the bots find the paper's first page where the file's should be; read oTree's
lookup.py for an order per session.
"""

from __future__ import annotations

import functools
from collections import Counter

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.lookup._get_session_lookups", "otree.lookup.get_page_lookup", "otree.lookup.get_min_idx_for_app",
           "otree.lookup.url_i_should_be_on", "otree.urls.url_patterns_from_app_pages",
           "otree.views.abstract.FormPageOrInGameWaitPage.url_pattern",
           "otree.views.abstract.FormPageOrInGameWaitPage.get_url"]
REPLACED = ["otree.lookup._get_session_lookups"]


def reordered(pages: dict, app_name: str, order) -> dict:
    """oTree's page list ``pages`` (index -> PageLookup) with ``app_name``'s pages in ``order`` in
    each of its rounds; ``pages`` itself when they are in that order already."""
    rounds: dict = {}
    for index, lookup in sorted(pages.items()):
        if lookup.app_name == app_name:
            rounds.setdefault(lookup.round_number, []).append(index)
    order = list(order)
    changed = {}
    for indexes in rounds.values():
        listed = [pages[index].page_class for index in indexes]
        if Counter(order) != Counter(listed):
            raise ValueError(f"{app_name}: a session's page order holds the app's pages, each once: "
                             f"{[page.__name__ for page in order]} is not an order of "
                             f"{[page.__name__ for page in listed]}")
        changed.update({index: pages[index]._replace(page_class=page)
                        for index, page in zip(indexes, order) if pages[index].page_class is not page})
    return {**pages, **changed} if changed else pages


def in_session_order(original):
    """oTree's ``_get_session_lookups``, each registered app's pages in the session's order."""
    from lab.base import app_registry

    @functools.lru_cache(maxsize=64)  # oTree's own keeps 32 sessions
    def ordered(session_code: str, orders: tuple) -> dict:
        pages = original(session_code)
        for app_name, order in orders:
            pages = reordered(pages, app_name, order)
        return pages

    def session_lookups(session_code: str) -> dict:
        # Asked several times a request: each order comes from what the app keeps (the session's
        # frozen experiment). Kept by the order too, so a list made before the session's record was
        # frozen (the app's own order) is never taken for the session's.
        orders = tuple((app_name, tuple(page_order(session_code)))
                       for app_name, page_order in app_registry.page_orders().items())
        return ordered(session_code, orders)

    return session_lookups


def install() -> None:
    import otree.lookup

    if patched_by(otree.lookup._get_session_lookups) == "page_order":
        return
    original = otree.lookup._get_session_lookups
    otree.lookup._get_session_lookups = marked(in_session_order(original), original, __name__)
