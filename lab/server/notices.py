"""What the experimenter's actions show on a participant's page: a message pop-up, the "paused"
overlay (_static/lab/lab-notices.js draws both, as text).

- At render, every participant page (oTree's Page and WaitPage) carries its state in a
  ``<script type="application/json">`` block (``page_state_json``, read by
  _templates/otree/Base_UserFacing.html): the messages not yet dismissed, whether the session is
  paused, the texts in the session's language, and the address of its socket.
- Live, over a websocket of its own (``/lab_notices``, one per page): the experimenter's pushes
  (a message, a dismissal in another tab, pause, resume). A push sent between the page's render
  and its socket's connection is not lost: the server keeps each push for
  ``REPLAY_SECONDS`` and a socket is sent, as it connects, those made since its page was
  rendered. So connecting reads no database and waits for no lock (a round start connects
  every page at once).
- The participant dismisses a message on the same socket; the dismissal is written under
  oTree's global lock, as a page request's writes are, on the message's row of the
  interventions table (``dismissed_at``, lab/experimenter/interventions.py).

Pending messages live in ``participant.vars["lab_notices"]`` (what the pages show; the
interventions table is the record). Nothing here is rendered as HTML.

A message page also sends what is typed in its box on this socket as it changes (``draft``, kept
in this process's memory only: no lock, no database): a page submitted without its browser (the
experimenter's advance, the timeout worker's submission of a closed tab) keeps it as the
message's unsent draft, as a page its own timer submits does (game_with_chat ``store_message``).
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlencode

from lab.base import app_registry, i18n
from lab.server import pause
from lab.base.committed import after_commit
from lab.base.page_json import safe_json

PENDING_KEY = "lab_notices"
SOCKET_PATH = "/lab_notices"
REPLAY_SECONDS = 120
TEXT_KEYS = ("experimenter_paused", "experimenter_message_title", "experimenter_message_ok")

_recent: dict[str, list[tuple[float, dict]]] = {}  # channel group -> [(when, payload)], oldest first
_recent_lock = threading.Lock()


def participant_group(participant_code: str) -> str:
    return f"lab-notices-p-{participant_code}"


def session_group(session_code: str) -> str:
    return f"lab-notices-s-{session_code}"


def pending_messages(participant) -> list[dict]:
    """The messages the participant has not dismissed (read without marking vars as changed:
    oTree writes ``vars`` back whenever it is accessed as ``participant.vars``)."""
    return list((participant._vars or {}).get(PENDING_KEY) or [])


def set_pending_messages(participant, messages: list[dict]) -> None:
    participant.vars[PENDING_KEY] = messages


def page_state(participant, language: str, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    socket = SOCKET_PATH + "?" + urlencode(dict(participant_code=participant.code,
                                                session_code=participant._session_code, since=f"{now:.3f}"))
    return dict(
        socket=socket,
        paused=pause.paused_since(participant._session_code) is not None,
        messages=[dict(id=m["id"], text=m["text"]) for m in pending_messages(participant)],
        texts={key: i18n.text(language, key) for key in TEXT_KEYS},
    )


def page_state_json(view) -> str:
    """For the base template: the page's state as JSON that no text can break out of."""
    from lab.base.session_settings import params_of

    return safe_json(page_state(view.participant, params_of(view.player).language))


# --- pushes ----------------------------------------------------------------------------------------
def push(group: str, payload: dict, now: float | None = None) -> None:
    """Once the request's changes are committed, send ``payload`` to the group's pages, and to
    those that connect within ``REPLAY_SECONDS`` having been rendered before it."""
    now = time.time() if now is None else now
    after_commit(lambda: _send(group, dict(payload, sent_at=now), now))


def _send(group: str, payload: dict, now: float) -> None:
    from otree.channels.utils import sync_group_send

    with _recent_lock:
        _forget_old(now)
        _recent.setdefault(group, []).append((now, payload))
    sync_group_send(group=group, data=payload)


def _forget_old(now: float) -> None:
    for group in list(_recent):
        kept = [entry for entry in _recent[group] if entry[0] >= now - REPLAY_SECONDS]
        if kept:
            _recent[group] = kept
        else:
            del _recent[group]


