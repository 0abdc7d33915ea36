"""Bench: the full SI Note 4 design for one model against the local fake server.

1 s per reply and a concurrency limit of 64 make the ideal 64 calls per second; the bench prints
the achieved rate as a ratio to it. The whole design is 3000 games = 18,000 calls (~5 min at the
ideal rate); ``--repeats 1`` plays a fifth of it. The fake server runs in its own process, as a
provider would, so that its threads do not compete with the simulation for the interpreter.

    .venv/bin/python bench/simulate.py [--repeats N] [--latency S] [--concurrency C]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.simulate.config import ModelEntry, SimulationConfig  # noqa: E402
from agents.simulate.runner import run_tournament  # noqa: E402

KEY_ENV = "FAKE_LLM_BENCH_KEY"  # the fake server ignores keys; the SDK wants one
# Child process: start the server, print its URL, serve until stdin closes, print the peak.
SERVER_SCRIPT = """
import sys
from tests.fake_llm_server import FakeLLMServer
with FakeLLMServer(latency=float(sys.argv[1])) as server:
    print(server.base_url_openai, flush=True)
    sys.stdin.read()
    print(server.peak_in_flight, flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    os.environ[KEY_ENV] = "dummy"
    server = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(args.latency)], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as out:
            model = ModelEntry.from_table(dict(
                label="fake-gpt", provider="openai_compatible", model="fake-gpt", base_url=base_url,
                api_key_env=KEY_ENV, concurrency=args.concurrency, requests_per_minute=None,
                request_timeout=args.latency * 30))
            config = SimulationConfig(name="bench", output_dir=Path(out), models=[model], repeats=args.repeats)
            result = asyncio.run(run_tournament(config, show_progress=sys.stderr.isatty(), log=print))
        peak_in_flight, _ = server.communicate("")
    finally:
        server.kill()
    rate = result.calls / result.play_seconds
    ideal = args.concurrency / args.latency
    print(f"{result.games_played} games, {result.calls} calls ({result.failures} failed) in "
          f"{result.play_seconds:.1f} s; peak in flight at the server: {peak_in_flight.strip()}")
    print(f"achieved {rate:.1f} calls/s = {rate / ideal:.2f} x the ideal {ideal:.0f} calls/s "
          f"(concurrency {args.concurrency} / latency {args.latency:g} s)")
    return 0 if result.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
