"""Synthetic sessions of all 8 treatments from known parameters, in the format of docs/DATA.md.

For tests and demos: ``python -m analysis.synthetic OUT_DIR`` writes decisions, messages,
participants, llm_calls, annotations (two annotators and a resolver, with a known error rate)
and motive ratings. The defaults are the paper's rates (Tables S2, S11, S3, S8), so a report
of this data looks like the paper's; the choices follow a simple model of the round:

- the pair agrees on mutual A with ``agreement_rate[setting][treatment]``;
- after an agreement a human chooses B with ``human_breach_rate`` (shifted per participant by
  ``participant_spread`` on the logit scale), an agent with ``agent_breach_rate[persona]``;
- without an agreement a human chooses A with ``human_cooperation_without_agreement``, an
  agent with ``agent_cooperation_without_agreement[persona]``;
- in the WoC game humans choose A with ``woc_cooperation``.
"""

from __future__ import annotations

import argparse
import json
import string
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import protocol
from analysis.load import MOTIVES

AGENT_TREATMENTS = {"H-C": "cooperative", "H-F": "fair", "H-S": "selfish"}
TREATMENT_TYPES = {code: kind for kind, code in protocol.TREATMENT_CODES.items()}


def _per_setting(informed: dict, uninformed: dict) -> dict[str, dict]:
    return {"informed": informed, "uninformed": uninformed}


@dataclass
class SyntheticParameters:
    participants_per_session: int = 12  # even (H-H pairs humans); ≥ rounds + 1 for perfect strangers
    rounds: int = protocol.ROUNDS_PER_GAME
    agreement_rate: dict = field(default_factory=lambda: _per_setting(
        {"H-H": 0.755, "H-F": 0.875, "H-C": 0.811, "H-S": 0.797},
        {"H-H": 0.669, "H-F": 0.922, "H-C": 0.867, "H-S": 0.739}))
    human_breach_rate: dict = field(default_factory=lambda: _per_setting(
        {"H-H": 0.452, "H-F": 0.568, "H-C": 0.682, "H-S": 0.792},
        {"H-H": 0.545, "H-F": 0.630, "H-C": 0.665, "H-S": 0.709}))
    agent_breach_rate: dict = field(default_factory=lambda: _per_setting(
        {"fair": 0.096, "cooperative": 0.0, "selfish": 0.717},
        {"fair": 0.126, "cooperative": 0.002, "selfish": 0.724}))
    human_cooperation_without_agreement: dict = field(default_factory=lambda: {
        "H-H": 0.25, "H-F": 0.2, "H-C": 0.15, "H-S": 0.1})
    agent_cooperation_without_agreement: dict = field(default_factory=lambda: {
        "fair": 0.4, "cooperative": 0.95, "selfish": 0.05})
    woc_cooperation: dict = field(default_factory=lambda: {"H-H": 0.35, "H-F": 0.3, "H-C": 0.3, "H-S": 0.2})
    agent_woc_cooperation: dict = field(default_factory=lambda: {"fair": 0.4, "cooperative": 0.95, "selfish": 0.05})
    participant_spread: float = 0.5  # sd of a participant's logit shift of the breach probability
    # Means of the perception items (Table S3) and of the 7C items (Table S8), item order of protocol.
    perception_means: dict = field(default_factory=lambda: {
        "H-H": (0.25, 0.93, -0.59, 0.65, 0.71, -0.5, -0.6), "H-F": (0.65, 0.14, 1.45, 0.5, 1.27, 1.54, 1.38),
        "H-C": (1.35, -0.13, 2.42, -0.1, 2.08, 2.66, 1.96), "H-S": (-0.25, 0.08, -1.42, 0.61, -1.32, -1.36, -1.01)})
    seven_c_means: dict = field(default_factory=lambda: {
        "H-H": (1.32, 1.35, 0.95, 1.11, 1.33, 1.64, 1.47), "H-F": (1.76, 1.16, 1.87, 1.45, 2.0, 1.49, 1.8),
        "H-C": (2.49, 1.62, 2.2, 1.75, 2.54, 1.97, 2.2), "H-S": (1.08, 0.99, 1.24, 0.75, 1.47, 1.5, 1.56)})
    likert_sd: float = 1.2
    believed_human_mean: dict = field(default_factory=lambda: {"H-H": 1.2, "H-F": -1.0, "H-C": -1.0, "H-S": -1.0})
    norm_estimate_noise: float = 15.0  # percentage points around the participant's own WC rate
    annotator_error_rate: float = 0.05  # each label of each annotator flipped with this probability
    motive_means: dict = field(default_factory=lambda: {
        "fair": (1.5, 1.0, -1.5, -1.0), "selfish": (0.2, -1.5, -0.8, 2.0), "cooperative": (0.0, 0.0, 0.0, 0.0)})
    timed_out_rate: float = 0.02
    label_settings: tuple = protocol.LABEL_SETTINGS
    treatments: tuple = ("H-H", "H-F", "H-C", "H-S")
    game_orders: tuple = tuple(protocol.GAME_ORDERS)


