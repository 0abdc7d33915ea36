"""A wait page for everyone (RoundStart, the payment's AllFinished) that moves them all on at once.

oTree's wait page, once complete, pushes 'ready' to every page waiting on it, and each page
reloads: the reload moves its participant on (one request, a write) and redirects to the next
page (a second request). At a round start that is 71 reloads at the same moment, 142 requests
one after the other under oTree's global lock: the slowest page loads of a lab's session, in
plain oTree as here (bench/lab_load.py).

Here the request that completes the page moves every participant waiting there on to their
next page, in its own transaction, by oTree's own step (``_increment_index_in_pages``: the same
pages skipped, the same app changes), and the 'ready' push says where they went. Each page then
goes straight there (``_static/lab/lab-page.js``): one request per participant. A page that
misses the push (a closed tab, a socket that joins late and hears oTree's plain 'ready') reloads
the wait page's address and is redirected by oTree, as it would be after any move; oTree's
timeout worker still visits closed tabs' next page, as it does after every wait page.
"""

from __future__ import annotations

from typing import Optional

from otree.database import db
from sqlalchemy import bindparam

from lab.server import channels
from lab.server.baked_lookups import bakery

PARTICIPANT_PATH_PREFIX = "/p/"


class MovesEveryoneOn:
    """Mixin for a ``WaitPage`` with ``wait_for_all_groups``."""

    def _mark_completed_and_notify(self, group):
        if not self.wait_for_all_groups:  # online H-H: per group (lab/online/lobby.py)
            return super()._mark_completed_and_notify(group)
        destination = move_waiting_on(self)
        with channels.ready_says(to=destination):
            super()._mark_completed_and_notify(group)

    def _get_participants_for_this_waitpage(self, group_or_subsession):
        return waiting_participants(self, group_or_subsession)

    def _tally_unvisited(self):
        """oTree's tally on every arrival (is this the last one, is anyone waiting), from two
        columns of each participant read once, where oTree reads every participant's whole row
        twice: at a round start each of the 72 arrivals asks it, and that reading was half of
        what an arrival cost the server. The last arrivals (three or fewer still to come) take
        oTree's own tally, which also writes the monitor's "waiting for" note."""
        if not self.wait_for_all_groups:
            return super()._tally_unvisited()
        positions = arrival_positions(self)
        still_to_come = sum(index < self._index_in_pages for index, _ in positions)
        if still_to_come <= 3:
            return super()._tally_unvisited()
        someone_waiting = any(index == self._index_in_pages and waiting for index, waiting in positions)
        return False, someone_waiting


def waiting_participants(page, group_or_subsession):
    """oTree's ``_get_participants_for_this_waitpage`` (the participants of the page's group, or
    of its subsession) through the compiled-query cache: a round start ran it three times, each
    built and compiled anew (SQLAlchemy 1.3 compiles every ORM query)."""
    from otree.models.participant import Participant

    Player, per_subsession = page.PlayerClass, page.wait_for_all_groups
    owner = Player.subsession_id if per_subsession else Player.group_id
    query = bakery(lambda session: session.query(Participant)
                   .join(Player, Player.participant_id == Participant.id), Player)
    query += (lambda q: q.filter(owner == bindparam("owner_id")), Player, per_subsession)
    return query(db._db).params(owner_id=group_or_subsession.id)


def arrival_positions(page) -> list:
    """(page index, is on a wait page) of every participant of the page's subsession."""
    from otree.models.participant import Participant

    Player = page.PlayerClass
    query = bakery(lambda session: session.query(Participant._index_in_pages, Participant.is_on_wait_page)
                    .join(Player, Player.participant_id == Participant.id), Player)
    query += (lambda q: q.filter(Player.subsession_id == bindparam("subsession_id")), Player)
    return query(db._db).params(subsession_id=page._subsession_pk).all()


def move_waiting_on(page) -> Optional[str]:
    """Every other participant waiting on ``page`` moves on as their own reload would move them.
    Returns where they went, as the page address after ``/p/<code>/`` ('app/Page/index'), when
    they all went to the same page (then the push can say it once for all), else None."""
    destinations = set()
    for participant in page._get_participants_for_this_waitpage(page._group_or_subsession):
        if participant.id == page.participant.id or participant._index_in_pages != page._index_in_pages:
            continue
        their_page = type(page).instantiate_without_request()
        last_seen = participant._last_request_timestamp
        their_page.set_attributes(participant)
        # Moved on by someone else's request: the monitor's "last seen" stays theirs.
        participant._last_request_timestamp = last_seen
        participant.is_on_wait_page = False
        participant._monitor_note_json = "[]"
        their_page._increment_index_in_pages()
        destinations.add(page_address(participant))
    return destinations.pop() if len(destinations) == 1 else None


def page_address(participant) -> Optional[str]:
    """The page a participant should be on, as 'app/Page/index' (None past the last page)."""
    url = participant._url_i_should_be_on()
    prefix = f"{PARTICIPANT_PATH_PREFIX}{participant.code}/"
    return url[len(prefix):] if url.startswith(prefix) else None
