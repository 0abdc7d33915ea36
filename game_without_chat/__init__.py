"""The prisoner's dilemma without communication (WoC): decision and result only, a new
associate every round, the same limits and payoffs as the game with chat."""

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, models

import protocol
from lab.agent_runtime import agent_models
from lab.experimenter import agents_report
from lab import app_start
from lab.agent_runtime import wait_pages
from lab.online import dropouts
from lab import agent_runtime as agents
from lab.shared_pages import game as lab_game
from lab.base.session_settings import max_rounds_per_game, params

doc = __doc__
GAME = "WoC"


class C(BaseConstants):
    NAME_IN_URL = "game_without_chat"
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


AgentSeat, AgentTurn, LlmCall = agent_models.define(__name__, Subsession, Player)
TABLES = agents.GameTables(GAME, Player, None, AgentSeat, AgentTurn, LlmCall)
app_start.register_app(__name__, Player, tables=TABLES)


# FUNCTIONS
def creating_session(subsession: Subsession):
    lab_game.set_round_matching(subsession, GAME)
    if subsession.round_number == 1 and params(subsession.session).with_agents:
        agents.create_seats(subsession, TABLES)


def start_agent_turns(subsession: Subsession, players=None):
    if params(subsession.session).with_agents or dropouts.is_online(subsession.session):  # stand-ins
        agents.start_round(subsession, TABLES, players=players)


def finish_agent_round(player: Player):
    agents.finish_round(player, TABLES)


# PAGES
_shared = lab_game.shared_pages(__name__, GAME, start_round=start_agent_turns)
GameIntro, RoundStart, Decision, Result = _shared.GameIntro, _shared.RoundStart, _shared.Decision, _shared.Result


# One wait for either kind of associate (label-uninformed sessions stay blind); see lab/agent_runtime/wait_pages.py.
WaitDecision = wait_pages.wait_page(TABLES, "decision", then=finish_agent_round, name="WaitDecision",
                                     after_humans=lab_game.settle_pair)

page_sequence = [GameIntro, RoundStart, Decision, WaitDecision, Result]


def vars_for_admin_report(subsession: Subsession):
    return agents_report.admin_report(subsession, TABLES)
