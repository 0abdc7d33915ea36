"""Zero wait: at a round start the participants' pages go before the agents' turns.

The request that completes a round's wait page starts every agent's first turn of the round,
and at that moment every other participant's page reloads. The turns' prompts and SDK calls
share the server process (and its GIL) with those pages, so these turns wait (bounded) until
page requests have left oTree's lock alone for a moment.
"""

import asyncio
import threading
import time

import otree.middleware
import pytest

from lab.agent_runtime import page_bursts
from lab.agent_runtime.engine import AgentEngine
from lab.agent_runtime.startup import freeze_heap


@pytest.fixture(autouse=True)
def fresh_lock(monkeypatch):
    """oTree's lock as the server has it, new for each test (an asyncio lock keeps to its loop)."""
    monkeypatch.setattr(otree.middleware, "lock2", asyncio.Lock())


def _with_queued_pages(check, hold_seconds: float = 0.0):
    """Run ``check()`` in another thread (as the agent engine does) while one task holds oTree's
    lock and another waits for it; the lock is released after ``hold_seconds``."""

    lock2 = otree.middleware.lock2

    async def scenario():
        await lock2.acquire()
        waiter = asyncio.ensure_future(lock2.acquire())
        await asyncio.sleep(0.01)  # the waiter is queued
        outcome = asyncio.get_running_loop().run_in_executor(None, check)
        if hold_seconds:
            await asyncio.sleep(hold_seconds)
        lock2.release()
        await waiter
        lock2.release()
        return await outcome

    return asyncio.run(scenario())


def test_pages_busy_reads_otrees_lock():
    assert page_bursts.pages_busy() is False
    assert _with_queued_pages(page_bursts.pages_busy) is True

    async def held():
        async with otree.middleware.lock2:  # one request being served, none waiting
            return await asyncio.get_running_loop().run_in_executor(None, page_bursts.pages_busy)

    assert asyncio.run(held()) is True
    assert page_bursts.pages_busy() is False


def test_a_turn_waits_for_queued_pages_and_goes_on_when_they_are_served():
    far_deadline = time.monotonic() + 600  # the bound is PAGE_BURST_MAX_DEFER_SECONDS

    def start_turn():
        return asyncio.run(page_bursts.yield_to_page_bursts(far_deadline))

    waited = _with_queued_pages(start_turn, hold_seconds=0.3)
    # until the queue was served and a quiet spell passed, not to the bound
    assert 0.3 + page_bursts.PAGE_BURST_QUIET_SECONDS - 0.05 <= waited < 1.2


def test_the_wait_is_bounded(monkeypatch):
    monkeypatch.setattr(page_bursts, "pages_busy", lambda: True)  # a queue that never empties
    now = time.monotonic()
    started = time.monotonic()
    assert asyncio.run(page_bursts.yield_to_page_bursts(now + 600)) < page_bursts.PAGE_BURST_MAX_DEFER_SECONDS + 0.2
    assert time.monotonic() - started >= page_bursts.PAGE_BURST_MAX_DEFER_SECONDS
    # a turn with 4 s left waits at most a twentieth of them
    assert asyncio.run(page_bursts.yield_to_page_bursts(time.monotonic() + 4)) < 0.2 + 0.1
    assert asyncio.run(page_bursts.yield_to_page_bursts(time.monotonic() - 1)) < 0.05  # past its deadline


def test_no_wait_without_queued_pages():
    assert threading.current_thread() is threading.main_thread()
    assert asyncio.run(page_bursts.yield_to_page_bursts(time.monotonic() + 600)) < 0.05


