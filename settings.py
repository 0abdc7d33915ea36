"""oTree settings: the 16 session configs of the paper (8 treatments x 2 game orders).

Every parameter of the protocol (rounds, stage limits, payoffs' money value, fee, bonus,
language) comes from ``protocol`` through ``lab.session_settings.config_defaults()`` and can be
changed per session on oTree's "create session" page. Secrets come from the environment only.
"""

import sys
from os import environ

import protocol
from lab import i18n, production
from lab.session_settings import GAME_APPS, config_defaults

if not environ.get("DATABASE_URL", "").strip():
    # An empty DATABASE_URL (e.g. `export DATABASE_URL=` to go back to SQLite) would reach
    # SQLAlchemy as an invalid URL: it means the default, SQLite in ./db.sqlite3.
    environ.pop("DATABASE_URL", None)

if production.is_production(environ):
    # oTree itself would happily serve an open admin in production; a lab must not.
    _missing = production.missing_settings(environ)
    if _missing:
        sys.exit(
            "Refusing to start in production mode (OTREE_PRODUCTION is set) without "
            + ", ".join(_missing)
            + " in the environment. See docs/running-a-lab.md."
        )

# The lab's language: the default of each session's `language` (every participant page, oTree's
# own texts included, follows its session's: lab/i18n.py, lab/otree_language.py) and the language
# of pages that belong to no session (a room before its session). Simplified Chinese unless
# OTREE_LANGUAGE_CODE=en.
try:
    LANGUAGE_CODE = i18n.otree_language_code(environ.get("OTREE_LANGUAGE_CODE"))
except ValueError as exc:
    sys.exit(str(exc))


def _session_config(associate_type: str, label_setting: str, game_order: str) -> dict:
    code = protocol.TREATMENT_CODES[associate_type]
    first, second = protocol.GAME_ORDERS[game_order]
    humans = associate_type == "human"
    return dict(
        name=f"{code.replace('-', '').lower()}_{label_setting}_{first.lower()}_first",
        display_name=f"{code} · label-{label_setting} · {first}→{second}",
        app_sequence=["instructions", GAME_APPS[first], GAME_APPS[second], "questionnaire", "payment"],
        # H-H needs an even number of at least rounds+1 people (perfect strangers).
        num_demo_participants=12 if humans else 2,
        associate_type=associate_type,
        label_setting=label_setting,
        game_order=game_order,
        doc=f"Treatment {code}, associates are {associate_type}; label-{label_setting}; "
        f"game order {game_order}. Stage limits in seconds; money in {protocol.CURRENCY_CODE}.",
    )


SESSION_CONFIGS = [
    _session_config(associate_type, label_setting, game_order)
    for associate_type in protocol.ASSOCIATE_TYPES
    for label_setting in protocol.LABEL_SETTINGS
    for game_order in protocol.GAME_ORDERS
]

SESSION_CONFIG_DEFAULTS = dict(config_defaults(), doc="")

PARTICIPANT_FIELDS = []
SESSION_FIELDS = []

ROOMS = [
    dict(
        name="lab",
        display_name="Lab (cubicle PCs)",
        participant_label_file="_rooms/lab_cubicles.txt",
        # Goes straight on when the address carries the cubicle's label (docs/running-a-lab.md, Rooms), and
        # a label already taken by another browser is refused (lab/rooms.py).
        welcome_page="lab/RoomWelcome.html",
    ),
]

REAL_WORLD_CURRENCY_CODE = protocol.CURRENCY_CODE
REAL_WORLD_CURRENCY_DECIMAL_PLACES = 2
USE_POINTS = True
# The norm bonus is paid in money; as points it is fractional (10 CNY = 166.67 points).
POINTS_DECIMAL_PLACES = 2

ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = environ.get("OTREE_ADMIN_PASSWORD")

DEMO_PAGE_INTRO_HTML = """
Prisoner's dilemma with pre-play chat against humans or LLM agents
(cooperative / fair / selfish persona). H-H sessions need an even number of participants,
at least rounds per game + 1.
"""

SECRET_KEY = environ.get("OTREE_SECRET_KEY", "development-only-not-secret")

INSTALLED_APPS = ["otree"]
