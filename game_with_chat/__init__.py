"""The prisoner's dilemma with pre-play chat (WC): message 1, read 1, message 2, read 2,
decision, result, every stage bounded by the session's limits and enforced by the server. A
design of one message exchange (its experiment's ``chat_exchanges``) skips message 2 and read 2.

The associate is the experiment's matching's (lab/base/matching.py). Messages are ``Message`` rows, kept whether
or not they were sent in time; the associate's message is shown as plain text.
"""

import time

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, ExtraModel, Page, models

import protocol
from lab.agent_runtime import agent_models
from lab.experimenter import agents_report
from lab import app_start
from lab.server import notices
from lab.agent_runtime import wait_pages
from lab.online import dropouts
from lab import agent_runtime as agents
from lab.shared_pages import game as lab_game
from lab.shared_pages.game import chat_exchanges, is_played, stage_timeout
from lab.shared_pages.pages import TranslatedTimer
from lab.base.session_settings import max_rounds_per_game, params, params_of
from lab.base.text import clean_text

doc = __doc__
GAME = "WC"


class C(BaseConstants):
    NAME_IN_URL = "game_with_chat"
    PLAYERS_PER_GROUP = None  # pairs in H-H, one human (and an agent seat) otherwise
    NUM_ROUNDS = max_rounds_per_game()


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


class Player(BasePlayer):
    associate_code = models.StringField()
    associate_kind = models.StringField()  # human | agent
    agent_seat = models.IntegerField()
    message_1 = models.LongStringField(blank=True)
    message_2 = models.LongStringField(blank=True)
    message_1_started_at = models.FloatField()
    message_2_started_at = models.FloatField()
    choice = models.StringField(choices=list(protocol.CHOICES))
    choice_timed_out = models.BooleanField(initial=False)
    decided_at = models.FloatField()
    associate_choice = models.StringField()
    associate_payoff = models.IntegerField()
    # Online sessions: how this pair-round went on after the associate's participant was dropped
    # ("" / "stand_in" / "alone": lab/shared_pages/game.py DROPOUT_RULES, lab/online/stand_in.py).
    dropout = models.StringField(blank=True, initial="")
    # Online, stand_in = none: this row is a dropped participant's seat after their drop (its
    # choice random, its payoff 0, counted in no one's norm estimate check: lab/shared_pages/game.py).
    after_drop = models.BooleanField(initial=False)


class Message(ExtraModel):
    """One chat message, as sent (or not sent in time). ``player`` is the sender's row for a
    human sender and the reader's row for an agent sender."""

    player = models.Link(Player)
    stage = models.IntegerField()
    sender_code = models.StringField()
    sender_kind = models.StringField()
    receiver_code = models.StringField()
    receiver_kind = models.StringField()
    text = models.LongStringField()
    sent_in_time = models.BooleanField()
    stage_started_at = models.FloatField()
    sent_at = models.FloatField()
    unsent_draft = models.LongStringField()


AgentSeat, AgentTurn, LlmCall = agent_models.define(__name__, Subsession, Player)
TABLES = agents.GameTables(GAME, Player, Message, AgentSeat, AgentTurn, LlmCall)
app_start.register_app(__name__, Player, tables=TABLES)


# FUNCTIONS
def creating_session(subsession: Subsession):
    lab_game.set_round_matching(subsession, GAME)
    if subsession.round_number == 1 and params(subsession.session).with_agents:
        agents.create_seats(subsession, TABLES)


def start_agent_turns(subsession: Subsession, players=None):
    if params(subsession.session).with_agents or dropouts.is_online(subsession.session):  # stand-ins
        agents.start_round(subsession, TABLES, players=players)


def message_error(player: Player, text: str):
    """Counted as the page's counter counts (lab/base/text.py); the page keeps the text on an error."""
    p = params_of(player)
    t = lab_game.texts_for(player)
    text = clean_text(text)
    if not text.strip():
        return t["game_message_prompt"]
    if len(text) > p.message_max_chars:
        return t["game_message_too_long"].format(max_chars=p.message_max_chars)


