"""A session's manifest: how it was run and by what software (docs/DATA.md 'manifest').

The record is frozen when the session is created: the first app's ``creating_session``
(``instructions``, first in every session config) calls ``freeze``, which writes
``creation_record(session)`` once into the table that app registers (``SessionManifest``,
lab/base/app_registry.py). An export shows that record and never recomputes it; what today's code
and environment would say instead is shown beside it (``differs_at_export``), so a prompt
edited or a package upgraded after the session cannot rewrite the session's history. Why a
table and not ``session.vars``: the session row (vars included) is read on every page request,
and vars are rewritten by other code (the model check); a row that is only ever inserted is
read only by exports.

Sessions created before the freeze existed have no record: their manifest is computed at export
and says so (``provenance``).

Secrets are redacted by value, wherever they appear: the values of the API key variables (the
known ones and the session's ``llm_api_key_env``) and oTree's secrets, never a config key by name.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

import protocol
from lab.base import app_registry
from lab.base.session_game import frozen_record, protocol_values

MANIFEST_COLUMNS = ["session_code", "key", "value", "value_at_export"]
# 2: the record is frozen at session creation (provenance, differs_at_export, value_at_export).
MANIFEST_VERSION = 2
FROZEN = "frozen at session creation"
NOT_FROZEN = "not frozen: computed at export"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Packages whose versions shape the data: the lab, the model SDKs, the config validation.
MANIFEST_PACKAGES = ("otree", "openai", "anthropic", "pydantic", "jinja2")
# Environment variables whose values are secrets besides the session's llm_api_key_env.
KNOWN_SECRET_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OTREE_ADMIN_PASSWORD",
                          "OTREE_SECRET_KEY", "OTREE_REST_KEY")
# Shorter values are not searched for: replacing "1" everywhere would destroy the data.
MIN_SECRET_LENGTH = 6
REDACTED = "(redacted)"
# Keys of the record that describe the moment, not the code: never compared with today's.
_MOMENT_KEYS = {"created_at"}
_KEY_ORDER = ("session_code", "treatment", "num_participants", "created_at", "project_version", "packages",
              "session_config", "experiment", "prompts", "prompts_sha256", "model_settings", "model_check",
              "session_budget", "stage_limits", "rounds_per_game", "message_max_chars", "payoff_table", "choices",
              "cooperative_choice", "answer_scales", "payment")


def project_version() -> str:
    """The git commit (with "+dirty" when files differ from it), else LAB_VERSION, else "unknown"."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                timeout=5).stdout.strip()
        if commit:
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("LAB_VERSION", "unknown")


def package_versions() -> dict:
    versions = {}
    for name in MANIFEST_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = platform.python_version()
    return versions


def session_experiment_now(config: dict):
    """(the experiment, its record) of a session config's experiment file as it is now; the record
    keeps its name, path, the hash of its text (``sha256sum`` of the file), the hash of its design
    as data (the analysis groups sessions by it) and the text itself, so that the data say what ran
    even after the file changed. The creation checked the file is the one the server started with;
    one unreadable now (at an export) is (None, a record saying why): an export never fails for it."""
    from lab.base.session_settings import DEFAULT_EXPERIMENT, SessionConfigError, session_experiment

    name = config.get("experiment") or DEFAULT_EXPERIMENT
    try:
        experiment = session_experiment({"experiment": name})
    except SessionConfigError as exc:
        return None, dict(name=name, file=f"experiments/{name}.toml", error=str(exc))
    return experiment, dict(name=experiment.name, file=f"experiments/{experiment.name}.toml",
                            text_sha256=experiment.text_sha256, design_sha256=experiment.canonical_hash,
                            text=experiment.text)


def prompt_hashes() -> dict:
    """sha256 of every prompt template under prompts/ (the agents', the similarity testbed's, the
    machine annotator's), by path under prompts/."""
    folder = PROJECT_ROOT / "prompts"
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*.j2"))}


# --- secrets -------------------------------------------------------------------------------------
def secret_values(session_config: dict | None = None) -> list[str]:
    """The secrets in this process's environment, longest first (a key containing another is
    redacted whole)."""
    names = set(KNOWN_SECRET_VARIABLES)
    key_variable = (session_config or {}).get("llm_api_key_env")
    if isinstance(key_variable, str) and key_variable.strip():
        names.add(key_variable.strip())
    values = {os.environ.get(name, "") for name in names}
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def redact_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact(value, secrets: list[str]):
    """``value`` (JSON-like: dicts, lists, strings) with every secret's occurrence replaced."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact(k, secrets): redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


# --- the record ---------------------------------------------------------------------------------
def _json(value):
    """As it reads back from JSON, so a frozen record and today's compare equal when equal."""
    return json.loads(json.dumps(without_bare_nan(value), default=str, sort_keys=True))


