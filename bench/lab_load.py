"""A lab of 72 against plain oTree: what the lab's pages cost the server and the participants.

Four runs, back to back, with the same client and think times, each on a fresh server
(``otree prodserver``, a separate process; the participants' client runs here):

1. plain oTree 6: a minimal prisoner's dilemma with the same pages (bench/plain_otree: message,
   read, message, read, decision, result, oTree WaitPages between; never a project app);
2. this project, H-H;
3. this project, H-F with instant agents (the real OpenAI SDK against the local fake server, which
   runs in a process of its own);
4. this project, H-F with agents whose model calls take --latency seconds.

Both games, --rounds rounds each (the project's runs play the two game apps of a
label-uninformed config, without instructions and questionnaires, as the baseline does).
Simulated participants use HTTP and, on wait pages, the page's websocket as a browser does.

The server runs in oTree's production mode, as a lab runs it. Per run: page response time
p50/p95/p99 (every request, redirects included; and the p95 past the session's start, from each
participant's first move on from RoundStart: the start is a burst of pages no agent takes part
in, alike in every run, that makes most of the slowest 5 %), server CPU seconds per
participant-round (utime+stime of the server process, from /proc), requests per participant-round,
landings on wait pages for an agent (and how many of them came although the
agent had answered before the request that landed there was sent, by its turn's finish time in
the database; answers that came while that request was in flight are counted apart: the page
gets the push as its socket joins), and the mean time humans waited for an agent per stage.
Printed last: the issue's ratios.

    .venv/bin/python bench/lab_load.py [--participants 72] [--rounds 2] [--latency 5] [--database-url URL]
                                       [--repeat N]

--repeat N plays the four runs N times, interleaved, and prints the median of each ratio over the
repetitions with its range (one repetition's p95 ratio moved between 0.83 and 1.22 in runs of the
same code on these machines).

With --database-url (a PostgreSQL server URL), every run gets a new database next to it, dropped
after the run.
LAB_BENCH_THINK_SCALE=0.2 shortens every think time (a quick smoke run; not for the figures).
--profile DIR samples each run's server with py-spy (``pip install py-spy``) into DIR/<run>.txt;
--trace DIR writes every page load of each run to DIR/<run>.csv, and the server's side of every
request (its wait for oTree's lock, its time holding it) and every full garbage collection to
DIR/<run>.server.csv (bench/server_trace.py).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

import websockets  # noqa: E402  (oTree's own websocket library)

from tests.fake_llm_server import FakeLLMServer  # noqa: E402
from tests.http_participant import PAGE_RE, HttpParticipant  # noqa: E402
from tests.lab_server import LabServer, make_project_copy  # noqa: E402

WAIT_SOCKET = re.compile(r'makeReconnectingWebSocket\("([^"]+)"\)')
# Seconds a person spends on each page (uniform ranges): long enough to write, read, decide.
THINK_SCALE = float(os.environ.get("LAB_BENCH_THINK_SCALE", "1"))
THINK = {"Message1": (8, 12), "Message2": (8, 12), "Read1": (3, 5), "Read2": (3, 5), "Decision": (5.5, 8),
         "Result": (1, 2)}
WAITS_FOR_ASSOCIATE = {"WaitMessage1", "WaitMessage2", "WaitDecision"}
TURN_OF_WAIT = {"WaitMessage1": "message_1", "WaitMessage2": "message_2", "WaitDecision": "decision"}
LIMITS = dict(message_1_seconds=60, read_1_seconds=30, message_2_seconds=60, read_2_seconds=30,
              decision_seconds=30, result_seconds=20)
CONFIG = "{}_uninformed_wc_first"
# The project's configs with only the two game apps (the baseline has no instructions either).
BENCH_SETTINGS = f"""
exec(compile(open({str(BENCH.parent / 'settings.py')!r}).read(), "settings.py", "exec"))
SESSION_CONFIGS = [dict(c, app_sequence=c["app_sequence"][1:3]) for c in SESSION_CONFIGS]
"""
# Both projects' settings (read by the server before it builds its app): with --trace, the
# server writes its own side of every request (bench/server_trace.py).
SERVER_TRACE_SETTINGS = f"""
import os as _os
if _os.environ.get("LAB_BENCH_SERVER_TRACE"):
    import sys as _sys
    _sys.path.insert(0, {str(BENCH)!r})
    import server_trace as _server_trace
    _server_trace.install(_os.environ["LAB_BENCH_SERVER_TRACE"])
