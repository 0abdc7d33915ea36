from otree.api import Bot, Submission, expect

from lab import bots
from lab.bots import call_live_method  # noqa: F401  (oTree's bots call it on live pages)
from . import AgentWaitDecision, Decision, GameIntro, Result


class PlayerBot(Bot):
    def play_round(self):
        if self.player.round_number == 1:
            yield GameIntro
        if not bots.plays_round(self.player):
            return
        if bots.times_out_decision(self.player):
            yield Submission(Decision, timeout_happened=True)
            expect(self.player.choice_timed_out, True)
        else:
            yield Decision, {"choice": bots.scripted_choice(self.player)}
        if self.player.associate_kind == "agent":
            yield AgentWaitDecision
            bots.check_agent_turn(self.player, "decision")
        yield Result
        expect(self.player.associate_choice, "in", ["A", "B"])
