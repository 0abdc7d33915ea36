"""Machine annotation of a run's conversations, so Figure S23 has agreements to count.

The paper's agreements were annotated by people (SI Note 2). For a simulated pilot an LLM fills
the same columns (``analysis.annotation.machine_annotate``, annotator ``machine:<model>``); the
calls go through the response cache, so a rerun annotates for free. Human annotations dropped
into the run folder later take precedence (``analysis.annotation.resolve``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .cache import CachedModel, ResponseCache
from .config import SimulationConfig

ANNOTATIONS_FILE = "annotations_machine.csv"


def annotate_run(config: SimulationConfig, build_model: Any, budget: Any, on_reply: Any = None) -> Path:
    """Write ``annotations_machine.csv`` for the WC conversations of the run's tables.

    Runs its own event loop (``machine_annotate`` does): call it outside a running loop, or in a
    thread. ``on_reply`` gets every reply not served from the cache (the run's spending log).
    """
    from analysis.annotation import machine_annotate
    from analysis.load import load_exports
    from analysis.tidy import conversations_table

    exports = load_exports([config.run_dir / "decisions.csv", config.run_dir / "messages.csv"])
    conversations = conversations_table(exports.decisions, exports.messages)
    cache = ResponseCache(config.resolved_cache_path)
    try:
        entry = config.annotation
        model = CachedModel(build_model(entry.config, budget), cache, namespace="annotation", on_reply=on_reply)
        table = machine_annotate(conversations, model=model, concurrency=entry.config.concurrency)
    finally:
        cache.close()
    path = config.run_dir / ANNOTATIONS_FILE
    pd.DataFrame(table).to_csv(path, index=False)
    return path
