"""REPLACES: nothing of oTree's; adds the lab's admin pages (Dashboard, its data and actions,
Replay, Data package, Online bonus: lab/experimenter/admin_views.py's ``ADMIN_VIEWS``) to otree.views.admin,
and the ``lab_model_check`` filter to oTree's filter table (otree.templating.filters.filtermap),
for _templates/otree/Session.html, a copy of oTree's template with the lab's tabs.

WHY: oTree has no way to add admin pages. It builds its admin routes from the view classes
defined in ``otree.views.admin`` (``otree.urls.url_patterns_from_builtin_module``) and guards
them with its admin login (``OTREE_AUTH_LEVEL``): views declared with that module as their
``__module__`` are routed and guarded as its Monitor tab is, with no second web app. They must be
there before oTree builds its routes (otree.urls, imported after the apps).

HOW TO CHECK: oTree's url_patterns_from_builtin_module and its login rule (otree.urls,
otree.views.cbv) unchanged; tests/test_experimenter_view.py opens the pages, and
tests/test_text.py compares Session.html with oTree's.
"""

from __future__ import annotations

import logging
import sys

TARGETS = ["otree.urls.url_patterns_from_builtin_module", "otree.views.admin", "otree.views.cbv.AdminSessionPage",
           "otree.templating.filters.register", "template:otree/Session.html"]
REPLACED: list[str] = []


def install() -> None:
    import otree.templating.filters as otree_filters
    import otree.views.admin as otree_admin

    from lab.experimenter.admin_views import ADMIN_VIEWS, model_check_banner

    if all(getattr(otree_admin, view.__name__, None) is view for view in ADMIN_VIEWS):
        return
    for view in ADMIN_VIEWS:
        view.__module__ = otree_admin.__name__
        setattr(otree_admin, view.__name__, view)
    otree_filters.register("lab_model_check")(model_check_banner)
    if "otree.urls" in sys.modules:  # routes already built (not the case in oTree 6.0's commands)
        logging.getLogger(__name__).warning("oTree built its routes before the lab's admin pages were "
                                            "registered: the Dashboard, Replay and Data package pages are not served")
