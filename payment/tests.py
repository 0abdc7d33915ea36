from otree.api import Bot, expect

import protocol
from lab.agent_runtime import bots
from lab.base import i18n
from lab.base.session_game import pays_norm_bonus, session_game
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
        table = self.html.split('id="payment-table"')[1].split("</table>")[0]
        for key in ("payment_bonus", "payment_norm_estimate"):  # an estimate's and the bonus's lines: when paid
            expect(i18n.text(p.language, key, game_index=1) in table, pays_norm_bonus(self.session, p.norm_bonus))
        if not session_game(self.session).norm_intervals:  # no norm estimate asked: none checked
            expect(any(player.field_maybe_none(f"norm_true_{game}") is not None for game in protocol.GAMES), False)
        bots.keep_page(player, "Payment", self.html)
