"""What the two game apps (with and without chat) share: matching, choices, payoffs, texts.

The functions take the app's own Player (duck-typed: both apps define the same decision
fields) so that each app stays a short list of fields and pages.
"""

from __future__ import annotations

import random
import time

from types import SimpleNamespace

from otree.api import Page, WaitPage
from otree.database import db
from sqlalchemy import bindparam

from lab.server import baked_lookups
from lab.base import matching
from lab.base import app_registry
from lab.base.grouping import set_group_matrix
from lab.shared_pages.pages import PageRowsAtOnce, TranslatedTimer, associates_wording, texts_for
from lab.base.payoff_table import payoff_table_vars
from lab.base.session_game import choice_labels, experiment_of, session_game
from lab.base.session_settings import forget_session_id, params, params_of, session_code_of, session_experiment
from lab.base.online_settings import has_lobby, is_online, page_waits_per_group
from lab.shared_pages.wait_for_all import MovesEveryoneOn


def game_rng(session_code: str, game: str, *parts) -> random.Random:
    """Reproducible randomness per session, game (and player/round when given)."""
    return random.Random("-".join([session_code, game, *map(str, parts)]))


# Online sessions (lab/online/dropouts.py): when a participant was dropped, in their vars.
DROPPED_AT_KEY = "online_dropped_at"
# A game player's ``dropout``: how the pair-round went on without a seat's participant
# (lab/online/stand_in.py): "stand_in" (an agent played the dropped seat against this player),
# "alone" (stand_in = none: the dropped seat's choice random, flagged, as a late participant's).
DROPOUT_RULES = ("stand_in", "alone")


def seat_dropped(participant) -> bool:
    """The participant was dropped from their online session (read without marking vars changed)."""
    return bool((participant._vars or {}).get(DROPPED_AT_KEY))


def dropout_rule(player) -> str:
    return player.field_maybe_none("dropout") or ""


def after_drop(player) -> bool:
    """A dropped participant's seat after their drop, played by nobody (stand_in = none): its
    random choice earns them nothing and is no participant's choice in the norm estimate check
    (the partner is paid against it, as against a late participant's)."""
    return bool(player.field_maybe_none("after_drop"))


def is_played(player) -> bool:
    """Rounds past the session's rounds_per_game are skipped (NUM_ROUNDS is the maximum)."""
    return player.round_number <= params_of(player).rounds_per_game


def chat_exchanges(player, game: str = "WC") -> int:
    """Message exchanges per round of the session's game ``game`` (its experiment's: 1 or 2 with chat)."""
    return experiment_of(session_code_of(player)).chat_exchanges(game)


def next_app_after_last_round(player, upcoming_apps: list):
    """Result page: after the session's last round go straight to the next app, instead of
    letting oTree step through every unplayed round up to NUM_ROUNDS."""
    if player.round_number >= params_of(player).rounds_per_game and upcoming_apps:
        return upcoming_apps[0]


def set_round_matching(subsession, game: str) -> None:
    """creating_session: pair humans (H-H) or seat each human with an agent, for this round."""
    from otree.models import Participant

    forget_session_id(subsession.session_id)
    p = params(subsession.session)
    # The participants' numbers and codes in one query: through ``player.participant`` each
    # player's would be a query of its own, after a flush of everything pending.
    participants = {participant_id: (id_in_session, code) for participant_id, id_in_session, code in db.query(
        Participant.id, Participant.id_in_session, Participant.code).filter(
        Participant.session_id == subsession.session_id)}
    players = sorted(subsession.get_players(), key=lambda pl: participants[pl.participant_id][0])
    round_index = subsession.round_number - 1
    if round_index >= p.rounds_per_game:
        set_group_matrix(subsession, [[pl] for pl in players])
        return
    rng = game_rng(subsession.session.code, game, "matching")
    if has_lobby(subsession.session):
        # Online H-H: nobody is paired until their cohort forms in the lobby (lab/online/lobby.py).
        set_group_matrix(subsession, [[pl] for pl in players])
        return
    rule = session_experiment(subsession.session.config).matching
    if rule == matching.FIXED_PARTNER:  # one draw for both games: game 2's partner is not game 1's
        rng = game_rng(subsession.session.code, "both-games", "matching")
    if p.with_agents:
        if is_online(subsession.session):
            # Online, participants go at their own pace: each has agents of their own (no waiting).
            seats = matching.private_agent_schedule(len(players), p.rounds_per_game, rng)[round_index]
        else:
            seats = matching.matched_agent_schedule(rule, len(players), p.rounds_per_game, p.game_index(game),
                                                    rng)[round_index]
        set_group_matrix(subsession, [[pl] for pl in players])
        for pl, seat in zip(players, seats):
            pl.associate_kind = "agent"
            pl.agent_seat = seat
            pl.associate_code = agent_id(seat)
    else:
        pairs = round_pairs(rule, len(players), p, game, round_index, rng)
        set_group_matrix(subsession, [[players[a], players[b]] for a, b in pairs])
        for pl in players:
            pl.associate_kind = "human"
        for a, b in pairs:
            players[a].associate_code = participants[players[b].participant_id][1]
            players[b].associate_code = participants[players[a].participant_id][1]


