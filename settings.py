"""oTree settings: the session configs of experiments/paper.toml, the paper's 16 (8 treatments x 2
game orders), each carrying the experiment's values (rounds, stage limits, message length, fee,
money per point, bonus, language), which oTree's "create session" page lets the experimenter change
per session. Secrets come from the environment only.
"""

import sys
from os import environ

import experiment_design
from lab.base import i18n, offered_experiments, production
from lab.base.session_settings import config_defaults, max_rounds_per_game

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
# own texts included, follows its session's: lab/base/i18n.py, lab/server/otree_language.py) and the language
# of pages that belong to no session (a room before its session). Simplified Chinese unless
# OTREE_LANGUAGE_CODE names another language of locale/ (en, de: docs/experiment-file.md, A language is files).
try:
    LANGUAGE_CODE = i18n.otree_language_code(environ.get("OTREE_LANGUAGE_CODE"))
except ValueError as exc:
    sys.exit(str(exc))


# Every experiment file of experiments/ is checked at start: a server with a problem in any of them
# does not start, and says every problem (python -m labserver check-experiment FILE checks one).
EXPERIMENTS = {experiment.name: experiment for experiment in experiment_design.check_all_or_exit()}
if experiment_design.test_experiments_enabled(environ):  # the tests' own files (never in production)
    EXPERIMENTS.update({experiment.name: experiment for experiment in
                        experiment_design.check_all_or_exit(experiment_design.TEST_EXPERIMENTS_DIR)})
# The create page offers the experiments the pages can run (lab/base/offered_experiments.py: the
# paper's design, its payoffs and session values aside); the others are checked above, and the
# log says what keeps each from running.
OFFERED_EXPERIMENTS = offered_experiments.offered(EXPERIMENTS)
SESSION_CONFIGS = [
    config
    for name in OFFERED_EXPERIMENTS
    for config in experiment_design.session_configs(
        EXPERIMENTS[name], server_language=config_defaults()["language"], max_rounds_per_game=max_rounds_per_game())
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
        # a label already taken by another browser is refused (lab/server/rooms.py).
        welcome_page="lab/RoomWelcome.html",
    ),
]

REAL_WORLD_CURRENCY_CODE = EXPERIMENTS["paper"].design.payment.currency
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
