"""Instructions pages 1-2 and the rules quiz, retaken until passed.

Session creation is validated here (the first app of every session), so a config that cannot
run (odd number of people in H-H, too many rounds, an unknown language) is refused at once
with a message saying why; and the session's manifest is frozen here (lab/record/manifest.py), once.
"""

import html
import json
import time

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, ExtraModel, Page, models, widgets

from lab import app_start
from lab.record import manifest
from lab.base import session_settings
from lab.online import exit as online_exit
from lab.online import lobby as online_lobby
from lab.base.online_settings import has_lobby, is_online
from lab.shared_pages.pages import TranslatedTimer, texts_for
from lab.base.payoff_table import payoff_table_vars
from lab.base.session_game import choice_labels, frozen_experiment, session_game

doc = __doc__


class C(BaseConstants):
    NAME_IN_URL = "instructions"
    PLAYERS_PER_GROUP = None
    NUM_ROUNDS = 1
    # The quiz asks one's own points for each pair of choices of the session's game (their ids are
    # A and B: the fields' names; the questions name them by their labels), then about re-matching.
    QUIZ_CASES = (("A", "A"), ("A", "B"), ("B", "A"), ("B", "B"))


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


def _points_field():
    return models.IntegerField(widget=widgets.RadioSelect)  # the options: quiz_points_options


class Player(BasePlayer):
    quiz_AA = _points_field()
    quiz_AB = _points_field()
    quiz_BA = _points_field()
    quiz_BB = _points_field()
    quiz_same_associate = models.BooleanField(widget=widgets.RadioSelect)
    quiz_attempts = models.IntegerField(initial=0)
    quiz_passed_at = models.FloatField()


class QuizAttempt(ExtraModel):
    """Every quiz submission, right or wrong, with its answers."""

    player = models.Link(Player)
    attempt = models.IntegerField()
    answers = models.LongStringField()  # JSON
    passed = models.BooleanField()
    submitted_at = models.FloatField()


class SessionManifest(ExtraModel):
    """The session's manifest as frozen at its creation (lab/record/manifest.py): inserted once, never
    updated; exports show it."""

    subsession = models.Link(Subsession)
    session_code = models.StringField()
    record = models.LongStringField()  # JSON


app_start.register_app(__name__, Player, session_manifest=SessionManifest)


QUIZ_FIELDS = ["quiz_AA", "quiz_AB", "quiz_BA", "quiz_BB", "quiz_same_associate"]


# FUNCTIONS
def creating_session(subsession: Subsession):
    # validate writes what the model check resolved (llm_constrained_output) into the config: a
    # copy, assigned back, so the database stores it (oTree does not track changes inside the dict,
    # and the dict changed in place would compare equal to the one assigned)
    config = dict(subsession.session.config)
    session_settings.validate(config, len(subsession.get_players()), record=subsession.session.vars)
    subsession.session.config = config
    manifest.freeze(subsession)  # after validation: a refused session records nothing


def quiz_points_options(session) -> tuple:
    return session_game(session).own_points_options


# oTree offers (and accepts) only these values in the quiz's points fields: {field}_choices.
def quiz_AA_choices(player):
    return list(quiz_points_options(player.session))


quiz_AB_choices = quiz_BA_choices = quiz_BB_choices = quiz_AA_choices


def quiz_answer_key(session) -> dict:
    game = session_game(session)
    key = {f"quiz_{own}{other}": game.points(own, other)[0] for own, other in C.QUIZ_CASES}
    # Yes with a fixed partner (every round of a game) or random pairs; no for perfect strangers.
    key["quiz_same_associate"] = frozen_experiment(session).can_meet_same_associate_again
    return key


def wrong_quiz_fields(session, answers: dict) -> list:
    key = quiz_answer_key(session)
    return [name for name in QUIZ_FIELDS if answers.get(name) != key[name]]


def last_quiz_answers(player: Player) -> dict | None:
    """The answers of the player's latest quiz attempt (None before the first)."""
    attempts = sorted(QuizAttempt.filter(player=player), key=lambda a: a.attempt)
    return json.loads(attempts[-1].answers) if attempts else None


def record_quiz_attempt(player: Player, answers: dict, passed: bool):
    player.quiz_attempts += 1
    QuizAttempt.create(
        player=player,
        attempt=player.quiz_attempts,
        answers=json.dumps(answers),
        passed=passed,
        submitted_at=time.time(),
    )


def rules_vars(player: Player) -> dict:
    t = texts_for(player)
    labels = choice_labels(player.session, session_settings.params_of(player).language)
    return dict(t=t, **payoff_table_vars(t, session_game(player.session), labels))