"""


class BenchParticipant(HttpParticipant):
    """Thinks as a person would; waits on wait pages for the push on their websocket."""

    def play(self, timeout: float = 900):
        self.requests = 0
        self.trace = []  # (epoch sent, page, method, page landed on, redirects, seconds): --trace
        # (app, page, round, epoch time the request that landed there was sent, epoch time landed,
        # seconds waited)
        self.landings = []
        self.left_first_round_start = None  # epoch time: the session's start is behind
        rounds: dict[str, int] = {}
        deadline = time.monotonic() + timeout
        response = self._request("GET", self.url, "start")
        self.rng = random.Random(self.code)  # known now also to one who came by a study link (online)
        while time.monotonic() < deadline:
            match = PAGE_RE.search(response.url)
            if not match:  # past the last app (OutOfRangeNotification)
                self.done = True
                return self
            app, page = match["app"], match["page"]
            if page == "Lobby":  # online H-H (bench/online_load.py): until the cohort forms
                self.wait_in_lobby(response, deadline)
            if page in ("Message1",) or (page == "Decision" and "without" in app):
                rounds[app] = rounds.get(app, 0) + 1
            if page in WAITS_FOR_ASSOCIATE or page == "RoundStart":
                sent, landed, started = self.last_sent, time.time(), time.monotonic()
                moved_to = self.wait_on_wait_page(response)
                self.landings.append((app, page, rounds.get(app, 0), sent, landed, time.monotonic() - started))
                # As the page's script does: straight to the page the push names, else a reload.
                url = f"{self.base_url}/p/{self.code}/{moved_to}" if moved_to else response.url
                if page == "RoundStart" and self.left_first_round_start is None:
                    self.left_first_round_start = time.time()
                response = self._request("GET", url, page)
                continue
            time.sleep(THINK_SCALE * self.rng.uniform(*THINK.get(page, (0.2, 0.5))))
            response = self._request("POST", response.url, page, data=self.answer(page))
        raise AssertionError(f"participant {self.code} did not finish")

    def _request(self, method, url, page, **kwargs):
        self.last_sent = time.time()
        response = super()._request(method, url, page, **kwargs)
        self.requests += 1 + len(response.history)
        landed = PAGE_RE.search(response.url)
        self.trace.append((self.last_sent, page, method, landed["page"] if landed else "", len(response.history),
                           self.timings[-1].seconds))
        return response

    def wait_on_wait_page(self, response):
        """As the wait page does in a browser: wait for 'ready' on its websocket. Returns the
        page the push says this participant was moved to ('app/Page/index'), if it says."""
        socket_path = WAIT_SOCKET.search(response.text)
        if socket_path is None:
            return super().wait_on_wait_page(response)
        ws_url = self.base_url.replace("http://", "ws://") + socket_path.group(1).replace("&amp;", "&")
        return asyncio.run(_wait_for_ready(ws_url))


async def _wait_for_ready(ws_url: str, timeout: float = 300):
    async with websockets.connect(ws_url, max_size=None) as ws:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(await asyncio.wait_for(ws.recv(), timeout=deadline - time.monotonic()))
            if message.get("status") == "ready" or message.get("error"):
                return message.get("to")


# As a lab runs the server (docs/running-a-lab.md): oTree's production mode, which
# among other things leaves out the debug panel debug mode renders on every page.
PRODUCTION = dict(OTREE_PRODUCTION="1", OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD="bench-only",
                  OTREE_SECRET_KEY="bench-only", OTREE_REST_KEY="bench-only")


def create_session(server, config: str, participants: int, **config_fields) -> dict:
    """oTree's REST API, with the key production mode asks for."""
    import requests

    headers = {"otree-rest-key": PRODUCTION["OTREE_REST_KEY"]}
    response = requests.post(f"{server.base_url}/api/sessions", headers=headers, timeout=120, json=dict(
        session_config_name=config, num_participants=participants, modified_session_config_fields=config_fields))
    assert response.ok, f"{response.status_code}: {response.text[:500]}"
    response = requests.post(f"{server.base_url}/api/get_session/{response.json()['code']}", json={},
                             headers=headers, timeout=60)
    assert response.ok, f"{response.status_code}: {response.text[:500]}"
    return response.json()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from the kernel's accounting."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def turn_finish_times(database_url: str, workdir: Path) -> dict:
    """(participant code, app, round, turn kind) -> epoch time the agent's turn finished."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(database_url or f"sqlite:///{workdir / 'db.sqlite3'}")
    finished = {}
    with engine.connect() as connection:
        for app in ("game_with_chat", "game_without_chat"):
            rows = connection.execute(sqlalchemy.text(
                f"SELECT pa.code, pl.round_number, t.kind, t.finished_at FROM {app}_agentturn t "
                f"JOIN {app}_player pl ON t.player_id = pl.id JOIN otree_participant pa ON pl.participant_id = pa.id"))
            for code, round_number, kind, finished_at in rows:
                finished[(code, app, round_number, kind)] = finished_at
    engine.dispose()
    return finished


def plain_project(work: Path) -> Path:
    work.mkdir(parents=True)
    for entry in (BENCH / "plain_otree").iterdir():
        if entry.name not in ("__pycache__", "settings.py"):
            (work / entry.name).symlink_to(entry)
    settings = BENCH / "plain_otree" / "settings.py"
    (work / "settings.py").write_text(
        f"exec(compile(open({str(settings)!r}).read(), 'settings.py', 'exec'))\n" + SERVER_TRACE_SETTINGS)
    return work


def lab_project(work: Path) -> Path:
    make_project_copy(work)
    (work / "settings.py").unlink()
    (work / "settings.py").write_text(BENCH_SETTINGS + SERVER_TRACE_SETTINGS)
    return work


class FakeProviderProcess:
    """The fake model provider in a process of its own, as a real provider is on another
    machine: in the client's process its replies would take the GIL from the participants'
    threads and lengthen the response times measured there (H-F runs only)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def __enter__(self) -> "FakeProviderProcess":
        self._connection, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(
            target=_serve_fake_provider, args=(self.latency, child), daemon=True)
        self._process.start()
        self.base_url_openai = self._connection.recv()
        return self

    def __exit__(self, *exc_info) -> None:
        self._connection.send("stop")
        self.peak_in_flight = self._connection.recv() if self._connection.poll(10) else None
        self._process.join(timeout=10)


