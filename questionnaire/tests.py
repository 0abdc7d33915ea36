from otree.api import Bot, expect

import protocol
from lab.session_settings import params
from . import (BelievedHuman, CommunicationQuality, Demographics, Familiarity, NormEstimates,
               Perception, SocialValueOrientation, PERCEPTION_FIELDS, SEVEN_C_FIELDS, SVO_FIELDS)


class PlayerBot(Bot):
    def play_round(self):
        n = self.participant.id_in_session
        # self.html is the page the bot is on: the first questionnaire before its answers.
        first_title = "Questionnaire 1" if params(self.session).language == "en" else "问卷 1"
        expect(first_title, "in", self.html)
        yield NormEstimates, {"norm_estimate_WC": n % 5, "norm_estimate_WoC": (n + 2) % 5}
        yield Perception, {field: (n + i) % 7 - 3 for i, field in enumerate(PERCEPTION_FIELDS)}
        yield CommunicationQuality, {field: (n * i) % 7 - 3 for i, field in enumerate(SEVEN_C_FIELDS)}
        if not params(self.session).informed:
            yield BelievedHuman, {"believed_human": -1}
        yield Familiarity, {"llm_familiarity": 1 + n % 5}
        # A prosocial pattern: all sliders at the far right of items 2-6 share equally.
        positions = [4, 8, 8, 4, 4, 8] if n % 2 else [0, 0, 0, 0, 0, 0]
        yield SocialValueOrientation, dict(zip(SVO_FIELDS, positions))
        allocations = [protocol.svo_allocation(i, pos) for i, pos in enumerate(positions)]
        angle = protocol.svo_angle([a[0] for a in allocations], [a[1] for a in allocations])
        expect(round(angle, 2), self.player.svo_angle)
        expect(self.player.svo_category, protocol.svo_category(angle))
        yield Demographics, {"age": 20 + n % 5, "gender": "female" if n % 2 else "male", "major": "经济学"}
