"""oTree's page-time records of a session (what its PageTimes export holds), read while it runs:
the dashboard's progress and round-start waits, the replay's pages and the manifest's start and
end times."""

from __future__ import annotations

import threading
from collections import defaultdict

# oTree's page-time batches are append-only: each session's parsed lines are kept with the last
# batch id read, so a dashboard poll reads only the batches written since the previous poll.
_PAGE_TIME_CACHE: dict[str, tuple[int, list[dict]]] = {}
_PAGE_TIME_CACHE_LOCK = threading.Lock()


def _parse_page_time_lines(texts, session_code: str) -> list[dict]:
    from otree import common2

    columns = list(common2.TimeSpentRow.__annotations__)
    prefix = f"{session_code},"
    rows = []
    for text in texts:
        for line in (text or "").splitlines():
            if not line.startswith(prefix):
                continue
            values = dict(zip(columns, line.split(",")))
            try:
                rows.append(dict(
                    participant_code=values["participant_code"], page_index=int(values["page_index"]),
                    app_name=values["app_name"], page_name=values["page_name"],
                    completed_at=int(values["epoch_time_completed"]), round_number=int(values["round_number"]),
                    timeout_happened=values["timeout_happened"] in ("1", "True"),
                    is_wait_page=values["is_wait_page"] in ("1", "True"),
                ))
            except (KeyError, ValueError):
                continue  # a malformed line is skipped, never fatal for the page
    return rows


def page_times(session, participant_code: str | None = None) -> dict[str, list[dict]]:
    """oTree's page-time records (its PageTimes export) of a session, per participant, in order:
    the rows already written to the database plus those still in this process's buffer."""
    from otree import common2
    from otree.database import dbq
    from otree.models_concrete import PageTimeBatch

    with _PAGE_TIME_CACHE_LOCK:
        last_id, stored = _PAGE_TIME_CACHE.get(session.code, (0, []))
        new = dbq(PageTimeBatch).filter(PageTimeBatch.id > last_id).order_by(PageTimeBatch.id).with_entities(
            PageTimeBatch.id, PageTimeBatch.text).all()
        if new:
            stored = stored + _parse_page_time_lines((text for _, text in new), session.code)
            last_id = new[-1][0]
            _PAGE_TIME_CACHE[session.code] = (last_id, stored)
    rows = stored + _parse_page_time_lines(list(common2.page_completion_buffer), session.code)
    result: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if participant_code and row["participant_code"] != participant_code:
            continue
        result[row["participant_code"]].append(dict(row))
    for participant_rows in result.values():
        participant_rows.sort(key=lambda r: (r["page_index"], r["completed_at"]))
    return result
