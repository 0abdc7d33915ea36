"""The long-format exports of docs/DATA.md, as oTree custom export functions.

They live in the last app (``payment``) so that an experimenter finds every table in one
place on oTree's Data page; each takes that app's players (one per participant).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import time
from importlib import metadata
from pathlib import Path

import protocol
from lab import game as lab_game
from lab.session_settings import GAME_APPS

MESSAGE_COLUMNS = [
    "session_code", "treatment", "associate_type", "label_setting", "game_order", "source",
    "game", "round", "conversation_id", "stage", "sender_code", "sender_kind", "receiver_code",
    "receiver_kind", "text", "sent_in_time", "stage_started_at", "sent_at", "unsent_draft",
]


def _questionnaire_columns() -> list:
    from questionnaire import NORM_FIELDS, PERCEPTION_FIELDS, SEVEN_C_FIELDS, SVO_FIELDS

    return (NORM_FIELDS + PERCEPTION_FIELDS + SEVEN_C_FIELDS + ["believed_human", "llm_familiarity"]
            + SVO_FIELDS + ["svo_angle", "svo_category", "age", "gender", "major"])


def participant_columns() -> list:
    per_game = []
    for game in protocol.GAMES:
        per_game += [f"norm_true_{game}", f"norm_correct_{game}"]
    return (["session_code", "treatment", "associate_type", "label_setting", "game_order", "source",
             "participant_code", "participant_label", "quiz_attempts"]
            + _questionnaire_columns() + per_game
            + [f"points_{game}" for game in protocol.GAMES] + ["payout"])


def _first(rows):
    return rows[0] if rows else None


def participants_rows(players):
    """One row per participant: quiz, questionnaires, norms and payment."""
    yield participant_columns()
    questionnaire_columns = _questionnaire_columns()
    for player in players:
        quiz = _first(lab_game.players_of(player.participant, "instructions"))
        answers = _first(lab_game.players_of(player.participant, "questionnaire"))
        row = [*lab_game.session_keys(player.session), player.participant.code,
               player.participant.label, quiz.quiz_attempts if quiz else None]
        row += [answers.field_maybe_none(c) if answers else None for c in questionnaire_columns]
        for game in protocol.GAMES:
            row += [player.field_maybe_none(f"norm_true_{game}"),
                    lab_game.csv_bool(player.field_maybe_none(f"norm_correct_{game}"))]
        row += [player.field_maybe_none(f"points_{game}") for game in protocol.GAMES]
        row.append(player.field_maybe_none("payout"))
        yield row


def decisions_rows(players):
    """One row per decision of a human or an agent, both games (docs/DATA.md 'decisions')."""
    from otree.common import get_models_module

    from lab.agent_pages import decision_rows

    yield lab_game.DECISION_COLUMNS
    for player in players:
        for app in GAME_APPS.values():
            tables = get_models_module(app).TABLES
            for game_player in lab_game.players_of(player.participant, app):
                yield from decision_rows(game_player, tables)


def messages_rows(players):
    """One row per chat message of the game with chat (docs/DATA.md 'messages')."""
    from game_with_chat import Message

    yield MESSAGE_COLUMNS
    for player in players:
        for game_player in lab_game.players_of(player.participant, GAME_APPS["WC"]):
            for message in Message.filter(player=game_player):
                yield [
                    *lab_game.session_keys(player.session), "WC", game_player.round_number,
                    lab_game.conversation_id(game_player, "WC"), message.stage,
                    message.sender_code, message.sender_kind, message.receiver_code,
                    message.receiver_kind, message.text, lab_game.csv_bool(message.sent_in_time),
                    message.stage_started_at, message.sent_at, message.unsent_draft,
                ]




# --- The manifest: what a data set needs to be reproduced (docs/DATA.md 'manifest') -------------
MANIFEST_COLUMNS = ["session_code", "key", "value"]
MANIFEST_VERSION = 1
# Config keys that would hold a secret are never exported (keys come from the environment; a
# field *naming* the variable, such as llm_api_key_env, is kept).
SECRET_KEY = re.compile(r"api_key|secret|password|token", re.IGNORECASE)
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Packages whose versions shape the data: the lab, the model SDKs, the config validation.
MANIFEST_PACKAGES = ("otree", "openai", "anthropic", "pydantic", "jinja2")


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


def prompt_hashes() -> dict:
    """sha256 of every prompt template the agents read (prompts/*.j2), by file name."""
    folder = PROJECT_ROOT / "prompts"
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*.j2"))}


def session_manifest(session) -> dict:
    """Everything that defines how a session was run (its protocol) and by what software."""
    from lab.session_settings import params

    p = params(session)
    config = {key: ("(redacted)" if SECRET_KEY.search(key) and not key.endswith("_env") else value)
              for key, value in dict(session.config).items() if not callable(value)}
    prompts = prompt_hashes()
    model = None
    if p.with_agents:  # the model as resolved at session start (ModelConfig holds no secret: a key's
        from lab import agent_runtime  # variable *name* only)

        model = agent_runtime.model_config(session).model_dump(mode="json")
    times = _session_times(session)
    return dict(
        manifest_version=MANIFEST_VERSION,
        session_code=session.code,
        project_version=project_version(),
        packages=package_versions(),
        session_config=json.loads(json.dumps(config, default=str)),
        num_participants=session.num_participants,
        treatment=p.treatment,
        prompts=prompts,
        prompts_sha256=hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest(),
        model_settings=model,
        session_budget=config.get("session_budget") if p.with_agents else None,
        stage_limits=p.stage_limits,
        rounds_per_game=p.rounds_per_game,
        message_max_chars=p.message_max_chars,
        payoff_table={f"{own}{other}": list(points) for (own, other), points in sorted(protocol.PAYOFFS.items())},
        payment=dict(participation_fee=p.participation_fee, currency_per_point=p.currency_per_point,
                     norm_bonus=p.norm_bonus, currency=protocol.CURRENCY_CODE),
        created_at=getattr(session, "_created", None),
        started_at=times[0],
        ended_at=times[1],
        exported_at=time.time(),
    )


def _session_times(session) -> tuple:
    """First and last page completion of the session (oTree's page-time records)."""
    from lab.dashboard import page_times

    completed = [row["completed_at"] for rows in page_times(session).values() for row in rows]
    return (min(completed), max(completed)) if completed else (None, None)


def manifest_rows(players):
    """One row per manifest entry of each session: key, and the value as JSON."""
    yield MANIFEST_COLUMNS
    sessions = {player.session.code: player.session for player in players}
    for code, session in sessions.items():
        for key, value in session_manifest(session).items():
            yield [code, key, json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)]
