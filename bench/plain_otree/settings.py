"""The baseline of bench/lab_load.py: plain oTree 6, the prisoner's dilemma with the same
pages as the lab's games (message, read, message, read, decision, result; WaitPages between),
none of the lab's code. Never installed as a project app; the bench serves this folder."""

SESSION_CONFIGS = [
    dict(name="plain_pd", app_sequence=["plain_game_with_chat", "plain_game_without_chat"], num_demo_participants=2,
         rounds_per_game=2, message_1_seconds=60, read_1_seconds=30, message_2_seconds=60, read_2_seconds=30,
         decision_seconds=30, result_seconds=20),
]
SESSION_CONFIG_DEFAULTS = dict(real_world_currency_per_point=0.06, participation_fee=15.0, doc="")
PARTICIPANT_FIELDS = []
SESSION_FIELDS = []
LANGUAGE_CODE = "en"
REAL_WORLD_CURRENCY_CODE = "CNY"
USE_POINTS = True
ADMIN_USERNAME = "admin"
SECRET_KEY = "bench-only"
INSTALLED_APPS = ["otree"]
