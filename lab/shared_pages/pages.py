"""Helpers every participant page uses: its texts, in the session's language."""

from __future__ import annotations

import html

from sqlalchemy import bindparam

from lab.base import i18n
from lab.server import pause
from lab.base.session_settings import SessionParams, params_of, session_code_of


def text_params(p: SessionParams) -> dict:
    """Values the texts' {placeholders} may use."""
    values = dict(
        rounds=p.rounds_per_game,
        fee=_money(p.participation_fee),
        rate=_money(p.currency_per_point),
        bonus=_money(p.norm_bonus),
        currency=p.currency,
        max_chars=p.message_max_chars,
    )
    values.update({stage: _number(seconds) for stage, seconds in p.stage_limits.items()})
    return values


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _money(x: float) -> str:
    return f"{x:g}"


def texts_for(player) -> dict:
    """Every text of the session's language, its placeholders filled in; where the session's design
    differs from the paper's (experiment_design/texts.py: its slots), the paper's key holds the
    design's text, so the templates ask the same keys for every design."""
    p = params_of(player)
    found = i18n.texts(p.language, **text_params(p))
    found.update(_slot_texts(session_code_of(player), p))
    return found


_SLOT_TEXTS: dict[str, dict] = {}


def _slot_texts(code: str, p: SessionParams) -> dict:
    """The session's design's slot texts under the paper's keys (empty for the paper's design); the
    texts that announce the norm bonus follow the session's bonus (0: none announced)."""
    found = _SLOT_TEXTS.get(code)
    if found is None:
        from experiment_design.texts import SLOT_KEYS, flat_key
        from lab.base.session_game import experiment_kept, experiment_of

        experiment = experiment_of(code)
        # the choices' labels escaped: the texts around them are HTML
        values = {**text_params(p), **{name: html.escape(label)
                                       for name, label in experiment.text_params(p.language).items()}}
        keys = {slot: flat_key(key) for slot, key in experiment.session_text_keys(p.norm_bonus).items()}
        found = {flat_key(SLOT_KEYS[slot]): i18n.text(p.language, key, **values)
                 for slot, key in keys.items() if key != flat_key(SLOT_KEYS[slot])}
        if experiment_kept(code):  # kept once the session's design is frozen
            _SLOT_TEXTS[code] = found
    return found


def associates_wording(p: SessionParams) -> str:
    """How page 3 names the associates (docs/protocol.md, Treatments): never a falsehood. The words
    of the session's experiment ([labels.<setting>], per language), escaped: the texts around them
    are HTML. A label-uninformed setting names both kinds alike (experiment_design's coherence)."""
    if p.associate_words:
        return html.escape(p.associate_words)
    if not p.informed:
        key = "common_associate_either"
    elif p.associate_type == "human":
        key = "common_associate_humans"
    else:
        key = "common_associate_machines"
    return i18n.text(p.language, key)


# A click made in the page's last moment reaches the server a little after the deadline the
# page was given (the timer starts when the page has loaded; the post takes its time on the
# network). Half a second covers a lab's LAN many times over; later posts count as timed out.
DEADLINE_GRACE_SECONDS = 0.5


def server_timed_out(participant, page_index: int, now: float | None = None) -> bool:
    """Whether page ``page_index`` of ``participant`` is past its deadline (plus the grace).

    oTree stores the deadline of the page a participant is on when it first renders it
    (``_timeout_page_index`` / ``_timeout_expiration_time``, from get_timeout_seconds), but
    accepts an ordinary post until its worker submits the page (deadline + 6 s). While the
    session is paused, what was not late when the pause began is not late (lab/server/pause.py)."""
    expires = participant._timeout_expiration_time
    if participant._timeout_page_index != page_index or expires is None:
        return False
    return pause.clock(participant._session_code, now) > expires + DEADLINE_GRACE_SECONDS


