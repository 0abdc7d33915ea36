"""The model check: one real call before a session starts, its failure said in plain words."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Optional

from ..config import ModelConfig
from ..types import CallStatus, ChatMessage, LanguageModel, ModelReply
from .build import build_model
from .calls import redact

CHECK_PROMPT = "This is a connection test. Reply with the single word OK."
CHECK_SECONDS = 30.0
_PLAIN_STATUS = {
    CallStatus.CONFIG_ERROR.value: "the provider refused the key or does not know the model",
    CallStatus.PROVIDER_ERROR.value: "the provider could not be reached or answered with an error",
    CallStatus.TIMEOUT.value: "no answer in time",
    CallStatus.RATE_LIMITED.value: "the provider is rate-limiting this key",
    CallStatus.CONTEXT_OVERFLOW.value: "the model's context window is too small even for a test prompt",
    CallStatus.BUDGET.value: "the budget is spent",
}


def check_model(cfg: ModelConfig, *, seconds: float = CHECK_SECONDS,
                model: Optional[LanguageModel] = None) -> tuple[Optional[str], ModelReply]:
    """One real call with ``cfg``'s settings: (None, reply) when the model answered, else
    (a plain sentence naming the problem and the provider's own error, reply).

    Runs on a private thread with its own loop, so it may be called from a synchronous hook or
    from inside a running event loop (session creation). The simulated model passes trivially.
    """
    if cfg.provider == "simulated":
        return None, ModelReply(CallStatus.OK.value, text="OK")
    model = model or build_model(cfg)
    outcome: list[ModelReply] = []

    def run() -> None:
        async def one_call() -> ModelReply:
            return await model.complete([ChatMessage("user", CHECK_PROMPT)],
                                        deadline=time.monotonic() + min(seconds, cfg.request_timeout))

        try:
            outcome.append(asyncio.run(one_call()))
        except Exception as error:  # pragma: no cover - DeadlineGuard already turns errors into replies
            outcome.append(ModelReply(CallStatus.PROVIDER_ERROR.value, error=redact(repr(error))))

    worker = threading.Thread(target=run, name="agents-model-check")
    worker.start()
    worker.join()
    reply = outcome[0]
    if reply.status in (CallStatus.OK.value, CallStatus.LENGTH.value, CallStatus.REFUSAL.value):
        return None, reply  # the model answered: reachable, key and name accepted
    where = f" at {cfg.base_url}" if cfg.base_url else ""
    problem = _PLAIN_STATUS.get(reply.status, reply.status)
    error = re.sub(r"attempt \d+: \w+: ", "", reply.error or reply.status)  # the retry layer's bookkeeping
    return (f"the model check (one call to {cfg.provider} model {cfg.model!r}{where}) failed: {problem}. "
            f"Provider's error: {error}"), reply