def _serve_fake_provider(latency: float, connection) -> None:
    with FakeLLMServer(latency=latency) as fake:
        connection.send(fake.base_url_openai)
        connection.recv()
        connection.send(fake.peak_in_flight)


def run(kind: str, participants: int, rounds: int, latency: float = 0.0, database_url: str = "",
        profile: str = "", trace: str = "") -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakeProviderProcess(latency) as fake:
        if kind == "plain":
            workdir, config, fields = plain_project(Path(tmp) / "plain"), "plain_pd", {}
        else:
            workdir = lab_project(Path(tmp) / "project")
            config = CONFIG.format(kind)
            fields = dict(language="en")
            if kind == "hf":
                # no model check: its capacity measurement is for a real server (the fake answers any
                # number of calls at once), and it would queue the calls one at a time (llm_concurrency)
                fields.update(llm_provider="openai_compatible", llm_model="fake-gpt", llm_base_url=fake.base_url_openai,
                              llm_api_key_env="FAKE_LLM_KEY", llm_requests_per_minute=6000, session_budget=0,
                              llm_check_model=False)
        server_trace = dict(LAB_BENCH_SERVER_TRACE=str(Path(trace).with_suffix(".server.csv"))) if trace else {}
        if trace:
            Path(trace).parent.mkdir(parents=True, exist_ok=True)
            Path(server_trace["LAB_BENCH_SERVER_TRACE"]).unlink(missing_ok=True)
        server = LabServer(workdir, database_url, FAKE_LLM_KEY="bench-dummy-key",
                           LAB_MAX_ROUNDS_PER_GAME=str(rounds), **server_trace, **PRODUCTION).start()
        try:
            session = create_session(server, config, participants, rounds_per_game=rounds, **LIMITS, **fields)
            players = [BenchParticipant(server.base_url, p["code"]) for p in session["participants"]]
            profiler = _start_profiler(server.process.pid, profile) if profile else None
            cpu_before, started = cpu_seconds(server.process.pid), time.monotonic()
            threads = [threading.Thread(target=p.play) for p in players]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            cpu, wall = cpu_seconds(server.process.pid) - cpu_before, time.monotonic() - started
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
                profiler.wait(timeout=60)
            unfinished = [p.code for p in players if not p.done]
            if unfinished:
                raise SystemExit(f"{len(unfinished)} participants did not finish; server log:\n{server.log()[-2000:]}")
            finished = turn_finish_times(database_url, workdir) if kind == "hf" else {}
        finally:
            server.stop()
    participant_rounds = participants * rounds * 2
    if trace:
        _write_trace(trace, players)
    times = sorted(t.seconds for p in players for t in p.timings)
    # The session's start (first page, GameIntro, into the first RoundStart) is a burst of pages
    # no agent takes part in, alike in every run: the p95 past it shows the rounds alone.
    past_start = sorted(seconds for p in players for sent, *_, seconds in p.trace
                        if sent >= (p.left_first_round_start or 0))
    slowest = [t for p in players for t in p.timings if t.seconds >= _percentile(times, 95)]
    slow_pages = collections.Counter(f"{t.page} {t.method}" for t in slowest).most_common(3)
    agent_waits = [(p.code, *landing) for p in players for landing in p.landings
                   if kind == "hf" and landing[1] in WAITS_FOR_ASSOCIATE]
    # Answered before the request was sent: the server knew, and should not have shown the page.
    # Answered while it was in flight: the page gets the push as its socket joins.
    answer_times = [(finished.get((code, app, round_number, TURN_OF_WAIT[page])) or 1e18, sent, landed)
                    for code, app, page, round_number, sent, landed, _ in agent_waits]
    already_answered = sum(1 for answered, sent, _ in answer_times if answered < sent)
    answered_in_flight = sum(1 for answered, sent, landed in answer_times if sent <= answered < landed)
    stages = participants * rounds * (3 + 1)  # agent stages per participant-round: 3 with chat, 1 without
    return dict(
        kind=kind, p50=_percentile(times, 50), p95=_percentile(times, 95), p99=_percentile(times, 99),
        p95_past_start=_percentile(past_start, 95),
        cpu_per_round=cpu / participant_rounds, requests_per_round=sum(p.requests for p in players) / participant_rounds,
        agent_wait_landings=len(agent_waits), landed_although_answered=already_answered,
        answered_in_flight=answered_in_flight,
        wait_per_stage=sum(w[-1] for w in agent_waits) / stages if kind == "hf" else None,
        wall=wall, slow_pages=slow_pages, times=times,
    )