class ServerDeadline:
    """Mixin for timed Page classes: a submission that reaches the server after the page's
    deadline counts as timed out whatever the client sends (``timeout_happened`` in oTree's
    form handling, error_message, before_next_page and the page-times export)."""

    _lab_timeout_happened = False

    @property
    def timeout_happened(self) -> bool:
        return self._lab_timeout_happened

    @timeout_happened.setter
    def timeout_happened(self, client_or_worker_says: bool) -> None:
        # oTree sets this once per post, before it reads the form; decided here, once.
        self._lab_timeout_happened = bool(client_or_worker_says) or server_timed_out(
            self.participant, self._index_in_pages)


def lab_reconnecting_text(self) -> str:
    """What lab-page.js shows while the server is unreachable (read by the base template from
    the page instance; a wait page mixin may use the same function)."""
    return i18n.text(params_of(self.player).language, "connection_lost")


def _online_limit(page_name: str, questionnaire: bool):
    """A page's ``get_timeout_seconds`` where the lab has none: None in the lab, the session's
    online limit for this kind of page online."""
    from lab.base.online_settings import page_limit

    def get_timeout_seconds(player):
        return page_limit(player.session.config, page_name, questionnaire)

    get_timeout_seconds.lab_online_limit = True
    return get_timeout_seconds


class PlayerFormOnly:
    """Mixin for Page classes whose form is the player's: oTree's ``get_object`` builds a table
    of every form model it knows, the player's group included, so every showing and every
    submission of a form page read the group row for nothing."""

    def get_object(self):
        if self.form_model == "player":
            return self.player
        return super().get_object()


def load_page_rows(page) -> list:
    """The page's group, subsession and session in one query, for oTree's ``get_context_data``,
    which reads each of them with a query of its own on every page it renders (three round
    trips to the database under oTree's global lock). oTree's lookups then find them in the
    request's identity map (the group through the player's link, the others by id: see
    ``lab.server.baked_lookups``). Returned to be held: that map forgets rows nothing refers to."""
    from otree.database import db  # here: texts and deadlines are also used without oTree's database
    from otree.models.session import Session

    from lab.server.baked_lookups import bakery

    group_id = page.player.group_id
    if group_id is None:
        return []
    Group, Subsession = page.GroupClass, page.SubsessionClass
    query = bakery(lambda s: s.query(Group, Subsession, Session), Group, Subsession)
    query += (lambda q: q.filter(Group.id == bindparam("group_id"), Subsession.id == bindparam("subsession_id"),
                                 Session.id == bindparam("session_id")), Group, Subsession)
    # No autoflush: these rows do not depend on the request's pending changes (oTree's note of
    # the participant's last request, say), which then go in the commit's one UPDATE.
    with db._db.no_autoflush:
        return query(db._db).params(group_id=group_id, subsession_id=page._subsession_pk,
                                    session_id=page._session_pk).all()


class PageRowsAtOnce:
    """Mixin for Page and WaitPage classes: the rows oTree's ``get_context_data`` reads, read
    together before it (``load_page_rows``)."""

    def get_context_data(self, *args, **kwargs):
        self._lab_page_rows = load_page_rows(self)
        return super().get_context_data(*args, **kwargs)


class TranslatedTimer(PageRowsAtOnce, PlayerFormOnly, ServerDeadline):
    """Mixin for Page classes: oTree's timer caption in the session's language, the server's
    deadline (ServerDeadline), a player form that reads no group (PlayerFormOnly), and the
    rows a render needs in one query (PageRowsAtOnce)."""

    lab_reconnecting_text = lab_reconnecting_text
    # Online sessions give a limit to every page that has none in the lab (lab/base/online_settings.py).
    lab_online_questionnaire = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        inherited = getattr(cls, "get_timeout_seconds", None)
        if inherited is None or getattr(inherited, "lab_online_limit", False):
            cls.get_timeout_seconds = staticmethod(_online_limit(cls.__name__, cls.lab_online_questionnaire))

    @property
    def timer_text(self):
        return i18n.text(params_of(self.player).language, "common_timer")
