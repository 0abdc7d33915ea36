"""The payment page: show-up fee + rate x points of the games played + a bonus per norm estimate in
the true interval (docs/protocol.md, Payment; an experiment may ask no norm estimates, on its own
intervals, or pay no bonus for them). It waits for everyone, because the true cooperation rate of
the *other* participants is known only when all have played.

oTree's own payments page shows the same total: game points are the players' payoffs, the
bonus is added here as points at the session's exchange rate.

This app also holds the exports in long format that the analysis reads (docs/DATA.md).
"""

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, ExtraModel, Page, WaitPage, cu, models

import protocol
from lab.shared_pages import game as lab_game
from lab.record import agent_exports, exports, manifest
from lab import app_start
from lab.base import i18n
from lab.experimenter import interventions
from lab.base.grouping import set_group_matrix
from lab.online import exit as online_exit
from lab.base.online_settings import is_online
from lab.base.online_settings import page_waits_per_group, waits_per_group
from lab.shared_pages.pages import TranslatedTimer, texts_for
from lab.base.session_game import pays_norm_bonus, session_game
from lab.base.session_settings import GAME_APPS, params
from lab.shared_pages.wait_for_all import MovesEveryoneOn

doc = __doc__


class C(BaseConstants):
    NAME_IN_URL = "payment"
    PLAYERS_PER_GROUP = None
    NUM_ROUNDS = 1


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


class Player(BasePlayer):
    for _game in protocol.GAMES:
        locals()[f"points_{_game}"] = models.IntegerField()
        locals()[f"decisions_{_game}"] = models.IntegerField()
        locals()[f"cooperations_{_game}"] = models.IntegerField()
        locals()[f"norm_true_{_game}"] = models.IntegerField()  # None: no other participants
        locals()[f"norm_correct_{_game}"] = models.BooleanField()
    del _game
    payout = models.FloatField()


class Intervention(ExtraModel):
    """One action of the experimenter on the dashboard (lab/experimenter/interventions.py, docs/DATA.md
    'interventions'). Session-wide actions have no participant."""

    session_code = models.StringField()
    at = models.FloatField()
    who = models.StringField()
    action = models.StringField()
    participant_code = models.StringField()
    detail = models.LongStringField()
    dismissed_at = models.FloatField()


class BonusPayout(ExtraModel):
    """One bonus file handed out for Prolific's bulk bonus (lab/online/bonus.py): kept so that the
    same payout is never made twice with different totals."""

    session_code = models.StringField()
    created_at = models.FloatField()
    who = models.StringField()
    kind = models.StringField()  # "full" or "difference"
    total = models.FloatField()
    lines = models.LongStringField()  # the file as handed out: PID,amount per line
    sha256 = models.StringField()


class PagePresence(ExtraModel):
    """Online sessions: when the server last knew a page of the participant open, kept for its
    next start (lab/online/presence.py): the close of their last page, or the latest look that
    found one open (``page_open``)."""

    session_code = models.StringField()
    participant_code = models.StringField()
    seen_at = models.FloatField()
    page_open = models.BooleanField()


app_start.register_app(__name__, Player, interventions=Intervention, bonus_payouts=BonusPayout,
                          page_presence=PagePresence)


# FUNCTIONS
def tally_games(player: Player):
    """Points, decisions and cooperative choices (the session's game's: A in the paper; none counted
    when it names none) of the rounds the participant played (not their seat's rounds after their
    drop, ``lab_game.after_drop``: they earn nothing, and count in no other participant's norm
    estimate check), in each game of the session (a game it does not play stays empty)."""
    cooperative = session_game(player.session).cooperative_choice
    for game in params(player.session).games:
        rounds = [pl for pl in lab_game.players_of(player.participant, GAME_APPS[game])
                  if pl.field_maybe_none("choice") and not lab_game.after_drop(pl)]
        setattr(player, f"points_{game}", int(sum(pl.payoff for pl in rounds)))
        setattr(player, f"decisions_{game}", len(rounds))
        if cooperative is not None:  # none: no choice is cooperation, nothing to count (the export's cell stays empty)
            setattr(player, f"cooperations_{game}", sum(pl.choice == cooperative for pl in rounds))


def norm_estimate(player: Player, game: str):
    from questionnaire import Player as QuestionnairePlayer

    answers = QuestionnairePlayer.objects_filter(participant=player.participant).first()
    return answers.field_maybe_none(f"norm_estimate_{game}") if answers else None


def creating_session(subsession: Subsession):
    if waits_per_group(subsession.session):
        # Online H-H: each cohort becomes one group when it forms (lab/base/online_settings.py).
        set_group_matrix(subsession, [[player] for player in subsession.get_players()])