# PAGES
class Welcome(TranslatedTimer, Page):
    @staticmethod
    def vars_for_template(player: Player):
        t = texts_for(player)
        # How to behave: in the lab's room, or online wherever the participant is.
        conduct = "intro_welcome_conduct_online" if is_online(player.session) else "intro_welcome_conduct"
        return dict(t=t, conduct=t[conduct])


class Rules(TranslatedTimer, Page):
    @staticmethod
    def vars_for_template(player: Player):
        return rules_vars(player)


class Quiz(TranslatedTimer, Page):
    form_model = "player"
    form_fields = QUIZ_FIELDS

    @staticmethod
    def vars_for_template(player: Player):
        variables = rules_vars(player)
        t = variables["t"]
        # After a failed attempt: its right answers stay selected, its wrong ones are marked
        # and cleared (read from the attempt's record, so a reload shows the same).
        previous = last_quiz_answers(player)
        wrong = set(wrong_quiz_fields(player.session, previous)) if previous else set()
        # the choices as the session's language labels them, escaped: the question around them is HTML
        labels = choice_labels(player.session, session_settings.params_of(player).language)
        shown = {choice: html.escape(label) for choice, label in labels.items()}
        questions = [
            dict(name=f"quiz_{own}{other}",
                 text=t["intro_quiz_points_question"].format(own=shown[own], other=shown[other]),
                 options=[(str(value), value) for value in quiz_points_options(player.session)])
            for own, other in C.QUIZ_CASES
        ] + [dict(name="quiz_same_associate", text=t["intro_quiz_same_associate"],
                  options=[("True", t["intro_quiz_yes"]), ("False", t["intro_quiz_no"])])]
        for question in questions:
            name = question["name"]
            question["wrong"] = name in wrong
            kept = previous.get(name) if previous and name not in wrong else None
            question["kept"] = "" if kept is None else str(kept)
        variables["questions"] = questions
        variables["failed_before"] = player.quiz_attempts > 0
        return variables

    @staticmethod
    def error_message(player: Player, values):
        wrong = wrong_quiz_fields(player.session, values)
        record_quiz_attempt(player, values, passed=not wrong)
        if wrong:
            if screened_out(player):
                return None  # online: no more attempts; the exit page shows the screen-out code
            return texts_for(player)["intro_quiz_wrong"]

    @staticmethod
    def before_next_page(player: Player, timeout_happened):
        if timeout_happened and is_online(player.session):
            # Online, the quiz has a limit: not passed by then is not passed (docs/online.md).
            online_exit.set_outcome(player.participant, "screened_out", payout=0.0)
        if not online_exit.leaves_early(player.participant):
            player.quiz_passed_at = time.time()


def screened_out(player: Player) -> bool:
    """Online: the quiz failed ``online_quiz_attempts`` times screens the participant out (the lab
    retakes it until passed)."""
    session = player.session
    if not is_online(session) or player.quiz_attempts < int(session.config["online_quiz_attempts"]):
        return False
    online_exit.set_outcome(player.participant, "screened_out", payout=0.0)
    return True


class Lobby(TranslatedTimer, Page):
    """Online H-H: wait until a cohort forms (lab/online/lobby.py); at the limit, to the exit."""

    template_name = "lab/Lobby.html"

    @staticmethod
    def is_displayed(player: Player):
        return has_lobby(player.session)

    @staticmethod
    def get_timeout_seconds(player: Player):
        return float(player.session.config["online_lobby_seconds"])

    @staticmethod
    def vars_for_template(player: Player):
        return dict(t=texts_for(player), poll_ms=online_lobby.POLL_SECONDS * 1000)

    @staticmethod
    def live_method(player: Player, data):
        return {player.id_in_group: online_lobby.poll(player)}

    @staticmethod
    def error_message(player: Player, values):
        if not player.participant.vars.get("online_cohort"):
            return texts_for(player)["online_lobby_waiting"]

    @staticmethod
    def before_next_page(player: Player, timeout_happened):
        online_lobby.leave(player, timeout_happened)


page_sequence = [Welcome, Rules, Quiz, Lobby]


def custom_export(players):
    """One row per quiz submission."""
    yield ["session_code", "participant_code", "attempt", "passed", "answers", "submitted_at"]
    for player in players:
        for attempt in QuizAttempt.filter(player=player):
            yield [player.session.code, player.participant.code, attempt.attempt, attempt.passed,
                   attempt.answers, attempt.submitted_at]
