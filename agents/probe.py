"""The agents page's "Test model" button: one first turn per persona, as the lab would ask it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from . import prompts
from .agent import PersonaAgent
from .models import redact
from .types import CallRecord, LanguageModel


def probe_personas(model: LanguageModel, *, language: str = "zh", with_communication: bool = True,
                   seconds: float = 60.0, concurrency: int = 1, experiment=None) -> list[dict[str, Any]]:
    """One first turn per persona (message 1, or the decision without chat), as the lab would
    ask it: what came back, what was parsed, status, latency and tokens, and the same for each
    attempt (``attempts``: the first ask and the re-ask apart). For the agents page's "Test
    model" button. At most ``concurrency`` personas at once (1: one after another, so a local
    server answering one request at a time is not asked three at once); each persona's
    ``seconds`` start when its turn begins. The personas and prompts of ``experiment`` (the
    session's; None: the paper's). Runs on a private thread with its own loop; never raises."""
    results: list[dict[str, Any]] = []
    personas = tuple(experiment.design.personas) if experiment is not None else tuple(prompts.PERSONA_NAMES)

    def attempt_row(call: CallRecord) -> dict[str, Any]:
        latency = call.time_done - call.time_sent if call.time_done and call.time_sent else None
        return dict(attempt=call.attempt, status=call.status, reply=call.raw_reply, parsed=call.parsed,
                    error=call.error, latency=latency, input_tokens=call.input_tokens,
                    output_tokens=call.output_tokens, temperature=call.parameters.get("temperature"),
                    constrained_output=call.parameters.get("constrained_output"))

    async def probe(persona: str) -> dict[str, Any]:
        agent = PersonaAgent(f"test-{persona}", persona, model, language=language,
                             with_communication=with_communication, seed=0, experiment=experiment)
        deadline = time.monotonic() + seconds
        if with_communication:
            turn = await agent.message_1(1, deadline=deadline)
        else:
            turn = await agent.decide(1, deadline=deadline)
        last = turn.calls[-1] if turn.calls else None
        latency = None
        if last is not None and last.time_done and turn.calls[0].time_sent:
            latency = last.time_done - turn.calls[0].time_sent
        return dict(persona=persona, status=turn.status, fallback_reason=turn.fallback_reason,
                    reply=last.raw_reply if last else None, reasoning=last.reasoning if last else None,
                    parsed=turn.text if with_communication else turn.choice,
                    latency=latency, calls=len(turn.calls),
                    input_tokens=sum(c.input_tokens or 0 for c in turn.calls),
                    output_tokens=sum(c.output_tokens or 0 for c in turn.calls),
                    error=last.error if last else None, flags=turn.flags,
                    attempts=[attempt_row(call) for call in turn.calls])

    async def probe_all() -> list[dict[str, Any]]:
        slots = asyncio.Semaphore(max(1, concurrency))

        async def in_turn(persona: str) -> dict[str, Any]:
            async with slots:
                return await probe(persona)

        return list(await asyncio.gather(*(in_turn(persona) for persona in personas)))

    def run() -> None:
        try:
            results.extend(asyncio.run(probe_all()))
        except Exception as error:  # a turn never raises; this covers a broken model object
            results.append(dict(persona="(all)", status="error", error=redact(f"{type(error).__name__}: {error}")))

    worker = threading.Thread(target=run, name="agents-probe")
    worker.start()
    worker.join()
    return results
