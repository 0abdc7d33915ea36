from otree.api import Bot, SubmissionMustFail, expect

from . import C, Quiz, QuizAttempt, Rules, Welcome, quiz_answer_key


class PlayerBot(Bot):
    def play_round(self):
        yield Welcome
        expect("70, 70", "in", self.html)  # the payoff table comes from protocol.PAYOFFS
        yield Rules
        correct = quiz_answer_key()
        wrong = dict(correct, quiz_AB=correct["quiz_BA"])
        # Everyone fails once: the rules appear again and the attempt is on the record.
        yield SubmissionMustFail(Quiz, wrong)
        expect(self.player.quiz_attempts, 1)
        yield Quiz, correct
        expect(self.player.quiz_attempts, 2)
        attempts = QuizAttempt.filter(player=self.player)
        expect([a.passed for a in attempts], [False, True])
        expect(C.NUM_ROUNDS, 1)
