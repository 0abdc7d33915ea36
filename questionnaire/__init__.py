"""Questionnaires 1-7 (docs/protocol.md): norm estimates, perception of the associates, the 7C
communication quality, "my associates were humans" (label-uninformed sessions only),
familiarity with LLMs, the SVO slider measure (angle and category computed) and demographics.
A session shows those its experiment lists (experiments/*.toml [questionnaires] pages), in the
file's order, numbered as shown.
"""

import functools

from otree.api import BaseConstants, BaseGroup, BasePlayer, BaseSubsession, Page, models, widgets

import protocol
from lab import app_start
from lab.shared_pages.pages import TranslatedTimer, texts_for
from lab.base.session_game import experiment_of, frozen_experiment, session_game
from lab.base.session_settings import params, session_code_of
from lab.base.text import clean_text

doc = __doc__


class C(BaseConstants):
    NAME_IN_URL = "questionnaire"
    PLAYERS_PER_GROUP = None
    NUM_ROUNDS = 1
    GAMES = protocol.GAMES
    LIKERT = list(range(protocol.LIKERT_MIN, protocol.LIKERT_MAX + 1))
    SVO_ITEMS = len(protocol.SVO_ITEMS)


class Subsession(BaseSubsession):
    pass


class Group(BaseGroup):
    pass


def _likert():
    return models.IntegerField(min=protocol.LIKERT_MIN, max=protocol.LIKERT_MAX)


class Player(BasePlayer):
    # Fields named after protocol's item lists, so exports and analysis share one list.
    for _game in protocol.GAMES:
        locals()[f"norm_estimate_{_game}"] = models.IntegerField(min=0, max=len(protocol.NORM_INTERVALS) - 1)
    for _item in protocol.PERCEPTION_ITEMS:
        locals()[f"perception_{_item}"] = _likert()
    for _item in protocol.SEVEN_C_ITEMS:
        locals()[f"c7_{_item}"] = _likert()
    for _number in range(1, len(protocol.SVO_ITEMS) + 1):
        locals()[f"svo_item_{_number}"] = models.IntegerField(min=0, max=protocol.SVO_STEPS - 1)
    del _game, _item, _number
    believed_human = _likert()
    llm_familiarity = models.IntegerField(choices=list(protocol.LLM_FAMILIARITY_LEVELS))
    svo_angle = models.FloatField()
    svo_category = models.StringField()
    age = models.IntegerField(min=14, max=99)
    gender = models.StringField(choices=list(protocol.GENDERS), widget=widgets.RadioSelectHorizontal)
    major = models.StringField(max_length=100)


NORM_FIELDS = [f"norm_estimate_{game}" for game in protocol.GAMES]


def norm_intervals(player) -> tuple:
    """The session's norm estimate intervals (its experiment's, as frozen at creation)."""
    return session_game(player.session).norm_intervals


# oTree accepts an estimate's index only within the session's intervals: {field}_max.
def norm_estimate_WC_max(player):
    return len(norm_intervals(player)) - 1


norm_estimate_WoC_max = norm_estimate_WC_max
PERCEPTION_FIELDS = [f"perception_{item}" for item in protocol.PERCEPTION_ITEMS]
SEVEN_C_FIELDS = [f"c7_{item}" for item in protocol.SEVEN_C_ITEMS]
SVO_FIELDS = [f"svo_item_{number}" for number in range(1, len(protocol.SVO_ITEMS) + 1)]


# FUNCTIONS
def score_svo(player: Player):
    allocations = [protocol.svo_allocation(i, getattr(player, field)) for i, field in enumerate(SVO_FIELDS)]
    player.svo_angle = round(protocol.svo_angle([a[0] for a in allocations], [a[1] for a in allocations]), 2)
    player.svo_category = protocol.svo_category(player.svo_angle)


def questionnaire_number(player: Player, page_class) -> int:
    """Questionnaires are numbered as shown: Q4 exists only in label-uninformed sessions."""
    shown = [page for page in session_page_sequence(session_code_of(player)) if page.is_displayed(player)]
    return shown.index(page_class) + 1


def likert_questions(t: dict, fields: list) -> list:
    return [dict(name=field, text=t[f"questionnaire_{field}"]) for field in fields]


def base_vars(player: Player, page_class) -> dict:
    t = texts_for(player)
    return dict(t=t, title=t["questionnaire_title"].format(number=questionnaire_number(player, page_class)),
                likert=C.LIKERT)


def listed(player: Player, page: str) -> bool:
    """The session's experiment lists the questionnaire page (its id in experiments/*.toml)."""
    return page in frozen_experiment(player.session).design.questionnaires.pages


def norm_games(player: Player) -> list[str]:
    """The games the norm estimates ask about: those the session plays, in the paper's order."""
    played = params(player.session).games
    return [game for game in protocol.GAMES if game in played]


def shown_when_listed(page: str):
    """A page's ``is_displayed``: shown when the session's experiment lists it."""
    return staticmethod(lambda player: listed(player, page))


# PAGES
class QuestionnairePage(TranslatedTimer, Page):
    form_model = "player"
    lab_online_questionnaire = True  # online: the questionnaire pages' limit (lab/base/online_settings.py)


