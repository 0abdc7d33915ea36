"""Dropouts in online sessions: who is dropped, when, and what their pages do from then on.

A participant of an online session (``session.config["online"]``) is dropped
- after ``dropout_after_timeouts`` consecutive timed-out form pages (default 3: a whole round of
  the game with chat without one input). A page the participant submits themselves resets the
  count; a page without a form that ran out (a read or result page left to its timer) neither
  counts nor resets: reading is not absence. The experimenter's "advance" submits as a timeout
  and counts as one;
- when no page of theirs has been open for ``dropout_closed_tab_seconds`` (default 90;
  lab/online/presence.py watches the pages' sockets in the server, without anyone acting);
- by the experimenter (the dashboard's "mark dropped", lab/experimenter/interventions.py).

``mark_dropped`` records it in ``participant.vars`` (``online_dropped_at``,
``online_dropped_reason``, ``online_dropped_by``; outcome ``timed_out``), hands their seat over
(lab/online/stand_in.py: an agent stand-in, or the partner finishes alone) and moves them past
every page they have left: from then on every page is skipped for them (``is_displayed`` False)
except the exit page ``OnlineExit`` (docs/online.md, "Dropouts").
"""

from __future__ import annotations

import logging
import time

from lab.shared_pages.game import DROPPED_AT_KEY, seat_dropped

REASONS = ("timeouts", "closed_tab", "experimenter")
REASON_KEY = "online_dropped_reason"
BY_KEY = "online_dropped_by"
OUTCOME_KEY = "online_outcome"
TIMEOUTS_KEY = "online_timeouts_in_a_row"
EXIT_PAGE = "OnlineExit"

logger = logging.getLogger("lab.online")

_CONFIG: dict[str, dict] = {}  # session code -> its dropout settings (a config never changes)
# The online sessions this process has seen (a page of theirs, or lab/online/presence.py's scan):
# the closed-tab watcher looks at these.
ONLINE_SESSIONS: set = set()


def settings(session) -> dict:
    """The session's online and dropout settings (the defaults of lab/base/session_settings.py)."""
    found = _CONFIG.get(session.code)
    if found is None:
        from lab.base.session_settings import online_dropout_defaults

        found = {**online_dropout_defaults(), **{k: v for k, v in session.config.items()
                                                 if k in online_dropout_defaults()}}
        found["online"] = bool(found["online"])
        _CONFIG[session.code] = found
        if found["online"]:
            ONLINE_SESSIONS.add(session.code)
    return found


def is_online(session) -> bool:
    return settings(session)["online"]


def _online_by_code(session_code: str) -> bool:
    found = _CONFIG.get(session_code)
    if found is not None:
        return found["online"]
    from otree.models import Session

    session = Session.objects_filter(code=session_code).first()
    return bool(session is not None and is_online(session))


def is_dropped(participant) -> bool:
    return seat_dropped(participant)


def finished(participant) -> bool:
    """On the exit page or past the last page: nothing left to drop."""
    return bool(participant._index_in_pages and (participant._index_in_pages >= participant._max_page_index
                                                 or participant._current_page_name == EXIT_PAGE))


def left_already(participant) -> bool:
    """Screened out by the quiz or sent out by the lobby's limit: on the way to the exit page,
    with no seat in any pair (lab/online/exit.py); nothing to drop."""
    return (participant._vars or {}).get(OUTCOME_KEY) in ("screened_out", "lobby_timeout")


def mark_dropped(participant, reason: str, by: str, advance: bool = True) -> bool:
    """Drop ``participant``; True if this changed anything (False: dropped already).

    ValueError (a refusal) for an unknown reason, a session that is not online, a participant
    who has not started or has finished. ``advance``: move them past their pages now (False
    when called from the submission of their page, which moves them on itself)."""
    if reason not in REASONS:
        raise ValueError(f"unknown reason {reason!r} (one of {', '.join(REASONS)})")
    session = participant.session
    if not is_online(session):
        raise ValueError(f"session {session.code} is not an online session (config 'online')")
    if is_dropped(participant):
        return False
    if not participant._index_in_pages:
        raise ValueError(f"participant {participant.code} has not started")
    if finished(participant):
        raise ValueError(f"participant {participant.code} has finished")
    if left_already(participant):
        raise ValueError(f"participant {participant.code} has left the session already "
                         f"({participant.vars.get(OUTCOME_KEY)})")
    now = time.time()
    participant.vars[DROPPED_AT_KEY] = now
    participant.vars[REASON_KEY] = reason
    participant.vars[BY_KEY] = by
    participant.vars[OUTCOME_KEY] = "timed_out"
    from lab.online import stand_in

    handed = stand_in.hand_over(participant)
    logger.info("participant %s of %s dropped (%s, by %s): %s", participant.code, session.code, reason, by, handed)
    if advance:
        move_past_pages(participant)
    return True


def move_past_pages(participant) -> None:
    """The dropped participant leaves the page they are on, unsubmitted, for the exit page (or
    the end): every page between is skipped for them, wait pages counted as visited (oTree's own
    step, ``_increment_index_in_pages``). An open tab is told to reload."""
    from otree.channels.utils import auto_advance_group

    from lab.base.committed import after_commit

    page = participant._get_page_instance()
    if page is None:
        return
    participant.is_on_wait_page = False
    page._increment_index_in_pages()  # for a dropped participant: jump_to_exit
    code = participant.code

    def tell_tab():
        from otree.channels.utils import sync_group_send

        sync_group_send(group=auto_advance_group(code), data={"auto_advanced": True})

    after_commit(tell_tab)


