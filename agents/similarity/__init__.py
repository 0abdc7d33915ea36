"""Similarity signals: LLM agents in one-shot social dilemmas told how similar they are.

The testbed of the similarity-signal experiment (docs/protocol.md, Similarity signals) on the
lab's agents, providers and records. ``python -m agents.similarity CONFIG --out DIR``; design in docs/similarity.md.
"""

from .config import SimilarityConfig, load_config
from .runner import run
from .threshold import PrisonersDilemma, PublicGoodsGame, pd_threshold, pgg_threshold

__all__ = ["SimilarityConfig", "load_config", "run", "PrisonersDilemma", "PublicGoodsGame",
           "pd_threshold", "pgg_threshold"]