def round_pairs(rule: str, num_players: int, p, game: str, round_index: int, rng) -> list[tuple[int, int]]:
    """An H-H round's pairs by the experiment's matching rule (lab/base/matching.py)."""
    if rule == matching.FIXED_PARTNER:
        return matching.fixed_partner_pairs(num_players, p.game_index(game), rng, games=len(p.games))
    if rule == matching.RANDOM:
        return [matching.random_pairs(num_players, rng) for _ in range(round_index + 1)][round_index]
    return matching.perfect_stranger_pairs(num_players, p.rounds_per_game, rng)[round_index]


def agent_id(seat: int) -> str:
    return f"agent-{seat + 1}"


def human_associate(player):
    """The other human of an H-H pair."""
    return player.get_others_in_group()[0]


def conversation_id(player, game: str) -> str:
    """Shared by both sides of one pair-round (DATA.md)."""
    if player.associate_kind == "human" or dropout_rule(player) == "stand_in":  # a stand-in keeps the seat's code
        first, second = sorted([player.participant.code, player.associate_code])
    else:
        first, second = player.participant.code, player.associate_code
    return f"{player.session.code}-{game}-r{player.round_number}-{first}-{second}"


def record_choice(player, choice: str | None, timed_out: bool, game: str) -> None:
    """A decision; no choice in time means a random one, flagged (SI Note 1)."""
    choices = session_game(player.session).choices
    if timed_out or choice not in choices:
        rng = game_rng(player.session.code, game, player.participant.code, player.round_number)
        choice = rng.choice(choices)
        timed_out = True
    player.choice = choice
    player.choice_timed_out = timed_out
    player.decided_at = time.time()


def settle_round(player, associate_choice: str) -> None:
    own_points, associate_points = session_game(player.session).points(player.choice, associate_choice)
    player.associate_choice = associate_choice
    player.associate_payoff = associate_points
    set_payoff(player, 0 if after_drop(player) else own_points)


def set_payoff(player, points) -> None:
    """``player.payoff = points`` as oTree's setter keeps it (the participant's total moves by the
    same amount), without the commit that setter makes: a commit in the middle of a page request
    writes the rows so far, expires every row the request has read (each is read again on its
    next use) and, on SQLite, syncs the file to disk, once per payoff. The request's own commit
    writes the payoff with everything else the request changed, in one transaction."""
    points = 0 if points is None else points
    delta = points - player._payoff
    player._payoff += delta
    player.participant.payoff += delta


def settle_pair(group) -> None:
    """H-H wait page after the decisions: both players' payoffs from both choices."""
    first, second = group.get_players()
    settle_round(first, second.choice)
    settle_round(second, first.choice)


def game_total(player) -> int:
    return int(sum(pl.payoff for pl in player.in_rounds(1, player.round_number) if pl.choice))


class TranslatedWait(PageRowsAtOnce):
    """Mixin for WaitPage classes: their title and text in the session's language (and the
    rows a render needs in one query)."""

    body_key = "common_waiting_associate"

    @property
    def title_text(self):
        return texts_for(self.player)["common_waiting_title"]

    @property
    def body_text(self):
        return texts_for(self.player)[self.body_key]


