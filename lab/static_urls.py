"""The address of a static file, worked out once per file instead of on every page shown.

Every participant page names eight static files (``{% static %}``: Bootstrap, jQuery, oTree's
scripts, the lab's), and oTree finds each address by walking every route of the app
(starlette's ``url_path_for``, about 75 routes) after checking that the file exists: 0.66 ms
per page shown, measured, against 3-5 ms for the rest of a page's own code (issue 14's server
trace). The answer for a file never changes while the server runs; a file that does not exist
still raises oTree's error, every time (errors are not remembered).
"""

from __future__ import annotations

import functools


def install() -> None:
    from otree.templating import nodes

    if getattr(nodes.url_of_static_file, "_lab_cached", False):
        return
    cached = functools.lru_cache(maxsize=1024)(nodes.url_of_static_file)
    cached._lab_cached = True
    nodes.url_of_static_file = cached


install()