def pushed_since(groups: list[str], since: float) -> list[dict]:
    with _recent_lock:
        entries = [entry for group in groups for entry in _recent.get(group, ()) if entry[0] > since]
    return [payload for _, payload in sorted(entries, key=lambda entry: entry[0])]


def dismiss(participant_code: str, message_id) -> bool:
    """The participant closed the message's pop-up: its row of the interventions table gets
    ``dismissed_at`` (the first time), and it leaves their pages (every open tab is told)."""
    from otree.models import Participant

    try:
        message_id = int(message_id)
    except (TypeError, ValueError):
        return False
    participant = Participant.objects_filter(code=participant_code).first()
    if participant is None:
        return False
    row = app_registry.interventions_model().objects_filter(
        id=message_id, participant_code=participant_code, action="message").first()
    if row is None:
        return False
    if row.dismissed_at is None:
        row.dismissed_at = time.time()
    pending = pending_messages(participant)
    if any(m["id"] == message_id for m in pending):
        set_pending_messages(participant, [m for m in pending if m["id"] != message_id])
    push(participant_group(participant_code), dict(lab_notice="dismissed", id=message_id))
    return True


# --- what a message page's box holds -----------------------------------------------------------------
DRAFT_MAX_CHARS = 10000  # far above any message limit: a draft is cut to the session's at use
_drafts: dict[str, tuple[int, str]] = {}  # participant code -> (page index, the box's text)
_drafts_lock = threading.Lock()


def note_draft(participant_code: str, page_index, text) -> None:
    try:
        index = int(page_index)
    except (TypeError, ValueError):
        return
    with _drafts_lock:
        _drafts[participant_code] = (index, str(text)[:DRAFT_MAX_CHARS])


def draft(participant_code: str, page_index: int) -> str | None:
    """What the box of the participant's page ``page_index`` held when it last said (None: nothing heard)."""
    with _drafts_lock:
        found = _drafts.get(participant_code)
    return found[1] if found and found[0] == page_index else None


# --- the page's socket ------------------------------------------------------------------------------
def consumer_class():
    from otree.channels import utils as channel_utils
    from otree.channels.consumers import _OTreeAsyncJsonWebsocketConsumer, parse_querystring
    from otree.channels.utils import channel_layer
    from otree.database import session_scope

    class LabNotices(_OTreeAsyncJsonWebsocketConsumer):
        """/lab_notices?participant_code=…&session_code=…&since=…: a participant page's socket."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._requires_login = False  # a participant's page (oTree asks it of admin sockets)
            kw = self.cleaned_kwargs
            self.groups = [participant_group(kw["participant_code"]), session_group(kw["session_code"])]

        def clean_kwargs(self):
            query = parse_querystring(self.scope["query_string"])
            try:
                since = float(query.get("since") or 0)
            except ValueError:
                since = 0.0
            return dict(participant_code=query.get("participant_code", ""),
                        session_code=query.get("session_code", ""), since=since)

        def group_name(self, **kwargs):
            return None

        async def on_connect(self, websocket) -> None:
            # oTree's connect without its lock and database scope: nothing is read here.
            websocket.send = channel_utils.wrap_websocket_send(websocket.send)
            await websocket.accept()
            self.websocket = websocket
            for group in self.groups:
                channel_layer.add(group, websocket)
            for payload in pushed_since(self.groups, self.cleaned_kwargs["since"]):
                await websocket.send_json(payload)

        async def on_disconnect(self, websocket, close_code: int) -> None:
            for group in self.groups:
                channel_layer.discard(group, websocket)

        async def on_receive(self, websocket, data) -> None:
            if isinstance(data, dict) and "draft" in data:
                note_draft(self.cleaned_kwargs["participant_code"], data.get("page_index"), data["draft"])
                return
            if not isinstance(data, dict) or "dismiss" not in data:
                return
            async with self.lock:  # oTree's global lock, as every page request's writes
                with session_scope():
                    dismiss(self.cleaned_kwargs["participant_code"], data["dismiss"])

    return LabNotices