def store_message(player: Player, stage: int, timeout_happened: bool):
    """The human's message of ``stage``; at the limit, nothing is sent (the draft is kept)."""
    # Cleaned before anything else touches the database: a NUL would fail PostgreSQL's flush.
    typed = clean_text(player.field_maybe_none(f"message_{stage}"))
    if timeout_happened and not typed:
        # Submitted without the browser's form (the experimenter's advance, a closed tab's timeout):
        # what the box last held, as the page said it (lab/server/notices.py).
        typed = clean_text(notices.draft(player.participant.code, player.participant._index_in_pages) or "")
    setattr(player, f"message_{stage}", typed)
    p = params_of(player)
    sent = not timeout_happened and bool(typed.strip()) and len(typed) <= p.message_max_chars
    Message.create(
        player=player,
        stage=stage,
        sender_code=player.participant.code,
        sender_kind="human",
        receiver_code=player.associate_code,
        receiver_kind=player.associate_kind,
        text=typed if sent else "",
        sent_in_time=sent,
        stage_started_at=player.field_maybe_none(f"message_{stage}_started_at"),
        sent_at=time.time() if sent else None,
        unsent_draft=None if sent else typed[: p.message_max_chars],
    )
    if not sent:
        setattr(player, f"message_{stage}", "")


def round_messages(player: Player) -> list:
    """Every Message row of this pair-round, both ways and both stages, in one query: a human's
    rows hang on the sender's player, an agent's on the reader's, and the pair (or the human
    alone, with an agent) is the round's group."""
    from otree.database import db

    return (db.query(Message).join(Player, Message.player_id == Player.id)
            .filter(Player.group_id == player.group_id).order_by(Message.id).all())


def received_message(player: Player, stage: int, messages: list | None = None):
    """The associate's Message row of ``stage`` (None if there is none yet)."""
    me = player.participant.code
    for row in round_messages(player) if messages is None else messages:
        if row.stage != stage:
            continue
        # The associate's seat: a human's row, an agent's (on the reader's row) or, in a round
        # an online stand-in took over (lab/online/stand_in.py), the seat's participant's message
        # before the drop and the stand-in's after it, both under the seat's code.
        if row.sender_code == player.associate_code and row.receiver_code == me:
            return row
        if player.associate_kind == "agent" and row.player_id == player.id and row.sender_kind == "agent":
            return row
    return None


def own_message(player: Player, stage: int, messages: list | None = None):
    for row in round_messages(player) if messages is None else messages:
        if row.stage == stage and row.player_id == player.id and row.receiver_code == player.associate_code \
                and row.sender_kind == "human":
            return row
    return None


def read_round(player: Player) -> dict:
    """Both stages' messages as the pages show them (``read_vars``), from one query: the decision
    page lists them (lab/shared_pages/game.py, ``RoundMessages``)."""
    messages = round_messages(player)
    return {stage: read_vars(player, stage, messages) for stage in range(1, chat_exchanges(player) + 1)}


# PAGES
_shared = lab_game.shared_pages(__name__, GAME, start_round=start_agent_turns,
                                read_messages=read_round)
GameIntro, RoundStart, Decision, Result = _shared.GameIntro, _shared.RoundStart, _shared.Decision, _shared.Result