def exit_page_index(participant, after: int) -> int:
    """The index of the exit page after ``after``, else past the last page (oTree's end)."""
    from otree.lookup import get_page_lookup

    for index in range(after + 1, participant._max_page_index + 1):
        if get_page_lookup(participant._session_code, index).page_class.__name__ == EXIT_PAGE:
            return index
    return participant._max_page_index + 1


def jump_to_exit(page) -> None:
    """oTree's step past the pages a dropped participant skips, in one move. oTree's own step
    visits every page left (each round's wait pages: a commit and a count of the group each, some
    80 in a 10-round session, about a second under the global lock while every other page waits).
    Here the participant goes straight to the exit page; only the wait pages where someone is
    waiting now are counted, as oTree's step counts them (the dropped participant arrived, the
    last arrival moves the group on); a partner who comes to a later wait page finds them past
    it, as after oTree's step."""
    from otree.api import WaitPage
    from otree.database import db, dbq
    from otree.lookup import get_page_lookup
    from otree.models import Participant

    participant = page.participant
    start = page._index_in_pages
    target = exit_page_index(participant, start)
    waited_at = sorted({index for (index,) in dbq(Participant).with_entities(Participant._index_in_pages).filter(
        Participant.session_id == participant.session_id, Participant.is_on_wait_page.is_(True),
        Participant.id != participant.id, Participant._index_in_pages > start,
        Participant._index_in_pages < target).distinct()})
    skipped = []
    for index in waited_at:
        wait = get_page_lookup(participant._session_code, index).page_class.instantiate_without_request()
        if not isinstance(wait, WaitPage):
            continue
        participant._index_in_pages = index
        wait.set_attributes(participant)
        wait._is_displayed()  # skipped: marks the pages where a stand-in plays the seat (see skipping_dropped)
        if not wait.group_by_arrival_time:
            skipped.append(wait)
    participant._index_in_pages = target
    if target <= participant._max_page_index:
        get_page_lookup(participant._session_code, target).page_class.instantiate_without_request(
        ).set_attributes(participant)  # the monitor's current page, as after oTree's step
    db.commit()  # the counts below read the participants' pages from the database
    for wait in skipped:
        is_last, someone_waiting = wait._tally_unvisited()
        if is_last and someone_waiting:
            wait._run_aapa_and_notify(wait._group_or_subsession)


# --- oTree's pages (lab/otree_patches/page_index.py puts these in) ----------------------------------------
def skipping_dropped(original_is_displayed):
    """oTree's ``_is_displayed``: a dropped seat's pages are skipped, all but the exit page."""
    from otree.api import WaitPage

    def _is_displayed(self):
        _online_by_code(self.participant._session_code)  # noted for the closed-tab watcher (once per session)
        if seat_dropped(self.participant) and type(self).__name__ != EXIT_PAGE:
            # A round's start (online: per pair, lab/online/lobby.py) is no such wait: no turn runs
            # yet, and the partner arriving there must find the seat arrived, or wait for ever.
            if isinstance(self, WaitPage) and not self.wait_for_all_groups and not self.group_by_arrival_time \
                    and type(self).__name__ != "RoundStart" and _group_has_stand_in(self):
                # The partner plays against the stand-in (an agent's wait, by itself): oTree must not
                # count this skip as the pair's last arrival, which would settle the stand-in's
                # running turn by its fallback at once.
                self.group_by_arrival_time = True
            return False
        return original_is_displayed(self)

    return _is_displayed


def jumping_to_exit(original_increment):
    """oTree's ``_increment_index_in_pages``: a dropped seat goes straight to the exit page."""

    def _increment_index_in_pages(self):
        if seat_dropped(self.participant) and type(self).__name__ != EXIT_PAGE:
            return jump_to_exit(self)
        return original_increment(self)

    return _increment_index_in_pages


def counting_timeouts(original_record):
    """oTree's ``Page._record_page_completion_time``, then the count of timed-out pages."""

    def _record_page_completion_time(self):
        original_record(self)
        count_timeout(self)

    return _record_page_completion_time


def _group_has_stand_in(page) -> bool:
    return any(_associate_kind(player) == "agent" for player in page.group.get_players())


def _associate_kind(player):
    """None for a player not yet seated in a lobby cohort (online H-H), or of an app without one."""
    try:
        return player.field_maybe_none("associate_kind")
    except (AttributeError, KeyError):
        return None


def count_timeout(page) -> None:
    """After a page's submission: count consecutive timed-out form pages; drop at the limit."""
    participant = page.participant
    if not _online_by_code(participant._session_code) or seat_dropped(participant):
        return
    timed_out = bool(page.timeout_happened)
    if not timed_out:
        if (participant._vars or {}).get(TIMEOUTS_KEY):
            participant.vars[TIMEOUTS_KEY] = 0
        return
    if not page.has_form():
        return
    count = int((participant._vars or {}).get(TIMEOUTS_KEY) or 0) + 1
    participant.vars[TIMEOUTS_KEY] = count
    if count >= int(settings(participant.session)["dropout_after_timeouts"]):
        # The page's own submission moves them on, past every page now skipped.
        try:
            mark_dropped(participant, "timeouts", by="server", advance=False)
        except ValueError as refused:  # e.g. the last page: nothing left to skip
            logger.warning("participant %s not dropped: %s", participant.code, refused)
