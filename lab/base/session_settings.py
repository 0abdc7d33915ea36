"""A session's parameters: the defaults of ``protocol`` overridden by the session config.

settings.py builds the session configs from ``config_defaults()``, so every parameter shows
up (and can be edited) on oTree's "create session" page; the apps read them back through
``params(session)``. ``validate`` turns a bad value into one clear message at session
creation instead of an error in the middle of a session.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

import protocol
from lab.base import matching
from lab.base.i18n import LANGUAGES
from lab.base.session_game import DEFAULT_EXPERIMENT
from lab.base.text import CONTROL_CHARACTERS

GAME_APPS = {"WC": "game_with_chat", "WoC": "game_without_chat"}
STAGE_CONFIG_KEYS = {stage: f"{stage}_seconds" for stage in protocol.STAGE_LIMITS}
# What a session config's name fixes: its experiment (the file and its text's hash, as the server
# started with them) and its treatment. Not on the create page; a creation may repeat, not change them.
TREATMENT_KEYS = ("experiment", "experiment_sha256", "associate_type", "label_setting", "game_order")
# The money a session pays or spends, and the least each may be: a show-up fee and a norm bonus
# of 0 are designs (Prolific pays its own base); points worth nothing are no incentive.
MONEY_KEYS = {"participation_fee": (0, "0 or more"), "real_world_currency_per_point": (None, "more than 0"),
              "norm_bonus": (0, "0 or more"), "session_budget": (0, "0 (no limit) or more")}


class SessionConfigError(ValueError):
    """A session config value that cannot run; the message says which and why."""


def session_experiment(config: dict):
    """The experiment a session config was built from (experiments/NAME.toml), as the server read it
    at start: SessionConfigError when the file is gone, broken or edited since (its sessions' values
    came from the file as it was then)."""
    import experiment_design

    name = config.get("experiment") or DEFAULT_EXPERIMENT
    path = experiment_design.EXPERIMENTS_DIR / f"{name}.toml"
    if not path.exists() and experiment_design.test_experiments_enabled(os.environ):  # a test run's own files
        path = experiment_design.TEST_EXPERIMENTS_DIR / f"{name}.toml"
    try:
        experiment = experiment_design.load(path)
    except (OSError, experiment_design.ExperimentError) as exc:
        raise SessionConfigError(f"Session config 'experiment' is {name!r}, and experiments/{name}.toml cannot "
                                 f"run now: {exc}. Fix the file and restart the server.") from None
    started_with = config.get("experiment_sha256")
    if started_with and started_with != experiment.text_sha256:
        raise SessionConfigError(f"experiments/{name}.toml was edited after this server started, and its sessions' "
                                 "settings are the file's as it was then: restart the server to run the file as it "
                                 "is now (python -m labserver check-experiment checks it first).")
    return experiment


def max_rounds_per_game() -> int:
    """The game apps' NUM_ROUNDS (oTree fixes it at import): the paper's 10, or what the server's
    LAB_MAX_ROUNDS_PER_GAME says. A session playing fewer rounds makes oTree step through every
    unplayed round's pages when the game ends (~1.5 s in one request), so a server that only runs
    short pilots can set it to their length."""
    return int(os.environ.get("LAB_MAX_ROUNDS_PER_GAME", protocol.MAX_ROUNDS_PER_GAME))


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    return config_defaults()


def config_defaults() -> dict:
    """The paper's values, as flat session-config keys (oTree's admin can edit flat values)."""
    from lab.base.i18n import lab_language

    defaults = {
        # The server's language (OTREE_LANGUAGE_CODE), so oTree's own pages and ours agree.
        "language": lab_language(os.environ.get("OTREE_LANGUAGE_CODE")),
        # A server limited to fewer rounds offers its limit, so creation works unedited.
        "rounds_per_game": min(protocol.ROUNDS_PER_GAME, max_rounds_per_game()),
        "message_max_chars": protocol.MESSAGE_MAX_CHARS,
        # oTree's own names, so its payments page uses the paper's fee and exchange rate.
        "participation_fee": protocol.SHOW_UP_FEE,
        "real_world_currency_per_point": protocol.CURRENCY_PER_POINT,
        "norm_bonus": protocol.NORM_BONUS,
    }
    defaults.update({key: protocol.STAGE_LIMITS[stage] for stage, key in STAGE_CONFIG_KEYS.items()})
    # Agents (H-C, H-F, H-S): the model as flat llm_* keys ("" = default: the offline
    # simulated model unless an API key is in the environment) and a money budget in USD.
    from agents.config import session_config_defaults

    defaults.update(session_config_defaults())
    defaults["session_budget"] = 20.0
    # online: entry, lobby, completion (docs/online.md; lab/base/online_settings.py reads them)
    defaults.update(
        online=False,
        prolific_completion_codes="",  # completed=CODE,screened_out=CODE,... (or JSON), one per outcome
        online_url_params="",  # more study-link parameters to keep, comma-separated names
        online_quiz_attempts=3,  # quiz submissions before a participant is screened out
        online_instructions_seconds=300,  # Welcome, Rules, Quiz (the lab: no limit)
        online_intro_seconds=60,  # GameIntro
        online_questionnaire_seconds=180,  # each questionnaire page
        online_payment_seconds=60,  # the payment page, then the exit page
        prolific_bonus_rate=1.0,  # Prolific's currency per unit of the session's currency, bonus file
        online_lobby_seconds=300,  # H-H: the longest wait in the lobby, then the exit with the show-up fee
        online_cohort_size=0,  # H-H: participants per cohort (0: rounds + 1, made even)
    )
    # online: dropouts
    defaults.update(online_dropout_defaults())
    return defaults


# Defaults of the online dropout handling (lab/online/dropouts.py; docs/online.md "Dropouts").
# 3 consecutive timed-out form pages: a whole round of the game with chat (message 1, message 2,
# decision) without a single input; one or two can be a look away, three is someone gone.
# 90 s with no page of theirs open: a reload, a browser restart or a network handover takes
# seconds; 90 s is the outage the lab rides out, and shorter than the stage limits' sum of a round.
DROPOUT_DEFAULTS = {
    "online": False,
    "dropout_after_timeouts": 3,
    "dropout_closed_tab_seconds": 90,
    "stand_in": "agent",  # agent | none
    "stand_in_persona": "fair",  # a persona of the session's experiment, or imitate (online_settings.py)
}


def online_dropout_defaults() -> dict:
    """The dropout keys (the contract's "online" key included: False, the lab stays the default)."""
    return dict(DROPOUT_DEFAULTS)


@dataclass(frozen=True)
class SessionParams:
    associate_type: str
    label_setting: str
    game_order: str
    language: str
    rounds_per_game: int
    stage_limits: dict
    message_max_chars: int
    participation_fee: float
    currency_per_point: float
    norm_bonus: float
    # From the session's experiment (``experiment_words``): the treatment code (H-<persona's code>),
    # whether its label setting is informed, the words naming the associates, the currency; the
    # paper's meaning of the names where the experiment is unknown (an export after the file broke).
    treatment_code: str = ""
    labels_informed: bool | None = None
    associate_words: str = ""
    currency_code: str = ""  # the experiment's payment.currency

    @property
    def currency(self) -> str:
        return self.currency_code or protocol.CURRENCY_CODE

    @property
    def treatment(self) -> str:
        return self.treatment_code or protocol.TREATMENT_CODES.get(self.associate_type, "")

    @property
    def with_agents(self) -> bool:
        return self.associate_type != "human"

    @property
    def informed(self) -> bool:
        return self.label_setting == "informed" if self.labels_informed is None else self.labels_informed

    @property
    def games(self) -> tuple[str, ...]:
        """The games the session plays, in its order: its game order's name joins their ids with "-"
        (experiment_design's ``Experiment.game_orders``: "WC-WoC", or "WC" for a design of one game)."""
        return tuple(self.game_order.split("-"))

    def game_index(self, game: str) -> int:
        return self.games.index(game) + 1


def experiment_words(merged: dict, experiment=None) -> dict:
    """SessionParams' fields that the experiment gives (``experiment``, else the config's file as the
    server reads it; none when it cannot be read or lacks the session's treatment)."""
    if experiment is None:
        try:
            experiment = session_experiment(merged)
        except SessionConfigError:
            return {}
    associate_type, setting = merged.get("associate_type"), experiment.design.labels.get(merged.get("label_setting"))
    if setting is None or associate_type != "human" and associate_type not in experiment.design.personas:
        return dict(currency_code=experiment.design.payment.currency)
    words = setting.human if associate_type == "human" else setting.agent
    return dict(treatment_code=experiment.treatment_code(associate_type), labels_informed=setting.informed,
                associate_words=words.get(merged.get("language"), ""), currency_code=experiment.design.payment.currency)


def params_from_config(config: dict, experiment=None) -> SessionParams:
    """``experiment``: the session's as frozen (None: its config's file, as ``session_experiment``)."""
    merged = {**_defaults(), **config}
    return SessionParams(
        associate_type=merged["associate_type"],
        label_setting=merged["label_setting"],
        game_order=merged["game_order"],
        language=merged["language"],
        rounds_per_game=int(merged["rounds_per_game"]),
        stage_limits={stage: float(merged[key]) for stage, key in STAGE_CONFIG_KEYS.items()},
        message_max_chars=int(merged["message_max_chars"]),
        participation_fee=float(merged["participation_fee"]),
        currency_per_point=float(merged["real_world_currency_per_point"]),
        norm_bonus=float(merged["norm_bonus"]),
        **experiment_words(merged, experiment),
    )


_PARAMS_BY_SESSION: dict[str, SessionParams] = {}


def params(session) -> SessionParams:
    """A session's parameters (its config does not change once the session exists)."""
    found = _PARAMS_BY_SESSION.get(session.code)
    if found is None:
        from lab.base.session_game import frozen_experiment, frozen_record

        # its experiment as frozen; before the freeze (during creation) its config's file
        experiment = frozen_experiment(session) if frozen_record(session) is not None else None
        found = _PARAMS_BY_SESSION[session.code] = params_from_config(session.config, experiment)
    return found


_PARAMS_BY_SESSION_ID: dict[int, SessionParams] = {}


def params_of(model) -> SessionParams:
    """``params(model.session)`` for a player, group or subsession, by its session's id: pages
    ask on every request, and loading the session row (its config and vars) is most of what that
    costs. ``forget_session_id`` runs when a session is created, in case a database reuses ids."""
    found = _PARAMS_BY_SESSION_ID.get(model.session_id)
    if found is None:
        found = _PARAMS_BY_SESSION_ID[model.session_id] = params(model.session)
    return found


_CODE_BY_SESSION_ID: dict[int, str] = {}


def session_code_of(model) -> str:
    """``model.session.code`` for a player, group or subsession, without loading the session row
    on requests that need nothing else of it (as ``params_of``)."""
    found = _CODE_BY_SESSION_ID.get(model.session_id)
    if found is None:
        found = _CODE_BY_SESSION_ID[model.session_id] = model.session.code
    return found


def forget_session_id(session_id: int) -> None:
    _PARAMS_BY_SESSION_ID.pop(session_id, None)
    _CODE_BY_SESSION_ID.pop(session_id, None)


def validate(config: dict, num_participants: int, record: dict | None = None) -> SessionParams:
    """Raise SessionConfigError naming the first unusable value; return the parameters.
    ``record`` (the session's vars) receives the model check's outcome under ``model_check``,
    which the dashboard shows."""
    merged = {**config_defaults(), **config}
    check_values(merged)  # first: a control character (NUL) in the experiment's name too
    experiment = session_experiment(merged)
    associate_types = ("human", *experiment.design.personas)  # the experiment's own personas
    languages = [language for language in experiment.design.languages if language in LANGUAGES]
    checks = [
        ("associate_type", merged.get("associate_type") in associate_types,
         f"one of {', '.join(associate_types)} (human or a persona of experiments/{experiment.name}.toml)"),
        ("label_setting", merged.get("label_setting") in experiment.design.labels,
         f"one of {', '.join(experiment.design.labels)} (experiments/{experiment.name}.toml's labels)"),
        ("game_order", merged.get("game_order") in experiment.game_orders,
         f"one of {', '.join(experiment.game_orders)} (experiments/{experiment.name}.toml's game orders)"),
        ("language", merged.get("language") in languages, " or ".join(languages)),
    ]
    for key, ok, expected in checks:
        if not ok:
            raise SessionConfigError(f"Session config '{key}' is {merged.get(key)!r}; it must be {expected}.")
    try:
        p = params_from_config(merged, experiment)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SessionConfigError(f"Session config has a value that is not a number: {exc}") from None
    if not 1 <= p.rounds_per_game <= max_rounds_per_game():
        raise SessionConfigError(
            f"Session config 'rounds_per_game' is {p.rounds_per_game}; this server runs between 1 and "
            f"{max_rounds_per_game()} rounds per game (protocol.MAX_ROUNDS_PER_GAME, or the "
            f"environment variable LAB_MAX_ROUNDS_PER_GAME)."
        )
    if p.message_max_chars < 1:
        raise SessionConfigError("Session config 'message_max_chars' must be at least 1.")
    from experiment_design.texts import session_bonus_problem
    from lab.base.i18n import LOCALE_DIR

    if (problem := session_bonus_problem(experiment.design, p.norm_bonus, p.language, LOCALE_DIR)):
        raise SessionConfigError(f"Session config 'norm_bonus' is {p.norm_bonus:g}, for experiments/"
                                 f"{experiment.name}.toml: {problem}.")
    from lab.base.online_settings import config_is_online, dropout_problem, problem as online_problem

    if config_is_online(merged) and experiment.matching != matching.PERFECT_STRANGERS:
        raise SessionConfigError(f"experiments/{experiment.name}.toml's matching is {experiment.matching}: online "
                                 "sessions run perfect strangers only. Run it in the lab (online false).")
    online_refusal = online_problem(merged, num_participants)
    if online_refusal:
        raise SessionConfigError(online_refusal)
    if merged.get("online") and (refusal := dropout_problem(merged, experiment)):
        raise SessionConfigError(refusal)
    if p.associate_type == "human" and not config_is_online(merged):  # online: cohorts (lab/online/lobby.py)
        try:
            if experiment.matching == matching.PERFECT_STRANGERS:
                matching.check_perfect_stranger_possible(num_participants, p.rounds_per_game)
            elif (problem := experiment.session_size_problem("human", num_participants)) is not None:
                raise matching.MatchingError(f"A human-human session of experiments/{experiment.name}.toml: "
                                             f"{problem}.")
        except matching.MatchingError as exc:
            raise SessionConfigError(str(exc)) from None
    from lab.base.session_model import ModelRefused, check_session_model

    try:
        check_session_model(config, merged, p, num_participants, experiment, record)
    except ModelRefused as exc:
        raise SessionConfigError(str(exc)) from None
    return p


def check_values(config: dict) -> None:
    """Raise SessionConfigError for a value no session can run with, before anything is created:
    text with a control character (NUL: PostgreSQL cannot store it), a number parameter that is not
    a finite number (JSON and ``float()`` take NaN and infinity, and every comparison with NaN is
    false, so no limit would ever refuse it), a stage limit that is not positive, money below its
    least (MONEY_KEYS)."""
    defaults = _defaults()
    for key, value in config.items():
        if isinstance(value, str) and CONTROL_CHARACTERS.search(value):
            raise SessionConfigError(f"Session config '{key}' is {value!r}: it contains a control character "
                                     "(such as NUL), which no setting can hold.")
        if not (_is_number(value) or isinstance(value, str) and _is_number(defaults.get(key))):
            continue  # not a number parameter
        try:
            number = float(value)
        except ValueError:
            raise SessionConfigError(f"Session config '{key}' is {value!r}; it must be a number.") from None
        if not math.isfinite(number):
            raise SessionConfigError(f"Session config '{key}' is {value!r}; it must be a finite number.")
    for key in STAGE_CONFIG_KEYS.values():
        if key in config and not float(config[key]) > 0:
            raise SessionConfigError(f"Session config '{key}' is {_shown(config[key])}; it must be a positive "
                                     "number of seconds.")
    for key, (least, expected) in MONEY_KEYS.items():
        if config.get(key) in (None, ""):
            continue
        amount = float(config[key])
        if amount < least if least is not None else amount <= 0:
            raise SessionConfigError(f"Session config '{key}' is {_shown(config[key])}; it must be {expected}.")


def _shown(value) -> str:
    """A value as a message quotes it: a currency (a Decimal) as the number it is."""
    return repr(float(value)) if _is_number(value) and not isinstance(value, int) else repr(value)


def _is_number(value) -> bool:
    """int, float or Decimal (oTree's currencies), not bool."""
    from decimal import Decimal

    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def check_overrides(config_name: str, config: dict, overrides) -> dict:
    """The session-config fields a creation changes (oTree's ``modified_session_config_fields``),
    checked before anything is created: values as the create page sends them (a number, text or
    true/false), each one runnable (``check_values``), the treatment as the config's name says
    (TREATMENT_KEYS: the same value is dropped, another refused). Returns the fields to apply."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise SessionConfigError("modified_session_config_fields must be a JSON object of setting: value.")
    fields = {}
    for key, value in overrides.items():
        if not isinstance(key, str) or not (isinstance(value, (bool, str)) or _is_number(value)):
            raise SessionConfigError(f"Session config {key!r} is {value!r}; a setting is a number, text or "
                                     "true/false.")
        if key in TREATMENT_KEYS:
            if value != config.get(key):
                raise SessionConfigError(
                    f"Session config '{key}' is fixed by the config's name: {config_name} runs "
                    f"{key} {config.get(key)!r}, not {value!r}. Create a session of the config of that "
                    "experiment and treatment.")
            continue
        fields[key] = value
    check_values({**config, **fields})
    return fields
