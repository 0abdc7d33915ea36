"""A lab of 72: simulated participants (HTTP, plus a websocket on the agent-wait pages, as the
browser does) play an H-F session against agents whose model calls take 5 s (the real OpenAI
SDK against the local fake server), then the same with instant agents.

Prints the 95th-percentile page response time of each run, the time humans spent waiting for
an agent per stage (target 0 s while the model answers within the stage's time), and last the
p95 ratio loaded / instant.

The server runs with LAB_MAX_ROUNDS_PER_GAME = --rounds, so that, as in a 10-round session of
the paper, no request steps through unplayed rounds. The requests that move a participant into
the next app are reported apart (they do the most work: the next app's first page).

    .venv/bin/python bench/lab_load.py [--participants 72] [--rounds 2] [--latency 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import websockets  # noqa: E402  (oTree's own websocket library)

from tests.fake_llm_server import FakeLLMServer  # noqa: E402
from tests.http_participant import PAGE_RE, HttpParticipant  # noqa: E402
from tests.lab_server import LabServer, make_project_copy  # noqa: E402

LIVE_SOCKET = re.compile(r'id="otree-live"[^>]*data-socket-url="([^"]+)"')
WAIT_SOCKET = re.compile(r'makeReconnectingWebSocket\("([^"]+)"\)')
# Seconds a person spends on each page (uniform ranges): long enough to write, read, decide.
THINK = {"Message1": (8, 12), "Message2": (8, 12), "Read1": (3, 5), "Read2": (3, 5), "Decision": (5.5, 8),
         "Result": (1, 2)}


class BenchParticipant(HttpParticipant):
    """Waits on AgentWait pages through the page's live websocket, as the browser does."""

    def play(self, timeout: float = 900):
        self.rng = random.Random(self.code)
        self.think_seconds = lambda page: self.rng.uniform(*THINK.get(page, (0.2, 0.5)))
        return super().play(timeout)

    def wait_on_wait_page(self, response):
        """As oTree's wait page does in a browser: wait for 'ready' on its websocket."""
        socket_path = WAIT_SOCKET.search(response.text)
        if socket_path is None:
            return super().wait_on_wait_page(response)
        ws_url = self.base_url.replace("http://", "ws://") + socket_path.group(1).replace("&amp;", "&")
        asyncio.run(_wait_for(ws_url, lambda message: message.get("status") == "ready", send=None))

    def _request(self, method, url, page, **kwargs):
        response = super()._request(method, url, page, **kwargs)
        match = PAGE_RE.search(response.url)
        if match and match["page"].startswith("AgentWait"):
            started = time.monotonic()
            socket_path = LIVE_SOCKET.search(response.text)
            if socket_path:
                ws_url = self.base_url.replace("http://", "ws://") + socket_path.group(1).replace("&amp;", "&")
                asyncio.run(_wait_for(ws_url, lambda message: (message.get("live_method_payload") or {}).get("ready"),
                                      send={}))
            name = match["page"]
            self.waited[name] = self.waited.get(name, 0.0) + time.monotonic() - started
        return response


async def _wait_for(ws_url: str, is_ready, *, send, timeout: float = 300, ask_every: float = 0.7) -> None:
    """Open a page's websocket and return at the first 'ready' message; with ``send``, ask
    again every ``ask_every`` seconds after each answer, as the AgentWait page does."""
    async with websockets.connect(ws_url, max_size=None) as ws:
        if send is not None:
            await ws.send(json.dumps(send))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(await asyncio.wait_for(ws.recv(), timeout=deadline - time.monotonic()))
            if is_ready(message):
                return
            if send is not None:
                await asyncio.sleep(ask_every)
                await ws.send(json.dumps(send))


def run(latency: float, participants: int, rounds: int, database_url: str = "") -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(latency=latency) as fake:
        server = LabServer(make_project_copy(Path(tmp) / "project"), database_url, FAKE_LLM_KEY="bench-dummy-key",
                           LAB_MAX_ROUNDS_PER_GAME=str(rounds)).start()
        try:
            session = server.create_session(
                "hf_informed_wc_first", participants, rounds_per_game=rounds, language="en",
                llm_provider="openai_compatible", llm_model="fake-gpt", llm_base_url=fake.base_url_openai,
                llm_api_key_env="FAKE_LLM_KEY", llm_requests_per_minute=6000, session_budget=0)
            players = [BenchParticipant(server.base_url, p["code"]) for p in session["participants"]]
            started = time.monotonic()
            threads = [threading.Thread(target=p.play) for p in players]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.monotonic() - started
            unfinished = [p.code for p in players if not p.done]
            if unfinished:
                raise SystemExit(f"{len(unfinished)} participants did not finish; server log:\n{server.log()[-2000:]}")
            fallbacks = sum(d["timed_out"] == "True" for d in server.export(
                "payment", "custom_export_decisions", session["code"]) if d["player_kind"] == "agent")
        finally:
            server.stop()
        times = sorted(t.seconds for p in players for t in p.timings if not t.changed_app)
        transitions = sorted(t.seconds for p in players for t in p.timings if t.changed_app)
        waits: dict[str, list[float]] = {}
        for p in players:
            for page, seconds in p.waited.items():
                if page.startswith("AgentWait"):
                    waits.setdefault(page, []).append(seconds / rounds / 2 if page == "AgentWaitDecision"
                                                      else seconds / rounds)
        return dict(p95=times[int(0.95 * (len(times) - 1))], median=statistics.median(times), requests=len(times),
                    transition_p95=transitions[int(0.95 * (len(transitions) - 1))],
                    wall=wall, waits={page: statistics.mean(v) for page, v in waits.items()},
                    wait_max={page: max(v) for page, v in waits.items()}, peak=fake.peak_in_flight,
                    agent_fallbacks=fallbacks)


def _fresh_database(admin_url: str, label: str) -> str:
    """For PostgreSQL: a new database per run, next to the one ``admin_url`` names."""
    if not admin_url:
        return ""
    import psycopg2

    name = "lab_bench_" + re.sub(r"\W", "_", label)[:20] + f"_{int(time.time())}"
    connection = psycopg2.connect(admin_url)
    connection.autocommit = True
    connection.cursor().execute(f'CREATE DATABASE "{name}"')
    connection.close()
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--participants", type=int, default=72)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency", type=float, default=5.0)
    parser.add_argument("--database-url", default="",
                        help="an EMPTY PostgreSQL database per run is needed; default: SQLite in a temp folder")
    args = parser.parse_args()
    results = {}
    for label, latency in (("instant agents", 0.0), (f"agents taking {args.latency:g} s", args.latency)):
        result = run(latency, args.participants, args.rounds, _fresh_database(args.database_url, label))
        results[label] = result
        print(f"{label}: {result['requests']} page requests, p95 {result['p95'] * 1000:.0f} ms, "
              f"median {result['median'] * 1000:.0f} ms (into the next app: p95 {result['transition_p95']:.2f} s), "
              f"session {result['wall']:.0f} s, "
              f"peak model calls in flight {result['peak']}, agent fallbacks {result['agent_fallbacks']}")
        for page, seconds in sorted(result["waits"].items()):
            print(f"    human waiting for the agent on {page}: mean {seconds:.2f} s per round, "
                  f"max {result['wait_max'][page]:.2f} s")
    instant, loaded = results.values()
    print(f"p95 page response time, agents taking {args.latency:g} s / instant agents: "
          f"{loaded['p95'] / instant['p95']:.2f}")


if __name__ == "__main__":
    main()
