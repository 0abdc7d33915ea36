"""What a game app hands in to lab/: its game code and its tables (lab/base/app_registry.py keeps them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GameTables:
    """A game app's code and its models: its players, its messages, its agents' seats, turns
    and calls."""

    game: str
    Player: Any
    Message: Any  # None in the game without chat
    AgentSeat: Any
    AgentTurn: Any
    LlmCall: Any

    @property
    def with_chat(self) -> bool:
        return self.Message is not None
