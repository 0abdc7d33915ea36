"""Plain oTree: the prisoner's dilemma with two rounds of chat, pairs re-drawn every round."""

import os
import sys

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, Page, WaitPage, models

if "timeoutsubprocess" in sys.argv:
    # Only oTree's timeout worker, a process of its own that the bench does not measure, gets the
    # lab's fix for oTree's SQLite deadlock (lab/otree_patches/timeout_worker.py: its write transaction stays open
    # while it calls the server, whose requests then wait 5 s each for the lock): a baseline run
    # froze on it. The server the bench measures runs plain oTree.
    from lab.otree_patches import timeout_worker

    timeout_worker.install()

PAYOFFS = {("A", "A"): 70, ("A", "B"): 10, ("B", "A"): 80, ("B", "B"): 40}


class C(BaseConstants):
    NAME_IN_URL = "plain_game_with_chat"
    PLAYERS_PER_GROUP = 2
    NUM_ROUNDS = int(os.environ.get("LAB_MAX_ROUNDS_PER_GAME", "2"))


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


class Player(BasePlayer):
    message_1 = models.LongStringField(blank=True)
    message_2 = models.LongStringField(blank=True)
    choice = models.StringField(choices=["A", "B"])


def creating_session(subsession: Subsession):
    subsession.group_randomly()


def set_payoffs(group: Group):
    first, second = group.get_players()
    first.payoff = PAYOFFS[(first.choice, second.choice)]
    second.payoff = PAYOFFS[(second.choice, first.choice)]


def other(player: Player) -> Player:
    return player.get_others_in_group()[0]


class GameIntro(Page):
    @staticmethod
    def is_displayed(player: Player):
        return player.round_number == 1


class RoundStart(WaitPage):
    wait_for_all_groups = True


def _message(stage: int):
    class Message(Page):
        form_model = "player"
        form_fields = [f"message_{stage}"]
        template_name = "plain_game_with_chat/Message.html"

        @staticmethod
        def get_timeout_seconds(player: Player):
            return player.session.config[f"message_{stage}_seconds"]

    Message.__name__ = Message.__qualname__ = f"Message{stage}"
    return Message


def _read(stage: int):
    class Read(Page):
        template_name = "plain_game_with_chat/Read.html"

        @staticmethod
        def get_timeout_seconds(player: Player):
            return player.session.config[f"read_{stage}_seconds"]

        @staticmethod
        def vars_for_template(player: Player):
            return dict(text=other(player).field_maybe_none(f"message_{stage}"))

    Read.__name__ = Read.__qualname__ = f"Read{stage}"
    return Read


def _wait(name: str, after=None):
    class Wait(WaitPage):
        pass

    if after:
        Wait.after_all_players_arrive = after
    Wait.__name__ = Wait.__qualname__ = name
    return Wait


class Decision(Page):
    form_model = "player"
    form_fields = ["choice"]

    @staticmethod
    def get_timeout_seconds(player: Player):
        return player.session.config["decision_seconds"]


class Result(Page):
    @staticmethod
    def get_timeout_seconds(player: Player):
        return player.session.config["result_seconds"]

    @staticmethod
    def vars_for_template(player: Player):
        return dict(other_choice=other(player).choice)


Message1, Message2, Read1, Read2 = _message(1), _message(2), _read(1), _read(2)
WaitMessage1, WaitMessage2 = _wait("WaitMessage1"), _wait("WaitMessage2")
WaitDecision = _wait("WaitDecision", set_payoffs)
page_sequence = [GameIntro, RoundStart, Message1, WaitMessage1, Read1, Message2, WaitMessage2, Read2,
                 Decision, WaitDecision, Result]