def settle_payments(subsession: Subsession = None, group: Group = None):
    """After everyone finished (online H-H: everyone of the cohort): true norms, bonuses and
    payouts (docs/protocol.md, Payment)."""
    players = (subsession if subsession is not None else group).get_players()
    if subsession is None:
        subsession = group.subsession
    # Online, who left before the games (screened out, lobby timeout) keeps the payout set when
    # they left and is no one's "other participant".
    players = [player for player in players if not online_exit.left_before_games(player.participant)]
    for player in players:
        tally_games(player)
    p = params(subsession.session)
    intervals = session_game(subsession.session).norm_intervals  # empty: no norm estimate asked
    for player in players:
        correct = 0
        for game in p.games if intervals else ():
            others = [o for o in players if o.id != player.id]
            decisions = sum(getattr(o, f"decisions_{game}") for o in others)
            if not decisions:
                continue  # nobody else played: the estimate cannot be checked
            rate = 100.0 * sum(getattr(o, f"cooperations_{game}") for o in others) / decisions
            true_interval = protocol.norm_interval_index(rate, intervals)
            is_correct = norm_estimate(player, game) == true_interval
            setattr(player, f"norm_true_{game}", true_interval)
            setattr(player, f"norm_correct_{game}", is_correct)
            correct += is_correct
        points = sum(getattr(player, f"points_{game}") for game in p.games)
        player.payout = protocol.payout(points, correct, show_up_fee=p.participation_fee,
                                        currency_per_point=p.currency_per_point, norm_bonus=p.norm_bonus)
        # oTree's payments page: fee + all payoffs x rate; the bonus enters as points.
        lab_game.set_payoff(player, cu(correct * p.norm_bonus / p.currency_per_point))


# PAGES
class AllFinished(MovesEveryoneOn, WaitPage):
    after_all_players_arrive = settle_payments

    @property
    def wait_for_all_groups(self):
        return not page_waits_per_group(self)  # online H-H: the cohort (lab/base/online_settings.py)

    @property
    def title_text(self):
        return texts_for(self.player)["common_waiting_title"]

    @property
    def body_text(self):
        # The paper's text says the norm-estimate bonuses are what it waits for: not so without one.
        paid = pays_norm_bonus(self.session, params(self.session).norm_bonus)
        return texts_for(self.player)["payment_waiting" if paid else "common_waiting_all"]


class Payment(TranslatedTimer, Page):
    @staticmethod
    def vars_for_template(player: Player):
        p = params(player.session)
        t = texts_for(player)
        games = []
        for game in p.games:
            true_interval = player.field_maybe_none(f"norm_true_{game}")
            status = ("payment_norm_not_assessable" if true_interval is None
                      else "payment_norm_correct" if player.field_maybe_none(f"norm_correct_{game}")
                      else "payment_norm_incorrect")
            games.append(dict(
                points_label=t["payment_points_game"].format(game_index=p.game_index(game)),
                points=getattr(player, f"points_{game}"),
                estimate_label=t["payment_norm_estimate"].format(game_index=p.game_index(game)),
                estimate_status=t[status],
            ))
        points_total = sum(g["points"] for g in games)
        correct = sum(bool(player.field_maybe_none(f"norm_correct_{game}")) for game in p.games)
        return dict(
            t=t,
            games=games,
            fee=f"{p.participation_fee:.2f}",
            points_money=t["payment_points_money"].format(points=points_total, rate=f"{p.currency_per_point:g}"),
            points_money_value=f"{points_total * p.currency_per_point:.2f}",
            bonus_value=f"{correct * p.norm_bonus:.2f}",
            payout=f"{player.payout:.2f}",
            currency=i18n.currency_name(p.language, p.currency),
            online=is_online(player.session),
            norm_bonus=pays_norm_bonus(player.session, p.norm_bonus),  # else no estimate nor bonus is shown
        )


class OnlineExit(Page):
    """Online sessions' last page: the completion code of the participant's outcome, then
    Prolific's completion URL (lab/online/exit.py). Every participant who leaves early skips to
    here."""

    template_name = "lab/OnlineExit.html"

    @staticmethod
    def is_displayed(player: Player):
        return is_online(player.session)

    @staticmethod
    def vars_for_template(player: Player):
        t = texts_for(player)
        variables = online_exit.exit_vars(player.participant, player.session)
        return dict(t=t, reason=t[f"online_exit_{variables['outcome']}"], **variables)


page_sequence = [AllFinished, Payment, OnlineExit]


custom_export = exports.participants_rows
custom_export_decisions = exports.decisions_rows
custom_export_messages = exports.messages_rows
custom_export_llm_calls = agent_exports.llm_call_rows
custom_export_manifest = manifest.manifest_rows  # docs/DATA.md 'manifest'
custom_export_interventions = interventions.export_rows  # docs/DATA.md 'interventions'
