"""The lab's tidy tables (docs/DATA.md), written from simulated or replayed games.

Simulation conventions: ``session_code`` is ``{run}-{model label}``, ``treatment`` is ``A-A``,
``associate_type`` is the associate's persona, ``label_setting`` is ``informed``, the game is
game 1 of the session. Extra columns: ``model``, ``matchup``, ``repeat``; the calls also carry
``conversation_id`` and ``game_excluded``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import pandas as pd

import protocol
from agents.types import CALL_RECORD_COLUMNS, TurnStatus

# The lab's columns (lab/record/data_dictionary.py, which agents/ does not import: a test holds these to
# them), less the online sessions' columns, plus the simulation's own at the end.
SESSION_KEYS = ["session_code", "treatment", "associate_type", "label_setting", "game_order", "source"]
DECISION_COLUMNS = SESSION_KEYS + [
    "game", "game_index", "round", "player_code", "player_kind", "persona", "associate_code",
    "associate_kind", "conversation_id", "choice", "timed_out", "associate_choice", "payoff",
    "associate_payoff", "decided_at", "model", "matchup", "repeat",
]
MESSAGE_COLUMNS = SESSION_KEYS + [
    "game", "round", "conversation_id", "stage", "sender_code", "sender_kind", "receiver_code",
    "receiver_kind", "text", "sent_in_time", "stage_started_at", "sent_at", "unsent_draft",
    "model", "matchup", "repeat",
]
CALL_FIELDS = list(CALL_RECORD_COLUMNS)
CALL_COLUMNS = SESSION_KEYS + ["game", "participant_code"] + CALL_FIELDS + ["model_label"]
# A simulation's or replay's calls also say which game they belong to (conversation_id, matchup,
# repeat join them to the decisions), and game_excluded: the game failed (provider errors, the
# budget) and is not in the decisions and messages tables.
RUN_CALL_COLUMNS = CALL_COLUMNS + ["conversation_id", "matchup", "repeat", "game_excluded"]
OTHER_GAME = {"WC": "WoC", "WoC": "WC"}


def session_keys(session_code: str, associate_type: str, game: str, source: str,
                 treatment: str = "A-A") -> dict[str, Any]:
    return {"session_code": session_code, "treatment": treatment, "associate_type": associate_type,
            "label_setting": "informed", "game_order": f"{game}-{OTHER_GAME[game]}", "source": source}


class TableRows:
    """Accumulates the rows of the tables, one side of a conversation at a time.

    The calls (every prompt in full) go straight to ``llm_calls.csv`` in ``out_dir`` as they
    come, so a big run never holds them in memory; decisions and messages are kept and sorted.
    """

    def __init__(self, out_dir: Path, payoff: Callable[[str, str], Any] = protocol.payoff) -> None:
        self.out_dir = Path(out_dir)
        self.payoff = payoff  # (own choice, other's) -> own points: the experiment's
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.decisions: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.calls_path = self.out_dir / "llm_calls.csv"
        self._calls_file = open(self.calls_path, "w", encoding="utf-8", newline="")
        self._calls = csv.DictWriter(self._calls_file, RUN_CALL_COLUMNS, extrasaction="ignore")
        self._calls.writeheader()

    def add_side(self, *, keys: dict[str, Any], game: str, round_number: int, conversation_id: str,
                 player: str, persona: Optional[str], associate: str, associate_kind: str,
                 turns: list[dict[str, Any]], associate_choice: str, extra: dict[str, Any],
                 excluded: bool = False) -> None:
        """One agent's side of one conversation: its decision, its messages, its calls.

        ``excluded``: the game failed (a turn got no answer from the model): only its calls are
        written (flagged ``game_excluded``), not a decision or messages."""
        for turn in turns:
            for call in turn["calls"]:
                row = {**keys, "game": game,
                       "participant_code": associate if associate_kind == "human" else None,
                       **{f: call.get(f) for f in CALL_FIELDS}, "model_label": extra.get("model"),
                       "conversation_id": conversation_id, "matchup": extra.get("matchup"),
                       "repeat": extra.get("repeat"), "game_excluded": excluded}
                row["parameters"] = json.dumps(call["parameters"], ensure_ascii=False)
                row["messages"] = json.dumps(call["messages"], ensure_ascii=False)
                self._calls.writerow(row)
        if excluded:
            return
        decision = turns[-1]
        self.decisions.append({
            **keys, "game": game, "game_index": 1, "round": round_number, "player_code": player,
            "player_kind": "agent", "persona": persona, "associate_code": associate,
            "associate_kind": associate_kind, "conversation_id": conversation_id,
            "choice": decision["choice"], "timed_out": decision["status"] == TurnStatus.FALLBACK.value,
            "associate_choice": associate_choice,
            "payoff": self.payoff(decision["choice"], associate_choice),
            "associate_payoff": self.payoff(associate_choice, decision["choice"]),
            "decided_at": decision["finished_at"], **extra,
        })
        for stage, turn in enumerate(turns[:-1], start=1):
            self.add_message(keys=keys, game=game, round_number=round_number,
                             conversation_id=conversation_id, stage=stage, sender=player,
                             sender_kind="agent", receiver=associate, receiver_kind=associate_kind,
                             text=turn["text"], started_at=turn["started_at"],
                             sent_at=turn["finished_at"], extra=extra)

    def add_message(self, *, keys: dict[str, Any], game: str, round_number: int, conversation_id: str,
                    stage: int, sender: str, sender_kind: str, receiver: str, receiver_kind: str,
                    text: Optional[str], started_at: Any, sent_at: Any, extra: dict[str, Any]) -> None:
        self.messages.append({
            **keys, "game": game, "round": round_number, "conversation_id": conversation_id,
            "stage": stage, "sender_code": sender, "sender_kind": sender_kind,
            "receiver_code": receiver, "receiver_kind": receiver_kind, "text": text or "",
            "sent_in_time": text is not None, "stage_started_at": started_at,
            "sent_at": sent_at if text is not None else None, "unsent_draft": None, **extra,
        })

    def write(self, sort_by: list[str]) -> dict[str, Path]:
        self._calls_file.close()
        written = {"llm_calls": self.calls_path}
        for name, rows, columns in (("decisions", self.decisions, DECISION_COLUMNS),
                                    ("messages", self.messages, MESSAGE_COLUMNS)):
            # Without rows (a WoC run has no chat; every game failed) the header alone: an empty
            # CSV that R's read.csv and pandas read, not a bare newline.
            frame = pd.DataFrame(rows, columns=columns if not rows else None)
            # The contract's columns first, a caller's extra columns (replay) after them.
            frame = frame[[c for c in columns if c in frame] + [c for c in frame if c not in columns]]
            keys = [c for c in sort_by if c in frame] + (["player_code"] if name == "decisions" else
                                                          ["stage", "sender_code"])
            path = self.out_dir / f"{name}.csv"
            frame.sort_values(keys, kind="stable").to_csv(path, index=False)
            written[name] = path
        return written


def decision_fallbacks(decisions_path: Optional[Path]) -> dict[str, tuple[int, int]]:
    """Per arm (the decisions' model label): (random fallbacks, decisions) of its agents. A
    fallback is the random choice of a turn the model gave no usable answer for, flagged
    ``timed_out`` (analysis.simulation.fallback), never the agent's behaviour."""
    from analysis.simulation import fallback

    if decisions_path is None or not Path(decisions_path).exists():
        return {}
    decisions = pd.read_csv(decisions_path)
    agents = decisions[decisions["player_kind"] == "agent"]
    flags = fallback(agents)
    return {str(arm): (int(flags[group.index].sum()), len(group)) for arm, group in agents.groupby("model", sort=False)}


def write_tables(config: Any, records: Iterable[dict[str, Any]], out_dir: Path) -> dict[str, Path]:
    """The tables of the config's design from the run's game records (in any order).

    Records of failed games (``record["failed"]``) give only their calls, flagged."""
    rows = TableRows(out_dir, config.payoff)
    wanted_models = {m.label for m in config.models}
    for record in records:
        if record["model"] not in wanted_models or record["repeat"] > config.repeats:
            continue
        session_code = f"{config.name}-{record['model']}"
        conversation_id = (f"{session_code}-{config.game}-r{record['round']}-"
                           f"{record['matchup']}-x{record['repeat']}-p{record['pair']}")
        extra = {"model": record["model"], "matchup": record["matchup"], "repeat": record["repeat"]}
        for side, other in (("a", "b"), ("b", "a")):
            rows.add_side(
                keys=session_keys(session_code, record[f"persona_{other}"], config.game, "simulation"),
                game=config.game, round_number=record["round"], conversation_id=conversation_id,
                player=record[f"agent_{side}"], persona=record[f"persona_{side}"],
                associate=record[f"agent_{other}"], associate_kind="agent",
                turns=record["turns"][side], associate_choice=record["turns"][other][-1]["choice"],
                extra=extra, excluded=bool(record.get("failed")))
    return rows.write(["session_code", "matchup", "repeat", "round", "conversation_id"])
