import html
import re

from otree.api import Bot, SubmissionMustFail, expect

from lab.agent_runtime import bots
from lab.base.session_game import choice_labels, session_game
from lab.base.session_settings import params

from . import C, Quiz, QuizAttempt, Rules, Welcome, quiz_answer_key


# The welcome terms' bonus in the languages the lab ships (another's: not checked).
BONUS_ANNOUNCED = {"zh_hans": "您还可以在问卷中获得奖金", "en": "bonuses in a questionnaire", "de": "Boni erhalten"}


class PlayerBot(Bot):
    def play_round(self):
        bots.keep_page(self.player, "Welcome", self.html)
        # The terms announce a bonus in a questionnaire only when the session pays one.
        language = params(self.session).language
        if language in BONUS_ANNOUNCED:
            expect(BONUS_ANNOUNCED[language] in self.html, params(self.session).norm_bonus > 0)
        yield Welcome
        for own_points, other_points in session_game(self.session).payoffs.values():  # the session's game
            expect(f"{own_points}, {other_points}", "in", self.html)
        yield Rules
        check_quiz_names_the_labels(self.player, self.html)
        correct = quiz_answer_key(self.session)
        wrong = dict(correct, quiz_AB=correct["quiz_BA"])
        # Everyone fails once: the rules appear again and the attempt is on the record.
        yield SubmissionMustFail(Quiz, wrong)
        expect(self.player.quiz_attempts, 1)
        # The page back marks the wrong answer (cleared) and keeps the right ones selected.
        expect(self.html.count("lab-quiz-feedback"), 1)
        expect("lab-quiz-feedback", "in", question_html(self.html, "quiz_AB"))
        expect("checked", "not in", question_html(self.html, "quiz_AB"))
        for name in ("quiz_AA", "quiz_BA", "quiz_BB", "quiz_same_associate"):
            expect(f'value="{correct[name]}" required checked', "in", question_html(self.html, name))
        yield Quiz, correct
        expect(self.player.quiz_attempts, 2)
        attempts = QuizAttempt.filter(player=self.player)
        expect([a.passed for a in attempts], [False, True])
        expect(C.NUM_ROUNDS, 1)


def check_quiz_names_the_labels(player, page_html: str) -> None:
    """Each points question names the two choices by their labels (the session's language)."""
    labels = choice_labels(player.session, params(player.session).language)
    for own, other in C.QUIZ_CASES:
        question = question_html(page_html, f"quiz_{own}{other}")
        for choice in (own, other):
            expect(html.escape(labels[choice]), "in", question)


def question_html(page_html: str, name: str) -> str:
    """The quiz question's fieldset."""
    return re.search(rf'<fieldset[^>]*id="question-{name}".*?</fieldset>', page_html, re.S).group(0)