def _write_trace(path: str, players) -> None:
    """Every page load of the run (a request and the redirects it followed), one CSV row each."""
    import csv

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["participant", "sent", "page", "method", "landed_on", "redirects", "seconds"])
        for p in players:
            writer.writerows([p.code, *row] for row in p.trace)


def _start_profiler(pid: int, path: str):
    """py-spy sampling the server (all threads; samples it judges idle left out, though a
    thread blocked in SQLite's commit still counts) into ``path``, in its collapsed-stack format:
    one line per stack, its sample count last."""
    import subprocess

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    py_spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen([str(py_spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                             "--nonblocking", "--output", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _percentile(values: list, q: float) -> float:
    return values[min(len(values) - 1, int(q / 100 * (len(values) - 1) + 0.5))]


def at_same_rank(times: list, baseline: list, q: float = 95) -> float:
    """``times``' q-th percentile over ``baseline``'s value with as many page loads above it:
    H-F skips the cheap wait-page loads H-H has, so its p95 falls deeper into the round starts'
    waves, which both runs have alike; at equal rank the loads compare like for like."""
    index = min(len(times) - 1, int(q / 100 * (len(times) - 1) + 0.5))
    above = len(times) - index
    return times[index] / baseline[max(0, len(baseline) - above)]


def bench_database(admin_url: str, label: str):
    """For PostgreSQL: a new database next to the one ``admin_url`` names, dropped afterwards
    (labserver.workdir.database_beside); for SQLite ('') nothing."""
    from labserver.workdir import database_beside

    return database_beside(admin_url, "bench_" + label)


def describe(label: str, r: dict) -> str:
    line = (f"{label:<28} page p50 {r['p50']:.3f} s  p95 {r['p95']:.3f} s  p99 {r['p99']:.3f} s  "
            f"(past the start {r['p95_past_start']:.3f} s)  server CPU {r['cpu_per_round']:.3f} s/participant-round  "
            f"{r['requests_per_round']:.1f} requests/participant-round")
    if r["kind"] == "hf":
        line += (f"  agent-wait landings {r['agent_wait_landings']} ({r['landed_although_answered']} after the agent "
                 f"had answered, {r['answered_in_flight']} answered while the request was in flight)  "
                 f"human wait {r['wait_per_stage']:.3f} s/stage")
    slow = ", ".join(f"{page} {n}" for page, n in r["slow_pages"])
    return line + f"  [{r['wall']:.0f} s; slowest 5 %: {slow}]"


def ratios(results: dict) -> dict:
    """The issue's ratios of one repetition (all four runs)."""
    plain, hh, hf, slow = (results[k] for k in ("plain", "hh", "hf", "hf-slow"))
    return {
        "p95 H-F / H-H (instant)": hf["p95"] / hh["p95"],
        "p95 H-F / H-H (slow)": slow["p95"] / hh["p95"],
        "CPU H-F / H-H (instant)": hf["cpu_per_round"] / hh["cpu_per_round"],
        "CPU H-F / H-H (slow)": slow["cpu_per_round"] / hh["cpu_per_round"],
        "CPU H-H / plain": hh["cpu_per_round"] / plain["cpu_per_round"],
        "same rank (instant)": at_same_rank(hf["times"], hh["times"]),
        "same rank (slow)": at_same_rank(slow["times"], hh["times"]),
        "past start (instant)": hf["p95_past_start"] / hh["p95_past_start"],
        "past start (slow)": slow["p95_past_start"] / hh["p95_past_start"],
        "landings (instant)": hf["landed_although_answered"],
        "landings (slow)": slow["landed_although_answered"],
        "wait (slow)": slow["wait_per_stage"],
    }


def _summary(values: list, digits: int = 2) -> str:
    """One repetition's value, or the median of several with their range."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--participants", type=int, default=72)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency", type=float, default=5.0)
    parser.add_argument("--database-url", default="", help="PostgreSQL server URL; default: SQLite in a temp folder")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="play the four runs N times, interleaved; the ratios are then medians over the "
                             "repetitions (range in brackets)")
    parser.add_argument("--profile", metavar="DIR", default="",
                        help="sample the server with py-spy (pip install py-spy) into DIR/<run>.txt")
    parser.add_argument("--trace", metavar="DIR", default="",
                        help="write every page load of each run to DIR/<run>.csv (sent, page, seconds, ...)")
    parser.add_argument("--only", choices=["plain", "hh", "hf", "hf-slow"], action="append",
                        help="run only these (repeatable); the ratios need all four")
    args = parser.parse_args()
    runs = {"plain": ("plain oTree", "plain", 0.0), "hh": ("project H-H", "hh", 0.0),
            "hf": ("project H-F, instant agents", "hf", 0.0),
            "hf-slow": (f"project H-F, {args.latency:g} s agents", "hf", args.latency)}
    repetitions = []
    for repetition in range(1, args.repeat + 1):
        # Interleaved (plain, H-H, H-F, H-F slow, plain, ...): a machine that slows down for a while
        # slows every kind of run alike.
        results = {}
        for key in args.only or list(runs):
            label, kind, latency = runs[key]
            name = key if args.repeat == 1 else f"{key}-{repetition}"
            profile = str(Path(args.profile) / f"{name}.txt") if args.profile else ""
            trace = str(Path(args.trace) / f"{name}.csv") if args.trace else ""
            with bench_database(args.database_url, name) as database_url:
                results[key] = run(kind, args.participants, args.rounds, latency, database_url, profile, trace)
            if args.repeat > 1:
                label = f"{label} [{repetition}/{args.repeat}]"
            print(describe(label, results[key]), flush=True)
        if len(results) == 4:
            repetitions.append(ratios(results))
    if not repetitions:
        return
    if args.repeat > 1:
        print(f"medians over {len(repetitions)} repetitions (range in brackets):")
    column = {name: [r[name] for r in repetitions] for name in repetitions[0]}
    latency = f"{args.latency:g} s"
    print(f"agent-wait landings after the agent had answered: {_summary(column['landings (instant)'], 0)} (instant), "
          f"{_summary(column['landings (slow)'], 0)} ({latency} agents); target 0")
    print(f"mean human wait per stage, {latency} agents: {_summary(column['wait (slow)'], 3)} s; target <= 0.1 s")
    print(f"H-F p95 / H-H at the same rank from the top (a diagnostic, not a target): "
          f"{_summary(column['same rank (instant)'])} (instant), {_summary(column['same rank (slow)'])} ({latency})")
    print(f"H-F p95 / H-H p95 past the session's start (a diagnostic, not a target): "
          f"{_summary(column['past start (instant)'])} (instant), {_summary(column['past start (slow)'])} ({latency})")
    print(f"ratios: H-F p95 / H-H p95 {_summary(column['p95 H-F / H-H (instant)'])} (instant), "
          f"{_summary(column['p95 H-F / H-H (slow)'])} ({latency}) [target <= 1.05];  CPU per participant-round "
          f"H-F / H-H {_summary(column['CPU H-F / H-H (instant)'])} (instant), "
          f"{_summary(column['CPU H-F / H-H (slow)'])} ({latency}) [target <= 1.1];  H-H / plain oTree "
          f"{_summary(column['CPU H-H / plain'])} [target <= 1.1]")


if __name__ == "__main__":
    main()
