from otree.api import Bot, expect

import protocol
from lab.base.session_settings import params
from . import (BelievedHuman, CommunicationQuality, Demographics, Familiarity, NormEstimates,
               Perception, SocialValueOrientation, PERCEPTION_FIELDS, SEVEN_C_FIELDS, SVO_FIELDS, listed,
               norm_intervals)


class PlayerBot(Bot):
    def play_round(self):
        n = self.participant.id_in_session
        # self.html is the page the bot is on: the first questionnaire before its answers.
        first_title = "Questionnaire 1" if params(self.session).language == "en" else "问卷 1"
        expect(first_title, "in", self.html)
        if listed(self.player, "norm_estimates"):
            intervals = norm_intervals(self.player)
            check_norm_page(self.html, intervals, params(self.session).norm_bonus, params(self.session).language)
            yield NormEstimates, {"norm_estimate_WC": n % len(intervals), "norm_estimate_WoC": (n + 2) % len(intervals)}
        if listed(self.player, "perception"):
            yield Perception, {field: (n + i) % 7 - 3 for i, field in enumerate(PERCEPTION_FIELDS)}
        if listed(self.player, "communication_quality"):
            yield CommunicationQuality, {field: (n * i) % 7 - 3 for i, field in enumerate(SEVEN_C_FIELDS)}
        if listed(self.player, "believed_human") and not params(self.session).informed:
            yield BelievedHuman, {"believed_human": -1}
        if listed(self.player, "familiarity"):
            yield Familiarity, {"llm_familiarity": 1 + n % 5}
        if listed(self.player, "social_value_orientation"):
            check_svo_layout(self.html, params(self.session).language)
            # A prosocial pattern: all sliders at the far right of items 2-6 share equally.
            positions = [4, 8, 8, 4, 4, 8] if n % 2 else [0, 0, 0, 0, 0, 0]
            yield SocialValueOrientation, dict(zip(SVO_FIELDS, positions))
            allocations = [protocol.svo_allocation(i, pos) for i, pos in enumerate(positions)]
            angle = protocol.svo_angle([a[0] for a in allocations], [a[1] for a in allocations])
            expect(round(angle, 2), self.player.svo_angle)
            expect(self.player.svo_category, protocol.svo_category(angle))
        if listed(self.player, "demographics"):
            yield Demographics, {"age": 20 + n % 5, "gender": "female" if n % 2 else "male", "major": "经济学"}


def check_norm_page(page_html: str, intervals, norm_bonus: float, language: str) -> None:
    """The norm estimate page offers the session's intervals, and announces a bonus only when it pays one
    (the bonus sentence of the paper's text, here or in any text the page carries)."""
    for lo, hi in intervals:
        expect(f"{lo}–{hi}", "in", page_html)
    expect(page_html.count('type="radio"'), 2 * len(intervals))
    expect(("落在真实区间内" if language == "zh_hans" else "you receive a bonus") in page_html, bool(norm_bonus))


def check_svo_layout(page_html: str, language: str) -> None:
    """As the SVO intro says: each item shows what you receive above its slider and what the
    other receives below it (Chinese labels end in a full-width colon)."""
    you, other = ("您得到：", "对方得到：") if language == "zh_hans" else ("You receive:", "Other receives:")
    expect("上方" if language == "zh_hans" else "above the slider", "in", page_html)
    # The first item: its "you" label, then its slider, then its "other" label.
    expect(page_html.index(you) < page_html.index('type="range"') < page_html.index(other), True)