def stage_timeout(player, stage: str) -> float:
    return params_of(player).stage_limits[stage]


def round_vars(player, game: str) -> dict:
    """Template variables of the in-round pages: header, texts, and the payoff table."""
    p = params_of(player)
    t = texts_for(player)
    return dict(
        t=t,
        round_label=t["common_round_of"].format(round=player.round_number, rounds=p.rounds_per_game),
        game_label=t["common_game_of"].format(game_index=p.game_index(game)),
        stand_in_notice=stand_in_notice(player, p, t),
        **payoff_table_vars(t, session_game(player.session), choice_labels(player.session, p.language)),
    )


def stand_in_notice(player, p, t) -> str:
    """Label-informed H-H: the participant is told that their associate left and an agent plays
    in their place (no deception). Label-uninformed sessions: nothing changes on screen."""
    if p.informed and p.associate_type == "human" and dropout_rule(player) == "stand_in":
        return t["dropouts_stand_in_notice"]
    return ""


class RoundMessages:
    """This round's messages, both ways and both stages, as the participant saw them (WC only).

    Read from the database only when the decision page's template iterates it, through the chat
    app's ``read_messages(player) -> {stage: {own_text, associate_text}}`` (the chat app knows who
    the associate is, human or agent, and where each message is). Each item: stage, title,
    own_text, associate_text (None when not sent in time); templates show them as escaped text.
    """

    def __init__(self, player, read_messages=None):
        self.player, self.read_messages = player, read_messages

    def __iter__(self):
        if self.read_messages is None:
            return iter(())
        t = texts_for(self.player)
        return iter([dict(stage=stage, title=t["game_message_title"].format(stage=stage), **texts)
                     for stage, texts in self.read_messages(self.player).items()])

    def __repr__(self):  # oTree's debug panel lists template variables with repr
        return f"RoundMessages(round {self.player.round_number})"


def intro_vars(player, game: str) -> dict:
    p = params_of(player)
    variables = round_vars(player, game)
    t = variables["t"]
    wording_key = "game_associates_informed" if p.informed else "game_associates_uninformed"
    variables.update(
        title=t["game_intro_title"].format(game_index=p.game_index(game)),
        body=t["game_intro_with_chat"] if game == "WC" else t["game_intro_without_chat"],
        associates=t[wording_key].format(associates=associates_wording(p)),
    )
    return variables


def result_vars(player, game: str) -> dict:
    variables = round_vars(player, game)
    labels = choice_labels(player.session, params_of(player).language)
    variables.update(
        own_choice_label=labels.get(player.field_maybe_none("choice"), player.field_maybe_none("choice")),
        associate_choice_label=labels.get(player.field_maybe_none("associate_choice"),
                                          player.field_maybe_none("associate_choice")),
        title=variables["t"]["game_result_title"].format(round=player.round_number),
        total=game_total(player),
        payoff_points=int(player.payoff),
    )
    return variables


def decision_row(player, game: str) -> list:
    """The decisions table row of a human (DATA.md). Exported mid-round (the associate has not
    decided yet), the associate's choice and both payoffs are empty."""
    p = params_of(player)
    associate_choice = player.field_maybe_none("associate_choice")
    settled = associate_choice is not None
    return [
        *session_keys(player.session), game, p.game_index(game), player.round_number,
        player.participant.code, "human", "", player.associate_code, player.associate_kind,
        conversation_id(player, game), player.choice, csv_bool(player.choice_timed_out), associate_choice,
        int(player.payoff) if settled else None, player.associate_payoff if settled else None,
        player.decided_at,
        "False", csv_bool(dropout_rule(player) == "stand_in"), dropout_rule(player), csv_bool(after_drop(player)),
    ]


def csv_bool(value):
    """DATA.md writes booleans as True/False (oTree's CSV writer would turn bool into 1/0)."""
    return None if value is None else str(bool(value))


def session_keys(session) -> list:
    p = params(session)
    return [session.code, p.treatment, p.associate_type, p.label_setting, p.game_order, "lab"]