class NormEstimates(QuestionnairePage):
    is_displayed = shown_when_listed("norm_estimates")

    @staticmethod
    def get_form_fields(player: Player):
        return [f"norm_estimate_{game}" for game in norm_games(player)]

    @staticmethod
    def vars_for_template(player: Player):
        variables = base_vars(player, NormEstimates)
        t = variables["t"]
        variables["questions"] = [
            dict(name=f"norm_estimate_{game}", text=t[f"questionnaire_norm_game_{game}"],
                 options=[(i, t["questionnaire_interval"].format(lo=lo, hi=hi))
                          for i, (lo, hi) in enumerate(norm_intervals(player))])
            for game in norm_games(player)
        ]
        return variables


class Perception(QuestionnairePage):
    is_displayed = shown_when_listed("perception")
    form_fields = PERCEPTION_FIELDS
    template_name = "questionnaire/Likert.html"

    @staticmethod
    def vars_for_template(player: Player):
        variables = base_vars(player, Perception)
        variables["intro"] = variables["t"]["questionnaire_perception_intro"]
        variables["questions"] = likert_questions(variables["t"], PERCEPTION_FIELDS)
        return variables


class CommunicationQuality(QuestionnairePage):
    is_displayed = shown_when_listed("communication_quality")
    form_fields = SEVEN_C_FIELDS
    template_name = "questionnaire/Likert.html"

    @staticmethod
    def vars_for_template(player: Player):
        variables = base_vars(player, CommunicationQuality)
        variables["intro"] = variables["t"]["questionnaire_c7_intro"]
        variables["questions"] = likert_questions(variables["t"], SEVEN_C_FIELDS)
        return variables


class BelievedHuman(QuestionnairePage):
    form_fields = ["believed_human"]
    template_name = "questionnaire/Likert.html"

    @staticmethod
    def is_displayed(player: Player):
        return listed(player, "believed_human") and not params(player.session).informed

    @staticmethod
    def vars_for_template(player: Player):
        variables = base_vars(player, BelievedHuman)
        variables["intro"] = ""
        variables["questions"] = [dict(name="believed_human", text=variables["t"]["questionnaire_believed_human"])]
        return variables


class Familiarity(QuestionnairePage):
    is_displayed = shown_when_listed("familiarity")
    form_fields = ["llm_familiarity"]

    @staticmethod
    def vars_for_template(player: Player):
        variables = base_vars(player, Familiarity)
        t = variables["t"]
        variables["options"] = [(level, t[f"questionnaire_familiarity_{level}"])
                                for level in protocol.LLM_FAMILIARITY_LEVELS]
        return variables


class SocialValueOrientation(QuestionnairePage):
    is_displayed = shown_when_listed("social_value_orientation")
    form_fields = SVO_FIELDS

    @staticmethod
    def vars_for_template(player: Player):
        variables = base_vars(player, SocialValueOrientation)
        t = variables["t"]
        variables["items"] = [dict(name=field, label=t["questionnaire_svo_item"].format(number=i + 1),
                                   start=(protocol.SVO_STEPS - 1) // 2)
                              for i, field in enumerate(SVO_FIELDS)]
        return variables

    @staticmethod
    def js_vars(player: Player):
        return dict(allocations=[[protocol.svo_allocation(i, step) for step in range(protocol.SVO_STEPS)]
                                 for i in range(len(protocol.SVO_ITEMS))])

    @staticmethod
    def before_next_page(player: Player, timeout_happened):
        score_svo(player)


def gender_choices(player: Player) -> list:
    """The gender options labelled in the session's language (oTree renders the form's radios)."""
    t = texts_for(player)
    return [(gender, t[f"questionnaire_gender_{gender}"]) for gender in protocol.GENDERS]


class Demographics(QuestionnairePage):
    is_displayed = shown_when_listed("demographics")
    form_fields = ["age", "gender", "major"]

    @staticmethod
    def vars_for_template(player: Player):
        return base_vars(player, Demographics)

    @staticmethod
    def before_next_page(player: Player, timeout_happened):
        player.major = clean_text(player.field_maybe_none("major"))  # the one free-text answer


# The paper's order. A session shows its own: session_page_sequence.
page_sequence = [NormEstimates, Perception, CommunicationQuality, BelievedHuman, Familiarity,
                 SocialValueOrientation, Demographics]
# Each page by the name experiment files list it with.
PAGES = {"norm_estimates": NormEstimates, "perception": Perception, "communication_quality": CommunicationQuality,
         "believed_human": BelievedHuman, "familiarity": Familiarity,
         "social_value_orientation": SocialValueOrientation, "demographics": Demographics}


def session_page_sequence(session_code: str) -> tuple:
    """The pages in the order the session shows them: those its experiment lists, in the file's
    order, then the others (never shown, so every session has the app's number of pages). oTree's
    page list of the session holds them in this order (lab/otree_patches/page_order.py): each page
    keeps its own name and address."""
    return pages_in_order(experiment_of(session_code).design.questionnaires.pages)


@functools.lru_cache(maxsize=None)
def pages_in_order(listed: tuple) -> tuple:
    """``page_sequence``'s pages with those named in ``listed`` first, in that order."""
    first = [PAGES[page] for page in listed]
    return tuple(first + [page for page in page_sequence if page not in first])


app_start.register_app(__name__, Player, page_order=session_page_sequence)
