from otree.api import Bot, expect

import protocol
from lab.base import i18n
from lab.base.session_settings import params
from . import (BelievedHuman, CommunicationQuality, Demographics, Familiarity, NormEstimates,
               Perception, SocialValueOrientation, PERCEPTION_FIELDS, SEVEN_C_FIELDS, SVO_FIELDS, listed)


class PlayerBot(Bot):
    def play_round(self):
        n = self.participant.id_in_session
        # self.html is the page the bot is on: the first questionnaire before its answers.
        expect(i18n.text(params(self.session).language, "questionnaire_title", number=1), "in", self.html)
        if listed(self.player, "norm_estimates"):
            yield NormEstimates, {"norm_estimate_WC": n % 5, "norm_estimate_WoC": (n + 2) % 5}
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


# Where the SVO intro says the slider's labels are, in the languages the lab ships (another's: not checked).
SLIDER_ABOVE = {"zh_hans": "上方", "en": "above the slider", "de": "über dem Schieberegler"}


def check_svo_layout(page_html: str, language: str) -> None:
    """As the SVO intro says: each item shows what you receive above its slider and what the
    other receives below it."""
    you, other = (i18n.text(language, key) for key in ("questionnaire_svo_you_receive",
                                                         "questionnaire_svo_other_receives"))
    if language in SLIDER_ABOVE:
        expect(SLIDER_ABOVE[language], "in", page_html)
    # The first item: its "you" label, then its slider, then its "other" label.
    expect(page_html.index(you) < page_html.index('type="range"') < page_html.index(other), True)
