"""JSON that a page can hold in a ``<script type="application/json">`` element: nothing in it (a
participant's or an experimenter's text included) can close the element."""

from __future__ import annotations

import json


def safe_json(data) -> str:
    """JSON for a <script type="application/json"> block: no "</script>" can close it."""
    return json.dumps(data, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
