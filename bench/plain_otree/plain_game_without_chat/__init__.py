"""Plain oTree: the prisoner's dilemma without chat, pairs re-drawn every round."""

import os

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, Page, WaitPage, models

PAYOFFS = {("A", "A"): 70, ("A", "B"): 10, ("B", "A"): 80, ("B", "B"): 40}


class C(BaseConstants):
    NAME_IN_URL = "plain_game_without_chat"
    PLAYERS_PER_GROUP = 2
    NUM_ROUNDS = int(os.environ.get("LAB_MAX_ROUNDS_PER_GAME", "2"))


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


class Player(BasePlayer):
    choice = models.StringField(choices=["A", "B"])


def creating_session(subsession: Subsession):
    subsession.group_randomly()


def set_payoffs(group: Group):
    first, second = group.get_players()
    first.payoff = PAYOFFS[(first.choice, second.choice)]
    second.payoff = PAYOFFS[(second.choice, first.choice)]


class GameIntro(Page):
    template_name = "plain_game_with_chat/GameIntro.html"

    @staticmethod
    def is_displayed(player: Player):
        return player.round_number == 1


class RoundStart(WaitPage):
    wait_for_all_groups = True


class Decision(Page):
    form_model = "player"
    form_fields = ["choice"]
    template_name = "plain_game_with_chat/Decision.html"

    @staticmethod
    def get_timeout_seconds(player: Player):
        return player.session.config["decision_seconds"]


class WaitDecision(WaitPage):
    after_all_players_arrive = set_payoffs


class Result(Page):
    template_name = "plain_game_with_chat/Result.html"

    @staticmethod
    def get_timeout_seconds(player: Player):
        return player.session.config["result_seconds"]

    @staticmethod
    def vars_for_template(player: Player):
        return dict(other_choice=player.get_others_in_group()[0].choice)


page_sequence = [GameIntro, RoundStart, Decision, WaitDecision, Result]
