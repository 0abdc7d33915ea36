"""An online session's settings: is it online, its completion codes, its page limits, its study
link's parameters (docs/online.md). The keys and their defaults are in
``lab.base.session_settings.config_defaults`` (block "online: entry, lobby, completion")."""

from __future__ import annotations

import json
import re

# participant.vars["online_outcome"] (docs/notes contract): who sets it decides it.
OUTCOMES = ("completed", "screened_out", "lobby_timeout", "partner_dropped", "timed_out")
COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"
PROLIFIC_PARAMS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
# Prolific's ids are 24 hexadecimal characters; any letters and digits up to 64 are taken, so a
# test or pilot id works, but a placeholder Prolific did not fill ({{%PROLIFIC_PID%}}) is refused.
ID_PATTERN = re.compile(r"[A-Za-z0-9]{1,64}")
CODE_PATTERN = re.compile(r"[A-Za-z0-9]{1,32}")
# A name of the session's own URL parameters, and the longest value kept.
PARAM_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
PARAM_MAX_CHARS = 200

# Pages that have no limit in the lab get one online, per kind of page (seconds, config keys).
ONLINE_PAGE_LIMIT_KEYS = {
    "Welcome": "online_instructions_seconds",
    "Rules": "online_instructions_seconds",
    "Quiz": "online_instructions_seconds",
    "GameIntro": "online_intro_seconds",
    "Payment": "online_payment_seconds",
}
QUESTIONNAIRE_LIMIT_KEY = "online_questionnaire_seconds"
_WAITS_PER_GROUP: dict[str, bool] = {}  # session code -> waits_per_group, see page_waits_per_group


# The session-config keys above, described for the data dictionary (lab/record/data_dictionary.py):
# {key: (description, type, unit)}.
CONFIG_COLUMNS = {
    "online": ("online session (Prolific; docs/online.md); False: the lab", "boolean", None),
    "prolific_completion_codes": ("online: Prolific completion code per outcome, OUTCOME=CODE,... or JSON", "string", None),
    "online_url_params": ("online: more study-link parameters kept in the participant's record, comma-separated",
                          "string", None),
    "online_quiz_attempts": ("online: failed quiz attempts that screen a participant out", "integer", None),
    "online_instructions_seconds": ("online: limit of the welcome, rules and quiz pages", "number", "s"),
    "online_intro_seconds": ("online: limit of a game's intro page", "number", "s"),
    "online_questionnaire_seconds": ("online: limit of each questionnaire page", "number", "s"),
    "online_payment_seconds": ("online: limit of the payment page", "number", "s"),
    "prolific_bonus_rate": ("online: Prolific's currency per unit of the session's, in the bonus file", "number", None),
    "online_lobby_seconds": ("online H-H: the longest wait in the lobby", "number", "s"),
    "online_cohort_size": ("online H-H: participants per cohort (0: rounds + 1, made even)", "integer", None),
}


def is_online(session) -> bool:
    return bool(session.config.get("online"))


def config_is_online(config: dict) -> bool:
    value = config.get("online")
    if isinstance(value, str):  # an override typed as text (labserver bots --set online=true)
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def completion_codes(config: dict) -> dict:
    """``prolific_completion_codes`` as {outcome: code}: JSON (``{"completed": "C1X2", ...}``) or
    ``completed=C1X2,screened_out=S9,...``. ValueError says what is wrong."""
    raw = config.get("prolific_completion_codes") or ""
    if isinstance(raw, dict):
        pairs = raw
    elif str(raw).strip().startswith("{"):
        try:
            pairs = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"prolific_completion_codes is not valid JSON: {exc}") from None
    else:
        pairs = {}
        for item in filter(None, (part.strip() for part in str(raw).split(","))):
            outcome, sep, code = item.partition("=")
            if not sep:
                raise ValueError(f"prolific_completion_codes: '{item}' is not OUTCOME=CODE")
            pairs[outcome.strip()] = code.strip()
    unknown = sorted(set(pairs) - set(OUTCOMES))
    if unknown:
        raise ValueError(f"prolific_completion_codes names unknown outcomes {unknown}; the outcomes are "
                         f"{', '.join(OUTCOMES)}")
    missing = [outcome for outcome in OUTCOMES if not pairs.get(outcome)]
    if missing:
        raise ValueError(f"prolific_completion_codes has no code for {', '.join(missing)}: give one per outcome, "
                         "as on Prolific's study page, e.g. completed=C1A2B3C4,screened_out=S5D6,lobby_timeout=L7E8,"
                         "partner_dropped=P9F0,timed_out=T1G2")
    bad = [f"{outcome}={code!r}" for outcome, code in pairs.items() if not CODE_PATTERN.fullmatch(str(code))]
    if bad:
        raise ValueError(f"prolific_completion_codes: {', '.join(bad)}: a code is 1-32 letters and digits")
    return {outcome: str(pairs[outcome]) for outcome in OUTCOMES}


