"""The game a session plays: its choices, payoff table and cooperative choice, as its record froze
them at creation (lab/record/manifest.py, from the session's experiment file), never today's file or
protocol.py. The pages, the bots, the payment, the dashboard and the data package read them here."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Mapping, Optional

import protocol
from lab.base import app_registry

# A session config without an experiment (made by hand, or before configs came from experiments/).
DEFAULT_EXPERIMENT = "paper"

_CACHE: dict[str, "SessionGame"] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class SessionGame:
    choices: tuple[str, ...]
    payoffs: Mapping[tuple[str, str], tuple[float, float]]  # (own, other) -> (own points, other's points)
    cooperative_choice: Optional[str]  # None: the game names no choice cooperation
    # The norm estimate's intervals of the others' cooperation rate, percent; empty: no norm estimate asked
    norm_intervals: tuple[tuple[float, float], ...] = protocol.NORM_INTERVALS

    def points(self, own: str, other: str) -> tuple[float, float]:
        return self.payoffs[(own, other)]

    @property
    def own_points_options(self) -> tuple[float, ...]:
        """Every number of points one can earn in a round, ascending (the quiz's options)."""
        return tuple(sorted({own for own, _ in self.payoffs.values()}))


def protocol_values(experiment=None) -> dict:
    """The values a session's data is read by: its game's payoffs, choices and cooperative choice
    (the session's experiment's; protocol.py's without one), the questionnaires' answer scales (the
    norm estimates' intervals the experiment's: empty when it asks none),
    frozen with the session (lab/record/manifest.py ``creation_record``), and the currency."""
    if experiment is None:
        payoffs, choices, cooperative, currency = (protocol.PAYOFFS, protocol.CHOICES, protocol.COOPERATE,
                                                   protocol.CURRENCY_CODE)
        intervals = protocol.NORM_INTERVALS
    else:
        payoffs, choices = experiment.payoff_matrix, experiment.choice_ids
        cooperative, currency = experiment.cooperative_choice, experiment.design.payment.currency
        intervals = experiment.design.questionnaires.norm_intervals or ()  # none: no norm estimates asked
    return dict(
        payoff_table={f"{own}{other}": list(points) for (own, other), points in sorted(payoffs.items())},
        choices=list(choices),
        cooperative_choice=cooperative,
        answer_scales=dict(norm_intervals=[list(bounds) for bounds in intervals],
                           likert=[protocol.LIKERT_MIN, protocol.LIKERT_MAX],
                           llm_familiarity_levels=list(protocol.LLM_FAMILIARITY_LEVELS), svo_steps=protocol.SVO_STEPS),
        currency=currency,
    )


def treatment_values(experiment=None) -> dict:
    """The names a session's data may hold for its treatment: the treatment codes of its associate
    types (human and the experiment's personas), its personas, label settings, game orders and
    languages (protocol.py's without an experiment). Not frozen as such: read from the frozen
    experiment's text."""
    if experiment is None:
        codes, settings = dict(protocol.TREATMENT_CODES), list(protocol.LABEL_SETTINGS)
        orders = {name: list(order) for name, order in protocol.GAME_ORDERS.items()}
        languages = list(protocol.LANGUAGES)
    else:
        codes = {kind: experiment.treatment_code(kind) for kind in ("human", *experiment.design.personas)}
        settings, languages = list(experiment.design.labels), list(experiment.design.languages)
        orders = {name: list(order) for name, order in experiment.game_orders.items()}
    return dict(treatment_codes=codes, personas=[kind for kind in codes if kind != "human"], label_settings=settings,
                game_orders=orders, languages=languages)


def label_values(experiment=None) -> dict:
    """How a session's choices were shown: ``choice_labels``, id -> {language: label} of its experiment's
    game.choices (without an experiment, protocol.py's choices shown as their ids). Not frozen as such:
    read from the frozen experiment's text."""
    if experiment is None:
        return dict(choice_labels={choice: {} for choice in protocol.CHOICES})
    return dict(choice_labels={choice.id: dict(choice.label) for choice in experiment.design.game.choices})


def session_protocol_values(manifest: dict) -> dict:
    """``protocol_values`` as the session's manifest froze them (today's for a value it lacks: a
    session frozen before the value was), and ``treatment_values`` and ``label_values`` of its frozen
    experiment."""
    values = protocol_values()
    values.update({key: manifest[key] for key in values if key in manifest})
    values["currency"] = (manifest.get("payment") or {}).get("currency") or values["currency"]
    try:
        experiment = _experiment_of(manifest)
    except Exception:  # noqa: BLE001 - a record whose experiment cannot be read: the paper's names
        experiment = None
    values.update(treatment_values(experiment))
    values.update(label_values(experiment))
    return values


def frozen_record(session) -> dict | None:
    """The session's record as frozen at its creation (lab/record/manifest.py ``freeze``), None without one."""
    row = app_registry.session_manifest_model().objects_filter(session_code=session.code).first()
    return json.loads(row.record) if row is not None else None


def from_values(values: dict) -> SessionGame:
    """The game of ``protocol_values``' form."""
    choices = tuple(values["choices"])
    payoffs = {(own, other): tuple(values["payoff_table"][own + other]) for own in choices for other in choices}
    intervals = tuple(tuple(bounds) for bounds in values["answer_scales"]["norm_intervals"])
    return SessionGame(choices, payoffs, values.get("cooperative_choice"), intervals)


def _frozen_once(cache: dict, session, build):
    """``build(record)`` of the session's frozen record, kept per session once the record exists
    (before its freeze, while the session is created, nothing is kept)."""
    with _LOCK:
        found = cache.get(session.code)
    if found is None:
        record = frozen_record(session)
        found = build(record or {})
        if record is not None:
            with _LOCK:
                cache[session.code] = found
    return found


def session_game(session) -> SessionGame:
    """The session's game, from its frozen record (read once per session and process)."""
    return _frozen_once(_CACHE, session, lambda record: from_values(session_protocol_values(record)))


_EXPERIMENTS: dict[str, object] = {}


def _experiment_of(record: dict):
    import experiment_design

    frozen = record.get("experiment") or {}
    if frozen.get("text"):
        return experiment_design.load_text(frozen["text"], frozen["name"])
    return experiment_design.load(experiment_design.EXPERIMENTS_DIR / f"{DEFAULT_EXPERIMENT}.toml")


def frozen_experiment(session):
    """The session's experiment as its record froze the file's text at creation (a session recorded
    before experiments were: the paper's file as it is now)."""
    return _frozen_once(_EXPERIMENTS, session, _experiment_of)


def experiment_of(session_code: str):
    """``frozen_experiment`` of the session of this code (``session_settings.session_code_of`` gives a
    player's): pages ask on every request, so once kept it is found by the code, without loading the
    session row."""
    from types import SimpleNamespace

    found = _EXPERIMENTS.get(session_code)
    return found if found is not None else frozen_experiment(SimpleNamespace(code=session_code))  # the code is all it reads


def experiment_kept(session_code: str) -> bool:
    """Whether ``experiment_of`` answers from what it keeps (the session's record is frozen)."""
    return session_code in _EXPERIMENTS


def pays_norm_bonus(session, norm_bonus: float) -> bool:
    """Whether the session pays a bonus for norm estimates: it asks them (its frozen intervals) and its
    bonus (``norm_bonus``, its parameters') is not 0. The payment page shows the estimates and the
    bonus only then."""
    return bool(session_game(session).norm_intervals) and norm_bonus > 0


def choice_labels(session, language: str) -> dict[str, str]:
    """The session's choices as its participants see them in ``language`` (its experiment's
    game.choices labels; a choice's id where the experiment gives no label in that language)."""
    experiment = frozen_experiment(session)
    labels = {choice.id: choice.label for choice in experiment.design.game.choices}
    return {choice: labels.get(choice, {}).get(language, choice) for choice in session_game(session).choices}
