"""Bench: 72 agents take a turn at once against the fake server with 2 s latency.

A full lab (72 agent seats) asks its message-1 turns at the same moment, twice (a cold wave with
new clients and connections, then a warm one). Every turn goes through
the real OpenAI SDK, the rate limits, retries and the deadline guard to the local fake server
(``tests.fake_llm_server``, in this process), which answers each request after 2 s. The figure
(last line) is the cold wave's wall time as a ratio to one turn's latency: ~1.0 means the 72 calls ran concurrently, 72 would mean one
after another.

Run: ``.venv/bin/python bench/agent_turns.py [--agents 72] [--latency 2] [--provider openai|anthropic]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import protocol  # noqa: E402
from agents.agent import PersonaAgent  # noqa: E402
from agents.config import ModelConfig  # noqa: E402
from agents.models import build_model  # noqa: E402
from agents.types import TurnStatus  # noqa: E402
from tests.fake_llm_server import FakeLLMServer  # noqa: E402

KEY_ENV = "BENCH_FAKE_LLM_KEY"


async def one_wave(agents: list[PersonaAgent], round_number: int, deadline_seconds: float) -> tuple[int, float]:
    """All agents take message 1 at once; return (turns ok within the deadline, wall seconds)."""
    started = time.monotonic()
    deadline = started + deadline_seconds

    async def turn(agent: PersonaAgent) -> bool:
        result = await agent.message_1(round_number, deadline=deadline)
        return result.status == TurnStatus.OK.value and time.monotonic() <= deadline

    done = await asyncio.gather(*(turn(agent) for agent in agents))
    return sum(done), time.monotonic() - started


async def two_waves(agents: list[PersonaAgent], deadline_seconds: float) -> list[tuple[int, float]]:
    """Cold (new clients and connections, as a session's first turn) then warm (kept-alive connections)."""
    return [await one_wave(agents, round_number, deadline_seconds) for round_number in (1, 2)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=72)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    args = parser.parse_args()
    os.environ[KEY_ENV] = "dummy-bench-key"
    deadline_seconds = protocol.STAGE_LIMITS["message_1"]
    with FakeLLMServer(latency=args.latency) as server:
        cfg = ModelConfig(provider=args.provider, model="fake-model", api_key_env=KEY_ENV,
                          base_url=server.base_url_openai if args.provider == "openai" else server.base_url_anthropic)
        model = build_model(cfg)
        agents = [PersonaAgent(f"agent-{i}", protocol.PERSONAS[i % 3], model, seed=i) for i in range(args.agents)]
        (cold_done, cold_wall), (warm_done, warm_wall) = asyncio.run(two_waves(agents, deadline_seconds))
        print(f"provider {args.provider}, {args.agents} agents, server latency {args.latency:.1f} s, "
              f"deadline {deadline_seconds} s, peak requests in flight {server.peak_in_flight}")
    print(f"warm wave: {warm_done}/{args.agents} turns within the deadline, wall {warm_wall:.2f} s, "
          f"ratio {warm_wall / args.latency:.2f}")
    print(f"cold wave (first turn of a session): {cold_done}/{args.agents} turns completed within the deadline, "
          f"wall {cold_wall:.2f} s")
    print(f"wall time / one turn's latency: {cold_wall / args.latency:.2f}")


if __name__ == "__main__":
    main()