def _code(rng: np.random.Generator, length: int = 8) -> str:
    return "".join(rng.choice(list(string.ascii_lowercase + string.digits), length))


def _pairings(players: int, rounds: int) -> list[list[tuple[int, int]]]:
    """Round-robin (circle method): nobody meets the same associate twice in players − 1 rounds."""
    order = list(range(players))
    result = []
    for _ in range(rounds):
        result.append([(order[i], order[players - 1 - i]) for i in range(players // 2)])
        order = [order[0], order[-1], *order[1:-1]]
    return result


def _likert(rng: np.random.Generator, mean: float, sd: float) -> int:
    return int(np.clip(np.rint(rng.normal(mean, sd)), protocol.LIKERT_MIN, protocol.LIKERT_MAX))


def _expit(x: float) -> float:
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return float(np.log(p / (1 - p)))


class _SessionBuilder:
    def __init__(self, rng: np.random.Generator, parameters: SyntheticParameters, treatment: str,
                 label_setting: str, game_order: str, clock: float):
        self.rng, self.p, self.treatment, self.label_setting = rng, parameters, treatment, label_setting
        self.game_order = game_order
        self.persona = AGENT_TREATMENTS.get(treatment, "")
        self.code = _code(rng)
        self.keys = {"session_code": self.code, "treatment": treatment, "associate_type": TREATMENT_TYPES[treatment],
                     "label_setting": label_setting, "game_order": game_order, "source": "lab"}
        self.humans = sorted(_code(rng) for _ in range(parameters.participants_per_session))
        self.agents = [f"agent-{i + 1}" for i in range(len(self.humans))] if self.persona else []
        spread = parameters.participant_spread
        self.shift = {h: rng.normal(0.0, spread) if spread else 0.0 for h in self.humans}
        self.clock = clock
        self.decisions: list[dict] = []
        self.messages: list[dict] = []
        self.calls: list[dict] = []
        self.truth: list[dict] = []  # per WC conversation: true labels and choices

    # One side's choice in a round.
    def _human_choice(self, player: str, game: str, agreed: bool) -> str:
        p = self.p
        if game == "WoC":
            cooperate = p.woc_cooperation[self.treatment]
        elif agreed:
            breach = _expit(_logit(p.human_breach_rate[self.label_setting][self.treatment]) + self.shift[player])
            cooperate = 1 - breach
        else:
            cooperate = p.human_cooperation_without_agreement[self.treatment]
        return "A" if self.rng.random() < cooperate else "B"

    def _agent_choice(self, game: str, agreed: bool) -> str:
        p = self.p
        if game == "WoC":
            cooperate = p.agent_woc_cooperation[self.persona]
        elif agreed:
            cooperate = 1 - p.agent_breach_rate[self.label_setting][self.persona]
        else:
            cooperate = p.agent_cooperation_without_agreement[self.persona]
        return "A" if self.rng.random() < cooperate else "B"

    def build(self) -> None:
        for index, game in enumerate(protocol.GAME_ORDERS[self.game_order], start=1):
            for round_number in range(1, self.p.rounds + 1):
                self._round(game, index, round_number)

    def _round(self, game: str, game_index: int, round_number: int) -> None:
        if self.persona:
            count = len(self.humans)
            pairs = [(h, self.agents[(i + round_number) % count]) for i, h in enumerate(self.humans)]
        else:
            pairing = _pairings(len(self.humans), self.p.rounds)[round_number - 1]
            pairs = [tuple(sorted((self.humans[a], self.humans[b]))) for a, b in pairing]
        for pair_index, (first, second) in enumerate(pairs, start=1):
            conversation_id = f"{self.code}-{game}-r{round_number}-{pair_index}"
            agreed = game == "WC" and self.rng.random() < self.p.agreement_rate[self.label_setting][self.treatment]
            second_kind = "agent" if self.persona else "human"
            first_choice = self._human_choice(first, game, agreed)
            second_choice = self._agent_choice(game, agreed) if self.persona else self._human_choice(second, game, agreed)
            started = self.clock
            if game == "WC":
                self._messages(conversation_id, round_number, (first, "human"), (second, second_kind), agreed)
                self.truth.append({"conversation_id": conversation_id, "agreed": agreed, "persona": self.persona,
                                   "p1_choice": first_choice, "p2_choice": second_choice})
            for (player, kind, choice), (other, other_kind, other_choice) in (
                    ((first, "human", first_choice), (second, second_kind, second_choice)),
                    ((second, second_kind, second_choice), (first, "human", first_choice))):
                self.decisions.append({
                    **self.keys, "game": game, "game_index": game_index, "round": round_number,
                    "player_code": player, "player_kind": kind, "persona": self.persona if kind == "agent" else "",
                    "associate_code": other, "associate_kind": other_kind, "conversation_id": conversation_id,
                    "choice": choice, "timed_out": bool(kind == "human" and self.rng.random() < self.p.timed_out_rate),
                    "associate_choice": other_choice, "payoff": protocol.payoff(choice, other_choice),
                    "associate_payoff": protocol.payoff(other_choice, choice),
                    "decided_at": round(started + 200 + self.rng.uniform(0, 40), 3)})
                if kind == "agent":
                    self._calls(player, other, game, round_number, choice)
        self.clock += 270.0

    def _messages(self, conversation_id: str, round_number: int, first: tuple[str, str], second: tuple[str, str],
                  agreed: bool) -> None:
        if agreed:
            texts = {(1, 0): "Let's both choose A, we each get 70.", (1, 1): "Agreed, A for both of us.",
                     (2, 0): "Deal, A it is.", (2, 1): "Great, see you at A."}
        else:
            texts = {(1, 0): "What will you choose?", (1, 1): "I will take B, sorry.",
                     (2, 0): "Then I cannot trust you.", (2, 1): "B is safer for me."}
        for stage in (1, 2):
            started = self.clock + (stage - 1) * 90
            for side, ((sender, sender_kind), (receiver, receiver_kind)) in enumerate(((first, second), (second, first))):
                in_time = not (sender_kind == "human" and self.rng.random() < self.p.timed_out_rate)
                text = texts[(stage, side)]
                self.messages.append({
                    **self.keys, "game": "WC", "round": round_number, "conversation_id": conversation_id,
                    "stage": stage, "sender_code": sender, "sender_kind": sender_kind, "receiver_code": receiver,
                    "receiver_kind": receiver_kind, "text": text if in_time else "", "sent_in_time": in_time,
                    "stage_started_at": round(started, 3),
                    "sent_at": round(started + self.rng.uniform(5, 55), 3) if in_time else "",
                    "unsent_draft": "" if in_time else text[:10]})

    def _calls(self, agent: str, human: str, game: str, round_number: int, choice: str) -> None:
        turns = ("message_1", "message_2", "decision") if game == "WC" else ("decision",)
        for turn in turns:
            sent = self.clock + self.rng.uniform(0, 5)
            self.calls.append({
                **self.keys, "game": game, "participant_code": human, "call_id": _code(self.rng, 12),
                "agent_id": agent, "round_number": round_number, "turn": turn, "attempt": 1,
                "provider": "simulated", "model": "simulated-persona", "parameters": json.dumps({"temperature": None}),
                "prompt_version": "synthetic", "messages": json.dumps([{"role": "user", "content": turn}]),
                "raw_reply": f"I DECIDE TO CHOOSE [{choice}]" if turn == "decision" else "<...>",
                "parsed": choice if turn == "decision" else "...", "status": "ok", "error": "",
                "input_tokens": 900, "output_tokens": 150, "cost": 0.0, "time_sent": round(sent, 3),
                "time_first_byte": round(sent + 0.5, 3), "time_done": round(sent + 2.0, 3), "retries": 0,
                "simulated": True})

    def participants(self) -> list[dict]:
        rows = []
        frame = pd.DataFrame(self.decisions)
        humans = frame[frame["player_kind"] == "human"]
        rates = {game: humans[humans["game"] == game].groupby("player_code")["choice"].apply(
            lambda c: 100 * (c == "A").mean()) for game in protocol.GAMES}
        points = {game: humans[humans["game"] == game].groupby("player_code")["payoff"].sum() for game in protocol.GAMES}
        p = self.p
        for number, human in enumerate(self.humans, start=1):
            row = {**self.keys, "participant_code": human, "participant_label": f"seat-{number}",
                   "quiz_attempts": int(1 + self.rng.poisson(0.3))}
            correct = 0
            for game in protocol.GAMES:
                own = rates[game][human]
                others = rates[game].drop(human).mean()
                estimate = protocol.norm_interval_index(float(np.clip(own + self.rng.normal(0, p.norm_estimate_noise), 0, 100)))
                true = protocol.norm_interval_index(float(others))
                row.update({f"norm_estimate_{game}": estimate, f"norm_true_{game}": true,
                            f"norm_correct_{game}": estimate == true})
                correct += estimate == true
            for item, mean in zip(protocol.PERCEPTION_ITEMS, p.perception_means[self.treatment]):
                row[f"perception_{item}"] = _likert(self.rng, mean, p.likert_sd)
            for item, mean in zip(protocol.SEVEN_C_ITEMS, p.seven_c_means[self.treatment]):
                row[f"c7_{item}"] = _likert(self.rng, mean, p.likert_sd)
            row["believed_human"] = (_likert(self.rng, p.believed_human_mean[self.treatment], p.likert_sd)
                                     if self.label_setting == "uninformed" else "")
            row["llm_familiarity"] = int(self.rng.integers(1, 6))
            positions = self.rng.integers(0, protocol.SVO_STEPS, len(protocol.SVO_ITEMS))
            allocations = [protocol.svo_allocation(i, int(pos)) for i, pos in enumerate(positions)]
            angle = protocol.svo_angle([a[0] for a in allocations], [a[1] for a in allocations])
            row.update({f"svo_item_{i + 1}": int(pos) for i, pos in enumerate(positions)})
            row.update({"svo_angle": round(angle, 2), "svo_category": protocol.svo_category(angle),
                        "age": int(self.rng.integers(18, 26)), "gender": str(self.rng.choice(["female", "male"])),
                        "major": str(self.rng.choice(["economics", "engineering", "biology", "law"])),
                        "points_WC": int(points["WC"][human]), "points_WoC": int(points["WoC"][human])})
            row["payout"] = protocol.payout(row["points_WC"] + row["points_WoC"], correct)
            rows.append(row)
        return rows


def _flip(rng: np.random.Generator, value: str, options: tuple[str, ...], error_rate: float) -> str:
    if rng.random() >= error_rate:
        return value
    return str(rng.choice([o for o in options if o != value]))


def _annotations(rng: np.random.Generator, truth: list[dict], p: SyntheticParameters) -> tuple[list[dict], list[dict]]:
    annotators = [f"expert-{i}" for i in range(1, 11)]
    rows, motives = [], []
    for conversation in truth:
        agreed = conversation["agreed"]
        true_labels = {"p1_preferred": "A" if agreed else str(rng.choice(["A", "B", ""])),
                       "p2_preferred": "A" if agreed else "B",
                       "p1_wants_other": "A", "p2_wants_other": "A",
                       "agreement": str(agreed)}
        pair = rng.choice(annotators, 2, replace=False)
        labelled = []
        for annotator in sorted(pair):
            labels = {column: _flip(rng, value, ("True", "False") if column == "agreement" else ("A", "B", ""),
                                    p.annotator_error_rate) for column, value in true_labels.items()}
            labelled.append(labels)
            rows.append({"conversation_id": conversation["conversation_id"], "annotator": str(annotator), **labels})
        if labelled[0] != labelled[1]:
            rows.append({"conversation_id": conversation["conversation_id"], "annotator": "resolver", **true_labels})
        if agreed and conversation["persona"] and conversation["p2_choice"] == "B":
            for annotator in sorted(pair):
                ratings = {m: _likert(rng, mean, p.likert_sd) for m, mean in zip(MOTIVES, p.motive_means[conversation["persona"]])}
                motives.append({"conversation_id": conversation["conversation_id"], "annotator": str(annotator), **ratings})
    return rows, motives


def generate(parameters: SyntheticParameters | None = None, *, seed: int = 0,
             annotations: bool = True) -> dict[str, pd.DataFrame]:
    """The tables of DATA.md (plus ``motives``) for two sessions (both game orders) per treatment."""
    p = parameters or SyntheticParameters()
    rng = np.random.default_rng(seed)
    tables: dict[str, list[dict]] = {name: [] for name in ("decisions", "messages", "participants", "llm_calls",
                                                           "annotations", "motives")}
    clock = 1_750_000_000.0
    for label_setting in p.label_settings:
        for treatment in p.treatments:
            for game_order in p.game_orders:
                session = _SessionBuilder(rng, p, treatment, label_setting, game_order, clock)
                session.build()
                clock = session.clock + 3600
                tables["decisions"] += session.decisions
                tables["messages"] += session.messages
                tables["llm_calls"] += session.calls
                tables["participants"] += session.participants()
                if annotations:
                    rows, motives = _annotations(rng, session.truth, p)
                    tables["annotations"] += rows
                    tables["motives"] += motives
    return {name: pd.DataFrame(rows) for name, rows in tables.items() if rows}


def as_own_personas(tables: dict[str, pd.DataFrame], personas: dict[str, tuple[str, str]]) -> dict[str, pd.DataFrame]:
    """The tables with the paper's agent treatments renamed to an experiment's own: ``personas``
    maps a paper treatment (H-F) to the own treatment code and persona (H-T, tit_for_tat), whose
    agents then behave as the paper's persona's do here."""
    treatments = {paper: own for paper, (own, _) in personas.items()}
    names = {AGENT_TREATMENTS[paper]: persona for paper, (_, persona) in personas.items()}
    renamed = {}
    for name, table in tables.items():
        table = table.copy()
        if "treatment" in table:
            table["treatment"] = table["treatment"].replace(treatments)
        for column in ("associate_type", "persona"):
            if column in table:
                table[column] = table[column].replace(names)
        renamed[name] = table
    return renamed


def write(tables: dict[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """One CSV per table and label setting (annotation files are not split): several files per
    table, as several sessions' exports would be."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in tables.items():
        if "label_setting" in table:
            for setting, part in table.groupby("label_setting"):
                written.append(out / f"{name}_{setting}.csv")
                part.to_csv(written[-1], index=False)
        else:
            written.append(out / f"{name}.csv")
            table.to_csv(written[-1], index=False)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.synthetic",
                                     description="Write a synthetic data set of the 8 treatments (docs/DATA.md).")
    parser.add_argument("out_dir")
    parser.add_argument("--participants", type=int, default=12, help="participants per session (even)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-annotations", action="store_true", help="leave out annotations and motives")
    args = parser.parse_args(argv)
    tables = generate(SyntheticParameters(participants_per_session=args.participants), seed=args.seed,
                      annotations=not args.no_annotations)
    for path in write(tables, args.out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