def players_of(participant, app_name: str) -> list:
    """A participant's player rows in another app, by round (through the compiled-query cache:
    the payment reads both games' for each participant)."""
    Player = app_registry.player_model(app_name)
    query = baked_lookups.bakery(lambda session: session.query(Player).filter(
        Player.participant_id == bindparam("participant_id")).order_by(Player.round_number), Player)
    return query(db._db).params(participant_id=participant.id).all()


def players_by_participant(session_id: int, app_name: str) -> dict:
    """Every participant's player rows in ``app_name``, by round, for a whole session in one query
    (what ``players_of`` gives one participant at a time: an export reads them all)."""
    Player = app_registry.player_model(app_name)
    found: dict = {}
    for player in db.query(Player).filter(Player.session_id == session_id).order_by(
            Player.participant_id, Player.round_number):
        found.setdefault(player.participant_id, []).append(player)
    return found


# --- The pages both games share ------------------------------------------------------------------
def _page_of(app_module: str, name: str, page_class):
    """oTree names a page's URL after its class and finds its app by the class's module."""
    page_class.__name__ = page_class.__qualname__ = name
    page_class.__module__ = app_module
    return page_class


def shared_pages(app_module: str, game: str, *, start_round, read_messages=None) -> SimpleNamespace:
    """GameIntro, RoundStart, Decision and Result of a game app. ``start_round(subsession,
    players=None)`` runs when everyone (online: the group) has reached the round's start (it
    starts the agents' turns: of ``players``, or of everyone); the chat
    app's ``read_messages`` gives the decision page this round's messages (``RoundMessages``)."""
    # The game without chat meets the round's new associate on the decision page.
    decision_shows_new_associate = game == "WoC"

    class GameIntro(TranslatedTimer, Page):
        template_name = "lab/GameIntro.html"

        @staticmethod
        def is_displayed(player):
            return player.round_number == 1

        @staticmethod
        def vars_for_template(player):
            return intro_vars(player, game)

    class RoundStart(MovesEveryoneOn, TranslatedWait, WaitPage):
        """Every round starts together, so agents and humans are re-matched in step; the
        request that completes it moves everyone on (lab/shared_pages/wait_for_all.py)."""

        body_key = "common_waiting_all"

        @property
        def wait_for_all_groups(self):
            return not page_waits_per_group(self)  # online: the pair, or the human alone

        @staticmethod
        def after_all_players_arrive(subsession=None, group=None):
            if subsession is not None:
                start_round(subsession)
            else:  # online: this group's agents only (lab/online/lobby.py)
                start_round(group.subsession, players=group.get_players())

        @staticmethod
        def is_displayed(player):
            return is_played(player)

    class Decision(TranslatedTimer, Page):
        form_model = "player"
        form_fields = ["choice"]
        template_name = "lab/Decision.html"

        @staticmethod
        def is_displayed(player):
            return is_played(player)

        @staticmethod
        def get_timeout_seconds(player):
            return stage_timeout(player, "decision")

        @staticmethod
        def vars_for_template(player):
            variables = round_vars(player, game)
            labels = choice_labels(player.session, params_of(player).language)
            variables["choices"] = [dict(id=choice, label=label) for choice, label in labels.items()]
            variables["round_messages"] = RoundMessages(player, read_messages)
            if decision_shows_new_associate:
                variables["show_new_associate"] = True
            return variables

        @staticmethod
        def before_next_page(player, timeout_happened):
            record_choice(player, player.field_maybe_none("choice"), timeout_happened, game)

    class Result(TranslatedTimer, Page):
        template_name = "lab/Result.html"

        @staticmethod
        def is_displayed(player):
            return is_played(player)

        @staticmethod
        def get_timeout_seconds(player):
            return stage_timeout(player, "result")

        @staticmethod
        def vars_for_template(player):
            return result_vars(player, game)

        @staticmethod
        def app_after_this_page(player, upcoming_apps):
            return next_app_after_last_round(player, upcoming_apps)

    return SimpleNamespace(**{
        page.__name__: _page_of(app_module, page.__name__, page)
        for page in (GameIntro, RoundStart, Decision, Result)
    })
