from otree.api import Bot, Submission, expect

from lab.agent_runtime import bots
from lab.base.session_game import session_game
from . import TABLES, Decision, GameIntro, Result


class PlayerBot(Bot):
    def play_round(self):
        if self.player.round_number == 1:
            bots.check_game_intro(self.player, self.html)
            yield GameIntro
        if not bots.plays_round(self.player):
            return
        bots.check_choices(self.player, self.html)
        if bots.times_out_decision(self.player):
            yield Submission(Decision, timeout_happened=True)
            expect(self.player.choice_timed_out, True)
        else:
            yield Decision, {"choice": bots.scripted_choice(self.player)}
        if self.player.associate_kind == "agent":
            bots.check_agent_turn(self.player, TABLES, "decision")
        bots.check_result(self.player, self.html)
        yield Result
        expect(self.player.associate_choice, "in", session_game(self.session).choices)
