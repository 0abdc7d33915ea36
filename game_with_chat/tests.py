import html

from otree.api import Bot, Submission, expect

from lab.agent_runtime import bots
from lab.shared_pages.game import chat_exchanges, game_total
from lab.base.session_game import session_game
from . import (TABLES, Decision, GameIntro, Message, Message1, Message2, Read1, Read2, Result, own_message,
               received_message)


def check_decision_page(player, page_html: str) -> None:
    """The decision page shows the payoff table and this round's messages, both ways, as escaped
    text (what each side sent in time; a missing one says so)."""
    for own_points, other_points in session_game(player.session).payoffs.values():
        expect(f"{own_points}, {other_points}", "in", page_html)
    expect('id="round-messages"', "in", page_html)
    for stage in (1, 2):
        for row in (own_message(player, stage), received_message(player, stage)):
            if row is not None and row.sent_in_time:
                expect(html.escape(row.text), "in", page_html)
    expect("<script>alert(1)</script>", "not in", page_html)


class PlayerBot(Bot):
    def play_round(self):
        if self.player.round_number == 1:
            bots.check_game_intro(self.player, self.html)
            yield GameIntro
        if not bots.plays_round(self.player):
            return
        # One message exchange (the session's experiment): no Message2 or Read2 (oTree's bots fail a
        # submission of a page not displayed).
        stages = ((1, Message1, Read1), (2, Message2, Read2))[:chat_exchanges(self.player)]
        for stage, page, read_page in stages:
            text = bots.scripted_message(self.player, stage)
            if bots.times_out_message(self.player, stage):
                yield Submission(page, {f"message_{stage}": "half-typed"}, timeout_happened=True)
                [row] = Message.filter(player=self.player, stage=stage, sender_kind="human")
                expect(row.sent_in_time, False)
                expect(row.unsent_draft, "half-typed")
                expect(row.text, "")
            else:
                yield page, {f"message_{stage}": text}
            if self.player.associate_kind == "agent":  # past the wait for the associate (a WaitPage)
                bots.check_agent_turn(self.player, TABLES, f"message_{stage}")
            received = received_message(self.player, stage)
            if received and received.sent_in_time:
                # Whatever the associate typed is shown as text, never as markup.
                expect(html.escape(received.text), "in", self.html)
                expect("<script>alert(1)</script>", "not in", self.html)
            yield read_page
        check_decision_page(self.player, self.html)
        bots.check_choices(self.player, self.html)
        if bots.times_out_decision(self.player):
            yield Submission(Decision, timeout_happened=True)
            expect(self.player.choice_timed_out, True)
            expect(self.player.choice, "in", session_game(self.session).choices)
        else:
            yield Decision, {"choice": bots.scripted_choice(self.player)}
            expect(self.player.choice_timed_out, False)
        if self.player.associate_kind == "agent":
            bots.check_agent_turn(self.player, TABLES, "decision")
        bots.check_result(self.player, self.html)
        yield Result
        expect(self.player.associate_choice, "in", session_game(self.session).choices)
        expect(self.player.payoff, "in", session_game(self.session).own_points_options)
        expect(game_total(self.player), sum(p.payoff for p in self.player.in_all_rounds()))