def url_param_names(config: dict) -> list:
    """The session's own URL parameters to keep (``online_url_params``: names, comma-separated)."""
    raw = config.get("online_url_params") or ""
    names = [name.strip() for name in str(raw).split(",") if name.strip()]
    bad = [name for name in names if not PARAM_NAME_PATTERN.fullmatch(name) or name in PROLIFIC_PARAMS]
    if bad:
        raise ValueError(f"online_url_params: {bad} are not usable names (letters, digits, _; not one of "
                         f"{', '.join(PROLIFIC_PARAMS)}, which are always kept)")
    return names


LIMIT_KEYS = ("online_instructions_seconds", "online_intro_seconds", QUESTIONNAIRE_LIMIT_KEY,
              "online_payment_seconds", "online_quiz_attempts", "online_lobby_seconds")


def problem(config: dict, num_participants: int) -> str | None:
    """Why an online session config cannot run (None: it can). Lab sessions: always None."""
    if not config_is_online(config):
        return None
    try:
        completion_codes(config)
        url_param_names(config)
        for key in LIMIT_KEYS:
            if float(config.get(key)) <= 0:
                return f"Session config '{key}' must be positive, not {config.get(key)}."
    except (TypeError, ValueError) as exc:
        return f"Online session: {exc}"
    if config.get("associate_type") == "human":
        from lab.base import matching

        try:
            size = cohort_size(config)
            matching.check_perfect_stranger_possible(size, int(config["rounds_per_game"]))
        except (TypeError, ValueError) as exc:
            return f"Online H-H session: online_cohort_size: {exc}"
        if num_participants < size:
            return (f"An online H-H session forms cohorts of {size} in its lobby: it needs at least {size} "
                    f"participants (places on Prolific), not {num_participants}.")
    return None


def cohort_size(config: dict) -> int:
    """Participants per cohort of an online H-H session's lobby (``online_cohort_size``; 0: the
    smallest the perfect-stranger matching allows, rounds + 1 made even)."""
    size = int(config.get("online_cohort_size") or 0)
    if size:
        return size
    rounds = int(config["rounds_per_game"])
    return rounds + 1 + (rounds + 1) % 2


def page_limit(config: dict, page_name: str, is_questionnaire: bool) -> float | None:
    """The online limit of a page that has none in the lab (None in the lab, or for other pages)."""
    if not config_is_online(config):
        return None
    key = QUESTIONNAIRE_LIMIT_KEY if is_questionnaire else ONLINE_PAGE_LIMIT_KEYS.get(page_name)
    return float(config[key]) if key and config.get(key) is not None else None


def has_lobby(session) -> bool:
    return is_online(session) and session.config.get("associate_type") == "human"


def waits_per_group(session) -> bool:
    """Online, the everyone-waits are per group, not per session: H-H, the pair at a round's start
    and the cohort at the payment; agent sessions, the participant alone (each has agents of their
    own, lab.base.matching.private_agent_schedule), so nobody waits for anybody there."""
    return is_online(session)


def page_waits_per_group(page) -> bool:
    """``waits_per_group`` for a wait page, noted once per session code (a session's ``online``
    never changes): oTree asks a page's ``wait_for_all_groups`` about nine times a request, and
    each ``page.session`` after a commit mid-request was a query again (18 % of an online round
    start's time in a profile)."""
    code = page.participant._session_code
    found = _WAITS_PER_GROUP.get(code)
    if found is None:
        found = _WAITS_PER_GROUP[code] = waits_per_group(page.session)
    return found


STAND_IN_RULES = ("agent", "none")
STAND_IN_IMITATE = "imitate"


def stand_in_personas(experiment) -> tuple[str, ...]:
    """What ``stand_in_persona`` may name: a persona of the session's experiment, or imitate (none
    without personas: no agent can stand in)."""
    return (*experiment.design.personas, STAND_IN_IMITATE) if experiment.design.personas else ()


def imitating_persona(experiment) -> str:
    """The persona an imitating stand-in plays: fair (the paper's), else the experiment's first."""
    return "fair" if "fair" in experiment.design.personas else next(iter(experiment.design.personas))


def dropout_problem(config: dict, experiment) -> str | None:
    """Why an online session's dropout keys cannot run (docs/online.md "Dropouts"), or None."""
    if config.get("stand_in") not in STAND_IN_RULES:
        return f"Session config 'stand_in' is {config.get('stand_in')!r}; it must be agent or none."
    if config.get("stand_in") == "agent" and config.get("stand_in_persona") not in stand_in_personas(experiment):
        return (f"Session config 'stand_in_persona' is {config.get('stand_in_persona')!r}; it must be one of "
                f"{', '.join(stand_in_personas(experiment)) or 'none: the experiment has no personas'} (the "
                f"personas of experiments/{experiment.name}.toml, or imitate).")
    for key in ("dropout_after_timeouts", "dropout_closed_tab_seconds"):
        try:
            ok = float(config.get(key)) >= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            return f"Session config '{key}' must be a number of at least 1, not {config.get(key)!r}."
    return None
