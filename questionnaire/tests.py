import html

from otree.api import Bot, expect

import protocol
from lab.base import i18n
from lab.agent_runtime.bots import keep_page
from lab.base.session_game import choice_labels, session_game
from lab.base.session_settings import params
from lab.shared_pages.pages import texts_for
from . import (BelievedHuman, CommunicationQuality, Demographics, Familiarity, NormEstimates,
               Perception, SocialValueOrientation, PERCEPTION_FIELDS, SEVEN_C_FIELDS, SVO_FIELDS, norm_games,
               norm_intervals, session_page_sequence)


class PlayerBot(Bot):
    def play_round(self):
        title = texts_for(self.player)["questionnaire_title"]
        shown = 0
        # In the session's order (oTree checks that each page submitted is the one it shows),
        # numbered as shown; self.html is the page the bot is on, before its answers.
        for page in session_page_sequence(self.session.code):
            if page.is_displayed(self.player):
                shown += 1
                expect(html.escape(title.format(number=shown)), "in", self.html)
                yield from self.answer(page)

    def answer(self, page):
        n = self.participant.id_in_session
        if page is NormEstimates:
            intervals = norm_intervals(self.player)
            check_norm_page(self.html, intervals, norm_games(self.player), params(self.session).norm_bonus,
                            params(self.session).language)
            check_norm_cooperative_choice(self.player, self.html)
            answers = {"norm_estimate_WC": n % len(intervals), "norm_estimate_WoC": (n + 2) % len(intervals)}
            yield NormEstimates, {f"norm_estimate_{game}": answers[f"norm_estimate_{game}"]
                                  for game in norm_games(self.player)}
        elif page is Perception:
            yield Perception, {field: (n + i) % 7 - 3 for i, field in enumerate(PERCEPTION_FIELDS)}
        elif page is CommunicationQuality:
            yield CommunicationQuality, {field: (n * i) % 7 - 3 for i, field in enumerate(SEVEN_C_FIELDS)}
        elif page is BelievedHuman:
            yield BelievedHuman, {"believed_human": -1}
        elif page is Familiarity:
            yield Familiarity, {"llm_familiarity": 1 + n % 5}
        elif page is SocialValueOrientation:
            check_svo_layout(self.html, params(self.session).language)
            # A prosocial pattern: all sliders at the far right of items 2-6 share equally.
            positions = [4, 8, 8, 4, 4, 8] if n % 2 else [0, 0, 0, 0, 0, 0]
            yield SocialValueOrientation, dict(zip(SVO_FIELDS, positions))
            allocations = [protocol.svo_allocation(i, pos) for i, pos in enumerate(positions)]
            angle = protocol.svo_angle([a[0] for a in allocations], [a[1] for a in allocations])
            expect(round(angle, 2), self.player.svo_angle)
            expect(self.player.svo_category, protocol.svo_category(angle))
        elif page is Demographics:
            yield Demographics, {"age": 20 + n % 5, "gender": "female" if n % 2 else "male", "major": "经济学"}
        else:
            raise AssertionError(f"the bot has no answers for {page.__name__}")


# Where the SVO intro says the slider's labels are, in the languages the lab ships (another's: not checked).
SLIDER_ABOVE = {"zh_hans": "上方", "en": "above the slider", "de": "über dem Schieberegler"}


# The norm page's bonus sentence in the languages the lab ships (another's: not checked).
BONUS_SENTENCE = {"zh_hans": "落在真实区间内", "en": "you receive a bonus", "de": "erhalten Sie einen Bonus"}


def check_norm_page(page_html: str, intervals, games, norm_bonus: float, language: str) -> None:
    """The norm estimate page offers the session's intervals for each game played, and announces a
    bonus only when it pays one (the bonus sentence of the paper's text, here or in any text the page
    carries)."""
    for lo, hi in intervals:
        expect(f"{lo}–{hi}", "in", page_html)
    expect(page_html.count('type="radio"'), len(games) * len(intervals))
    if language in BONUS_SENTENCE:
        expect(BONUS_SENTENCE[language] in page_html, bool(norm_bonus))


def check_norm_cooperative_choice(player, page_html: str) -> None:
    """The norm page asks for the share of the session's cooperative choice, by its label (the texts of
    the languages the lab ships bold it); tests read the page (LAB_BOT_PAGES)."""
    language = params(player.session).language
    if language in BONUS_SENTENCE:
        label = choice_labels(player.session, language)[session_game(player.session).cooperative_choice]
        expect(f"<b>{html.escape(label)}</b>", "in", page_html)
    keep_page(player, "NormEstimates", page_html)


def check_svo_layout(page_html: str, language: str) -> None:
    """As the SVO intro says: each item shows what you receive above its slider and what the
    other receives below it."""
    you, other = (i18n.text(language, key) for key in ("questionnaire_svo_you_receive",
                                                         "questionnaire_svo_other_receives"))
    if language in SLIDER_ABOVE:
        expect(SLIDER_ABOVE[language], "in", page_html)
    # The first item: its "you" label, then its slider, then its "other" label.
    expect(page_html.index(you) < page_html.index('type="range"') < page_html.index(other), True)
