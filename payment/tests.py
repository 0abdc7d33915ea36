from otree.api import Bot, expect

import protocol
from lab.agent_runtime import bots
from lab.base.session_settings import params


class PlayerBot(Bot):
    def play_round(self):
        player = self.player
        p = params(self.session)
        points = sum(getattr(player, f"points_{game}") for game in p.games)
        correct = sum(bool(player.field_maybe_none(f"norm_correct_{game}")) for game in p.games)
        expect(player.payout, protocol.payout(points, correct, show_up_fee=p.participation_fee,
                                              currency_per_point=p.currency_per_point,
                                              norm_bonus=p.norm_bonus))
        # oTree's payments page shows the same amount, to the cent.
        expect(round(float(self.participant.payoff_plus_participation_fee()), 2), round(player.payout, 2))
        expect(f"{player.payout:.2f}", "in", self.html)
        bots.keep_page(player, "Payment", self.html)
