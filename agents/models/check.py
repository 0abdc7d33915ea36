"""The model check: one real call before a session starts, its failure said in plain words."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass
from typing import Optional

from ..config import ModelConfig
from ..types import CallOptions, CallStatus, ChatMessage, LanguageModel, ModelReply
from .. import grammars
from .build import build_model
from .calls import redact

CHECK_PROMPT = "This is a connection test. Reply with the single word OK."
CHECK_SECONDS = 30.0
# The check's reply limit: "OK" is a token or two. Without it a small local model rambled to the
# session's llm_max_tokens and, on a busy CPU, past CHECK_SECONDS (the session was refused).
CHECK_TOKENS = 16
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
                                        deadline=time.monotonic() + min(seconds, cfg.request_timeout),
                                        options=CallOptions(max_tokens=CHECK_TOKENS))

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


@dataclass(frozen=True)
class ServerInspection:
    """What the model check learnt of an openai_compatible server beyond "it answers"."""

    grammar_format: Optional[str]  # the first of grammars.GRAMMAR_FORMATS the server obeyed, or None
    notes: tuple[str, ...] = ()  # what each grammar probe got, for the log


def _run_private(coroutine_factory) -> "ServerInspection":
    """Run ``coroutine_factory()`` on a private thread with its own loop (callable from anywhere);
    a failure is an inspection that found nothing."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(coroutine_factory()))
        except Exception as error:  # pragma: no cover - the layers turn errors into replies
            outcome.append(ServerInspection(None, (redact(repr(error)),)))

    worker = threading.Thread(target=run, name="agents-model-inspection")
    worker.start()
    worker.join()
    return outcome[0]


def inspect_server(cfg: ModelConfig, *, model: Optional[LanguageModel] = None,
                   seconds: float = CHECK_SECONDS) -> ServerInspection:
    """Once, at the model check of an openai_compatible server: which grammar field it obeys
    (a grammar that allows only ``grammars.PROBE_TEXT``, in each format in turn; a server that
    ignores or refuses the field answers something else). How fast it serves the session's
    prompts: agents/capacity.py."""
    model = model or build_model(cfg.model_copy(update={"constrained_output": "off"}))

    async def one(prompt: str, options: CallOptions) -> ModelReply:
        return await model.complete([ChatMessage("user", prompt)],
                                    deadline=time.monotonic() + min(seconds, cfg.request_timeout), options=options)

    async def inspect() -> ServerInspection:
        found, notes = None, []
        wanted = [cfg.grammar_format] if cfg.grammar_format else list(grammars.GRAMMAR_FORMATS)
        if cfg.constrained_output == "off":
            wanted = []  # nothing to find: the speed only
        for grammar_format in wanted:
            reply = await one(CHECK_PROMPT, CallOptions(fields=grammars.probe_fields(grammar_format),
                                                        max_tokens=16, temperature=0.0))
            obeyed = reply.status == CallStatus.OK.value and (reply.text or "").strip() == grammars.PROBE_TEXT
            notes.append(f"{grammar_format}: {'obeyed' if obeyed else reply.status} "
                         f"{(reply.text or reply.error or '')[:60]!r}")
            if obeyed:
                found = grammar_format
                break
        return ServerInspection(found, tuple(notes))

    return _run_private(inspect)


def resolve_constrained_output(cfg: ModelConfig, inspection: Optional[ServerInspection]) -> ModelConfig:
    """``cfg`` with ``constrained_output`` on or off and the server's grammar format: auto is on
    where the check found a format, off elsewhere (the cloud providers, no check)."""
    if cfg.provider != "openai_compatible":
        return cfg.model_copy(update={"constrained_output": "off" if cfg.constrained_output == "auto"
                                      else cfg.constrained_output})
    found = inspection.grammar_format if inspection is not None else None
    if cfg.constrained_output == "off" or (cfg.constrained_output == "auto" and found is None):
        return cfg.model_copy(update={"constrained_output": "off", "grammar_format": None})
    return cfg.model_copy(update={"constrained_output": "on", "grammar_format": found or cfg.grammar_format or "gbnf"})


def grammar_state(cfg: ModelConfig, inspection: Optional[ServerInspection]) -> str:
    """Whether the session's requests carry the paper's format as a grammar, and why (the pages
    and the manifest show it)."""
    resolved = resolve_constrained_output(cfg, inspection)
    if resolved.grammar():
        found = inspection.grammar_format if inspection is not None else None
        return (f"on ({found}): the server obeyed that grammar field at the model check" if found else
                f"on ({resolved.grammar()}): llm_constrained_output is on, not checked")
    if cfg.constrained_output == "off":
        return "off: llm_constrained_output is off"
    if cfg.provider != "openai_compatible":
        return f"off: {cfg.provider} takes no grammar"
    if inspection is None:
        return "off: no model check (llm_check_model is false), so auto stays off"
    return f"off: the server obeyed none of the grammar fields tried ({'; '.join(inspection.notes)})"