def _message_page(stage: int):
    field = f"message_{stage}"

    class MessagePage(TranslatedTimer, Page):
        form_model = "player"
        form_fields = [field]
        template_name = "game_with_chat/Message.html"

        @staticmethod
        def is_displayed(player: Player):
            return is_played(player) and stage <= chat_exchanges(player)

        @staticmethod
        def get_timeout_seconds(player: Player):
            return stage_timeout(player, f"message_{stage}")

        @staticmethod
        def vars_for_template(player: Player):
            started = f"message_{stage}_started_at"
            if player.field_maybe_none(started) is None:
                setattr(player, started, time.time())
            variables = lab_game.round_vars(player, GAME)
            t = variables["t"]
            variables.update(
                title=t["game_message_title"].format(stage=stage),
                field=field,
                max_chars=params_of(player).message_max_chars,
                show_new_associate=stage == 1,
            )
            if stage == 2:
                variables.update(read_vars(player, 1))
            return variables

        @staticmethod
        def js_vars(player: Player):
            return dict(max_chars=params_of(player).message_max_chars)

        @staticmethod
        def error_message(player: Player, values):
            return message_error(player, values[field] or "")

        @staticmethod
        def before_next_page(player: Player, timeout_happened):
            store_message(player, stage, timeout_happened)
            if player.associate_kind == "agent":
                # The agent's next turn starts as soon as this message is in.
                agents.ensure_turn(player, TABLES, f"message_{stage}")
                agents.ensure_turn(player, TABLES, next_turn(player, stage))

    MessagePage.__name__ = f"Message{stage}"
    MessagePage.__qualname__ = MessagePage.__name__
    return MessagePage


def read_vars(player: Player, stage: int, messages: list | None = None) -> dict:
    """The two messages of ``stage`` as the page shows them; ``messages``: this round's, if
    already read (``round_messages``)."""
    messages = round_messages(player) if messages is None else messages
    received = received_message(player, stage, messages)
    sent = own_message(player, stage, messages)
    return dict(
        associate_text=received.text if received and received.sent_in_time else None,
        own_text=sent.text if sent and sent.sent_in_time else None,
    )


def _read_page(stage: int):
    class ReadPage(TranslatedTimer, Page):
        template_name = "game_with_chat/Read.html"

        @staticmethod
        def is_displayed(player: Player):
            return is_played(player) and stage <= chat_exchanges(player)

        @staticmethod
        def get_timeout_seconds(player: Player):
            return stage_timeout(player, f"read_{stage}")

        @staticmethod
        def vars_for_template(player: Player):
            variables = lab_game.round_vars(player, GAME)
            variables.update(read_vars(player, stage))
            variables["title"] = variables["t"]["game_read_title"].format(stage=stage)
            return variables

    ReadPage.__name__ = f"Read{stage}"
    ReadPage.__qualname__ = ReadPage.__name__
    return ReadPage


def finish_agent_round(player: Player):
    agents.finish_round(player, TABLES)


def next_turn(player: Player, stage: int) -> str:
    """The agent's turn after its message ``stage``: the next message, or the decision after the last."""
    return "decision" if stage >= chat_exchanges(player) else f"message_{stage + 1}"


def start_turn_after_message_1(player: Player):
    agents.ensure_turn(player, TABLES, next_turn(player, 1))


Message1 = _message_page(1)
Message2 = _message_page(2)
Read1 = _read_page(1)
Read2 = _read_page(2)
# One wait for either kind of associate (label-uninformed sessions stay blind); see lab/agent_runtime/wait_pages.py.
WaitMessage1 = wait_pages.wait_page(TABLES, "message_1", then=start_turn_after_message_1, name="WaitMessage1")
WaitMessage2 = wait_pages.wait_page(TABLES, "message_2", then="decision", name="WaitMessage2",
                                    displayed=lambda player: chat_exchanges(player) >= 2)
WaitDecision = wait_pages.wait_page(TABLES, "decision", then=finish_agent_round, name="WaitDecision",
                                     after_humans=lab_game.settle_pair)

page_sequence = [
    GameIntro, RoundStart,
    Message1, WaitMessage1, Read1,
    Message2, WaitMessage2, Read2,
    Decision, WaitDecision, Result,
]


def vars_for_admin_report(subsession: Subsession):
    return agents_report.admin_report(subsession, TABLES)