def without_bare_nan(value):
    """``value`` with NaN and infinity as text ("nan", "inf"): Python writes them as bare NaN and
    Infinity, which JSON has not (a manifest must read back anywhere)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: without_bare_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_bare_nan(v) for v in value]
    return value


def creation_record(session) -> dict:
    """Everything that defines how the session runs (its protocol) and by what software, as this
    process sees it now: at creation this is what ``freeze`` stores."""
    from lab.base.session_settings import params_from_config

    config = {key: value for key, value in dict(session.config).items() if not callable(value)}
    p = params_from_config(config)
    prompts = prompt_hashes()
    experiment, experiment_values = session_experiment_now(config)
    game_values = protocol_values(experiment)
    model = None
    if p.with_agents:  # as resolved (ModelConfig holds a key's variable *name*, never the key)
        from agents.config import ConfigError, ModelConfig

        try:
            model = ModelConfig.from_session_config(config).model_dump(mode="json")
        except ConfigError as exc:
            model = {"error": str(exc)}
    record = dict(
        session_code=session.code,
        treatment=p.treatment,
        num_participants=session.num_participants,
        project_version=project_version(),
        packages=package_versions(),
        session_config=config,
        experiment=experiment_values,
        prompts=prompts,
        prompts_sha256=hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest(),
        model_settings=model,
        # what the model check found: the grammar (on/off, why), the server's capacity, a warning
        model_check=(getattr(session, "vars", None) or {}).get("model_check") if p.with_agents else None,
        session_budget=config.get("session_budget") if p.with_agents else None,
        stage_limits=p.stage_limits,
        rounds_per_game=p.rounds_per_game,
        message_max_chars=p.message_max_chars,
        **{key: value for key, value in game_values.items() if key != "currency"},
        payment=dict(participation_fee=p.participation_fee, currency_per_point=p.currency_per_point,
                     norm_bonus=p.norm_bonus, currency=game_values["currency"]),
    )
    return _json(redact(record, secret_values(config)))


def freeze(subsession) -> None:
    """creating_session of the first app: store the session's record, once."""
    session = subsession.session
    Model = app_registry.session_manifest_model()
    if Model.objects_filter(session_code=session.code).first() is not None:
        return
    record = dict(creation_record(session), created_at=time.time())
    Model.create(subsession=subsession, session_code=session.code, record=json.dumps(record, sort_keys=True))


def session_manifest(session) -> dict:
    """The frozen record (or, without one, today's, marked so), the session's times, and what
    today's code would record differently (``differs_at_export``: {key: today's value})."""
    today = creation_record(session)
    frozen = frozen_record(session)
    if frozen is None:
        record = dict(today, created_at=getattr(session, "_created", None))
        differs = {}
    else:
        record = frozen
        differs = {key: value for key, value in today.items()
                   if key not in _MOMENT_KEYS and record.get(key) != value}
    started_at, ended_at = _session_times(session)
    ordered = {key: record[key] for key in _KEY_ORDER if key in record}
    manifest = dict(
        manifest_version=MANIFEST_VERSION,
        provenance=FROZEN if frozen is not None else NOT_FROZEN,
        **ordered,
        **{key: value for key, value in record.items() if key not in ordered},
        started_at=started_at,
        ended_at=ended_at,
        exported_at=time.time(),
        differs_at_export=differs,
    )
    return without_bare_nan(redact(manifest, secret_values(dict(session.config))))  # also secrets set since creation


def _session_times(session) -> tuple:
    """First and last page completion of the session (oTree's page-time records)."""
    from lab.record.page_times import page_times

    completed = [row["completed_at"] for rows in page_times(session).values() for row in rows]
    return (min(completed), max(completed)) if completed else (None, None)


def _cell(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def manifest_table(session_code: str, manifest: dict) -> list[list]:
    """The CSV form of a manifest: a header, then one row per entry: key, the value as JSON, and
    beside it today's value where today's code would record another (empty where it agrees)."""
    differs = manifest.get("differs_at_export") or {}
    rows = [MANIFEST_COLUMNS]
    for key, value in manifest.items():
        if key != "differs_at_export":
            rows.append([session_code, key, _cell(value), _cell(differs[key]) if key in differs else ""])
    return rows


def manifest_rows(players):
    """oTree's custom export ``manifest``: every session's manifest_table."""
    sessions = {player.session.code: player.session for player in players}
    yield MANIFEST_COLUMNS
    for code, session in sessions.items():
        yield from manifest_table(code, session_manifest(session))[1:]
