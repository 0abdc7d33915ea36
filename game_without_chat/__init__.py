"""The prisoner's dilemma without communication (WoC): decision and result only, a new
associate every round, the same limits and payoffs as the game with chat."""

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, Page, WaitPage, models

import protocol
from lab import agent_models, agent_pages
from lab import agent_runtime as agents
from lab import game as lab_game
from lab.game import TranslatedWait, is_played, stage_timeout
from lab.pages import TranslatedTimer
from lab.session_settings import max_rounds_per_game, params

doc = __doc__
GAME = "WoC"


class C(BaseConstants):
    NAME_IN_URL = "game_without_chat"
    PLAYERS_PER_GROUP = None  # pairs in H-H, one human (and an agent seat) otherwise
    NUM_ROUNDS = max_rounds_per_game()
    PAYOFFS = protocol.PAYOFFS
    CHOICES = protocol.CHOICES


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


class Player(BasePlayer):
    associate_code = models.StringField()
    associate_kind = models.StringField()  # human | agent
    agent_seat = models.IntegerField()
    choice = models.StringField(choices=list(protocol.CHOICES))
    choice_timed_out = models.BooleanField(initial=False)
    decided_at = models.FloatField()
    associate_choice = models.StringField()
    associate_payoff = models.IntegerField()


AgentSeat, AgentTurn, LlmCall = agent_models.define(__name__, Subsession, Player)
TABLES = agents.GameTables(GAME, None, AgentSeat, AgentTurn, LlmCall)


# FUNCTIONS
def creating_session(subsession: Subsession):
    lab_game.set_round_matching(subsession, GAME)
    if subsession.round_number == 1 and params(subsession.session).with_agents:
        agents.create_seats(subsession, TABLES)


def start_agent_turns(subsession: Subsession):
    if params(subsession.session).with_agents:
        agents.start_round(subsession, TABLES)


def finish_agent_round(player: Player):
    agents.finish_round(player, TABLES)


# PAGES
class GameIntro(TranslatedTimer, Page):
    template_name = "lab/GameIntro.html"

    @staticmethod
    def is_displayed(player: Player):
        return player.round_number == 1

    @staticmethod
    def vars_for_template(player: Player):
        return lab_game.intro_vars(player, GAME)


class RoundStart(TranslatedWait, WaitPage):
    """Every round starts together, so agents and humans are re-matched in step."""

    wait_for_all_groups = True
    body_key = "common_waiting_all"
    after_all_players_arrive = start_agent_turns

    @staticmethod
    def is_displayed(player: Player):
        return is_played(player)


class Decision(TranslatedTimer, Page):
    form_model = "player"
    form_fields = ["choice"]
    template_name = "lab/Decision.html"

    @staticmethod
    def is_displayed(player: Player):
        return is_played(player)

    @staticmethod
    def get_timeout_seconds(player: Player):
        return stage_timeout(player, "decision")

    @staticmethod
    def vars_for_template(player: Player):
        variables = lab_game.round_vars(player, GAME)
        variables["choices"] = C.CHOICES
        variables["show_new_associate"] = True
        return variables

    @staticmethod
    def before_next_page(player: Player, timeout_happened):
        lab_game.record_choice(player, player.field_maybe_none("choice"), timeout_happened, GAME)


class WaitDecision(TranslatedWait, WaitPage):
    after_all_players_arrive = lab_game.settle_pair

    @staticmethod
    def is_displayed(player: Player):
        return is_played(player) and player.associate_kind == "human"


class Result(TranslatedTimer, Page):
    template_name = "lab/Result.html"

    @staticmethod
    def is_displayed(player: Player):
        return is_played(player)

    @staticmethod
    def get_timeout_seconds(player: Player):
        return stage_timeout(player, "result")

    @staticmethod
    def vars_for_template(player: Player):
        return lab_game.result_vars(player, GAME)

    @staticmethod
    def app_after_this_page(player: Player, upcoming_apps):
        return lab_game.next_app_after_last_round(player, upcoming_apps)


AgentWaitDecision = agent_pages.wait_page(TABLES, "decision", then=finish_agent_round, name="AgentWaitDecision")

page_sequence = [GameIntro, RoundStart, Decision, WaitDecision, AgentWaitDecision, Result]


def vars_for_admin_report(subsession: Subsession):
    return agent_pages.admin_report(subsession, TABLES)
