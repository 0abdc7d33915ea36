"""What a game app hands in to the agent runtime: its name and its agent tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GameTables:
    """A game app's name and its agent-related models."""

    game: str
    Message: Any  # None in the game without chat
    AgentSeat: Any
    AgentTurn: Any
    LlmCall: Any

    @property
    def with_chat(self) -> bool:
        return self.Message is not None