def test_many_waiting_turns_share_one_poll(monkeypatch):
    """A round start holds dozens of turns: they wait on one poll of the lock, not one each."""
    calls = []
    queue_until = time.monotonic() + 0.3

    def queued():
        calls.append(1)
        return time.monotonic() < queue_until

    monkeypatch.setattr(page_bursts, "pages_busy", queued)

    async def one_turn(deadline):
        waited = await page_bursts.yield_to_page_bursts(deadline)
        return waited, time.monotonic()

    async def round_start():
        deadline = time.monotonic() + 600
        return await asyncio.gather(*(one_turn(deadline) for _ in range(72)))

    turns = asyncio.run(round_start())
    # every turn went on after the queue was served and a quiet spell passed (its end, not its
    # wait: a turn started late on a busy machine waits less), and long before the bound
    assert all(ended >= queue_until + page_bursts.PAGE_BURST_QUIET_SECONDS for _, ended in turns)
    assert all(waited < page_bursts.PAGE_BURST_MAX_DEFER_SECONDS - 0.5 for waited, _ in turns)
    polls = (0.3 + page_bursts.PAGE_BURST_QUIET_SECONDS) / page_bursts.PAGE_BURST_POLL_SECONDS
    # a look per turn as it starts and as it wakes, and one poll for all (a quiet spell included)
    assert len(calls) < 2 * 72 + 2 * polls + 10


ROUND_START_SCRIPT = r"""
import asyncio, json, os, time
os.environ["OTREE_IN_MEMORY"] = "1"
from otree.main import setup
setup()
import otree.session
from otree.database import session_scope
from otree.middleware import lock2
from lab.agent_runtime.engine import ENGINE
from lab.agent_runtime.turns import turn_key
from lab.agent_runtime.waiting import wait_for_turn
import game_with_chat as wc

with session_scope():
    session = otree.session.create_session("hf_uninformed_wc_first", num_participants=4,
        modified_session_config_fields=dict(rounds_per_game=2, llm_provider="simulated", llm_simulated_latency=0))
    session_id = session.id
asyncio.run(lock2.acquire())  # a page request is being served
with session_scope():
    subsession = wc.Subsession.objects_get(session_id=session_id, round_number=1)
    keys = [turn_key(p, wc.TABLES, "message_1") for p in subsession.get_players()]
    wc.start_agent_turns(subsession)  # the round starts: every agent's first turn
futures = [ENGINE.future(key) for key in keys]
time.sleep(0.5)
done_while_busy = sum(f.done() for f in futures)
# oTree's bots wait for the turn in their wait page's request, holding the lock: the agent goes first
with session_scope():
    bot_player = wc.Subsession.objects_get(session_id=session_id, round_number=1).get_players()[0]
    started = time.monotonic()
    wait_for_turn(bot_player, wc.TABLES, "message_1", timeout=10)
    bot_waited = time.monotonic() - started
released = time.monotonic()
lock2.release()
for f in futures:
    f.result(timeout=10)
print("RESULT " + json.dumps(dict(turns=len(futures), done_while_busy=done_while_busy, bot_waited=bot_waited,
                                  after_release=time.monotonic() - released)))
"""


def test_a_rounds_first_turns_start_after_the_page_requests(project_copy):
    import json
    from tests import processes
    from tests.lab_server import PYTHON, lab_env

    out = processes.run([PYTHON, "-c", ROUND_START_SCRIPT], cwd=project_copy, env=lab_env(), capture_output=True,
                        text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    assert result["turns"] == 4
    assert result["done_while_busy"] == 0  # instant agents, yet none ran while a page held the lock
    assert result["bot_waited"] < 1.0  # not the bound (2 s): the lock's holder waits for the agent
    assert result["after_release"] < 3


def test_freeze_heap_leaves_what_is_loaded_out_of_full_collections():
    """The server calls it after starting and after building a session's model (a full
    collection's pause grows with everything alive, and it stops every page being served)."""
    import gc

    freeze_heap()
    assert gc.get_freeze_count() > 10_000  # oTree, SQLAlchemy, the project: all loaded here


def test_a_turns_answer_counts_from_the_moment_it_is_published():
    """Pages see a turn's answer as soon as the engine has it, not when the engine's loop gets
    round to completing the turn's future (at a round start, behind dozens of other replies)."""
    engine = AgentEngine()
    key = "S|WC|0|r1|message_1"
    answer = ("result", {"memory": 1})
    loop_busy = threading.Event()

    async def turn():
        engine.publish(key, answer)
        await asyncio.get_running_loop().run_in_executor(None, loop_busy.wait)
        return answer

    future = engine.submit(key, turn)
    deadline = time.monotonic() + 5
    while engine.outcome(key) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.outcome(key) == answer
    assert not future.done()
    loop_busy.set()
    assert future.result(timeout=5) == answer
    engine.forget(key)  # settled
    assert engine.outcome(key) is None
