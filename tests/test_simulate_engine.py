"""The simulation engine with a stand-in model and agent: design, scheduling, resume, cache.

The stand-ins answer deterministically from the request (so an interrupted-and-resumed run
must equal an uninterrupted one) and count every call that reaches the "provider".
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import pandas as pd
import pytest
from pydantic import BaseModel

from agents.simulate import design
from agents.simulate.backend import Backend
from agents.simulate.cache import CachedModel, ResponseCache, cache_scope
from agents.simulate.config import ModelEntry, SimulationConfig
from agents.simulate.runner import BudgetExceeded, plan_run, run_tournament
from agents.simulate.store import RunStore
from agents.types import CallRecord, ChatMessage, ModelReply, ModelSettings, TurnResult


class StandInModelConfig(BaseModel):
    provider: str = "simulated"
    model: str = "stand-in"
    price_per_call: float | None = 0.01


class CrashAfter(Exception):
    """Raised by the stand-in provider to kill a run halfway."""


class StandInModel:
    def __init__(self, config: StandInModelConfig, budget, *, crash_after: int | None = None,
                 latency: float = 0.0):
        self.settings = ModelSettings(provider=config.provider, model=config.model)
        self.config = config
        self.budget = budget
        self.crash_after = crash_after
        self.latency = latency
        self.requests: list[str] = []
        self.in_flight = self.peak_in_flight = 0

    async def complete(self, messages, *, deadline, options=None):
        if self.crash_after is not None and len(self.requests) >= self.crash_after:
            raise CrashAfter()
        request = json.dumps([[m.role, m.content] for m in messages])
        self.requests.append(request)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        await asyncio.sleep(self.latency)
        self.in_flight -= 1
        self.budget.spent += self.config.price_per_call or 0
        digest = int(hashlib.sha256(request.encode()).hexdigest(), 16)
        text = f"I DECIDE TO CHOOSE [{'AB'[digest % 2]}]" if "decide" in messages[-1].content else f"<hi {digest % 97}>"
        return ModelReply(status="ok", text=text, input_tokens=10, output_tokens=5, cost=self.config.price_per_call)


class StandInBudget:
    def __init__(self, limit):
        self.limit = limit
        self.spent = 0.0


class StandInAgent:
    def __init__(self, agent_id, persona, model, *, language="en", with_communication=True, seed=None,
                 memory=None):
        self.agent_id, self.persona, self.model = agent_id, persona, model
        self.language, self.with_communication, self.seed = language, with_communication, seed
        self.memory = memory or []

    async def _ask(self, round_number, turn, prompt):
        messages = [ChatMessage("system", f"{self.persona} {self.seed}"),
                    ChatMessage("user", f"{self.memory} {prompt}")]
        started = time.time()
        reply = await self.model.complete(messages, deadline=None)
        call = CallRecord(call_id=f"{self.agent_id}-{round_number}-{turn}", agent_id=self.agent_id,
                          round_number=round_number, turn=turn, attempt=1, provider="simulated",
                          model="stand-in", parameters={}, prompt_version="v", messages=[],
                          raw_reply=reply.text, parsed=reply.text, status=reply.status,
                          input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
        result = TurnResult(self.agent_id, round_number, turn, "ok", calls=[call], started_at=started,
                            finished_at=time.time())
        if turn == "decision":
            result.choice = reply.text[-2]
        else:
            result.text = reply.text.strip("<>")
        return result

    async def message_1(self, round_number, *, deadline):
        return await self._ask(round_number, "message_1", "write message 1")

    async def message_2(self, round_number, *, associate_message_1, deadline):
        return await self._ask(round_number, "message_2", f"they said {associate_message_1}")

    async def decide(self, round_number, *, associate_message_2=None, deadline):
        return await self._ask(round_number, "decision", f"they said {associate_message_2}; decide")

    def record_outcome(self, round_number, own_choice, associate_choice):
        self.memory.append([round_number, own_choice, associate_choice])

    def to_state(self):
        return {"agent_id": self.agent_id, "persona": self.persona, "language": self.language,
                "with_communication": self.with_communication, "seed": self.seed, "memory": self.memory}

    @classmethod
    def from_state(cls, state, model):
        state = dict(state)
        return cls(state.pop("agent_id"), state.pop("persona"), model, **state)


def stand_in_backend(models: list, **model_kwargs) -> Backend:
    def build(cfg, budget):
        model = StandInModel(cfg, budget, **model_kwargs)
        models.append(model)
        return model

    return Backend(
        build_model=build,
        new_budget=StandInBudget,
        new_agent=StandInAgent,
        restore_agent=StandInAgent.from_state,
        cost_of=lambda cfg, i, o: cfg.price_per_call,
        settings_of=lambda cfg: ModelSettings(provider=cfg.provider, model=cfg.model),
    )


def small_config(tmp_path: Path, **overrides) -> SimulationConfig:
    settings = dict(name="t", output_dir=tmp_path, group_size=2, rounds=2, repeats=1,
                    models=[ModelEntry(label="m1", config=StandInModelConfig())])
    settings.update(overrides)
    return SimulationConfig(**settings)


def run(config, backend):
    return asyncio.run(run_tournament(config, backend=backend, show_progress=False, log=lambda s: None))


def decisions(path: Path) -> pd.DataFrame:
    return pd.read_csv(path / "decisions.csv").drop(columns=["decided_at"])


# --- the design ---------------------------------------------------------------------------
def test_paper_design_counts_18000_calls_per_model(tmp_path):
    config = SimulationConfig(name="p", output_dir=tmp_path,
                              models=[ModelEntry(label="m", config=StandInModelConfig())])
    assert len(design.matchups(config.personas, self_play=True)) == 6
    assert design.games_per_model(config) == 3000
    plan = plan_run(config, stand_in_backend([]), RunStore(tmp_path / "p"))
    assert plan.calls_remaining == 18_000
    assert plan.cost_estimate == pytest.approx(180.0)


def test_each_agent_meets_every_other_once_per_matchup():
    unit = design.Unit("m", design.Matchup("fair", "fair"), 1)
    meetings = [(g.pair, g.index_b) for r in range(1, 11) for g in design.games_of_round(unit, r, 10)]
    assert len(meetings) == len(set(meetings)) == 100
    for r in range(1, 11):  # each agent plays exactly once per round
        round_games = design.games_of_round(unit, r, 10)
        assert sorted(g.index_b for g in round_games) == list(range(10))
    assert unit.agent_id("a", 3) == "fair-a3" and unit.agent_id("b", 3) == "fair-b3"


def test_config_rejects_more_rounds_than_associates(tmp_path):
    with pytest.raises(ValueError, match="rounds"):
        small_config(tmp_path, rounds=3)


# --- a run --------------------------------------------------------------------------------
def test_run_writes_lab_tables(tmp_path):
    models: list[StandInModel] = []
    result = run(small_config(tmp_path), stand_in_backend(models))
    # 3 personas: 6 matchups x 1 repeat x 2 rounds x 2 pairs = 24 games, 6 calls each
    assert result.games_played == 24 and result.calls == 144 == len(models[0].requests)
    table = pd.read_csv(tmp_path / "t" / "decisions.csv")
    assert len(table) == 48
    assert set(table["treatment"]) == {"A-A"} and set(table["source"]) == {"simulation"}
    assert set(table["session_code"]) == {"t-m1"}
    assert table.groupby("conversation_id").size().eq(2).all()
    assert set(table["associate_type"]) == {"cooperative", "fair", "selfish"}
    messages = pd.read_csv(tmp_path / "t" / "messages.csv")
    assert len(messages) == 96 and set(messages["stage"]) == {1, 2}
    calls = pd.read_csv(tmp_path / "t" / "llm_calls.csv")
    assert len(calls) == 144 and "prompt_version" in calls
    assert (tmp_path / "t" / "figures" / "S22_cooperation.png").exists()


def test_rounds_of_a_unit_run_in_order_and_units_run_at_once(tmp_path):
    models: list[StandInModel] = []
    config = small_config(tmp_path, repeats=2)
    run(config, stand_in_backend(models, latency=0.01))
    # every unit's first message-1 turns are in flight together: 12 units x 2 pairs x 2 agents
    assert models[0].peak_in_flight == 48
    records = list(RunStore(config.run_dir).read_games())
    for unit in {r["unit"] for r in records}:
        ordered = sorted((r for r in records if r["unit"] == unit), key=lambda r: r["finished_at"])
        assert [r["round"] for r in ordered] == sorted(r["round"] for r in ordered)
    # agents remember: in round 2 each agent's state holds round 1
    assert all(len(r["states"]["a"]["memory"]) == r["round"] for r in records)


def test_crashed_run_resumes_without_repeating_a_call(tmp_path):
    uninterrupted_models: list[StandInModel] = []
    run(small_config(tmp_path / "whole"), stand_in_backend(uninterrupted_models))
    total_calls = len(uninterrupted_models[0].requests)

    config = small_config(tmp_path / "crashed")
    first: list[StandInModel] = []
    with pytest.raises(BaseException) as crash:
        run(config, stand_in_backend(first, crash_after=total_calls // 2))
    assert crash.group_contains(CrashAfter) if hasattr(crash, "group_contains") else True
    played_before = len(list(RunStore(config.run_dir).read_games()))
    assert 0 < played_before < 24

    second: list[StandInModel] = []
    result = run(config, stand_in_backend(second))
    assert result.games_skipped == played_before
    # every request reached the provider exactly once over both attempts
    all_requests = first[0].requests + second[0].requests
    assert len(all_requests) == total_calls
    pd.testing.assert_frame_equal(
        decisions(tmp_path / "whole" / "t").drop(columns=["session_code", "conversation_id"]),
        decisions(config.run_dir).drop(columns=["session_code", "conversation_id"]))


def test_identical_rerun_is_served_from_the_cache(tmp_path):
    config = small_config(tmp_path)
    run(config, stand_in_backend([]))
    (config.run_dir / "games.jsonl").unlink()  # forget the games, keep the cache
    models: list[StandInModel] = []
    result = run(config, stand_in_backend(models))
    assert models[0].requests == [] and result.cache_hits == 144 and result.spent == 0
    # a new seed draws new samples
    models = []
    run(small_config(tmp_path, seed=1, name="t2", cache_path=config.resolved_cache_path),
        stand_in_backend(models))
    assert len(models[0].requests) == 144


def test_refuses_to_start_over_budget(tmp_path):
    models: list[StandInModel] = []
    with pytest.raises(BudgetExceeded):
        run(small_config(tmp_path, budget_usd=1.0), stand_in_backend(models))  # 144 x $0.01
    assert models == []
    run(small_config(tmp_path, budget_usd=2.0), stand_in_backend(models))
    assert RunStore(tmp_path / "t").spent() == pytest.approx(1.44)  # one line per paid call


def test_changed_design_is_refused_in_the_same_run_folder(tmp_path):
    run(small_config(tmp_path), stand_in_backend([]))
    with pytest.raises(RuntimeError, match="new name"):
        run(small_config(tmp_path, language="zh"), stand_in_backend([]))


def test_a_line_cut_by_a_kill_is_ignored_and_repaired(tmp_path):
    store = RunStore(tmp_path)
    store.append_game({"key": "g1"})
    store.close()
    with open(store.games_path, "a") as f:
        f.write('{"key": "g2", "cut')
    assert [r["key"] for r in store.read_games()] == ["g1"]
    store.append_game({"key": "g3"})
    store.close()
    assert [r["key"] for r in RunStore(tmp_path).read_games()] == ["g1", "g3"]


# --- the cache as a reusable wrapper ---------------------------------------------------------
def test_cache_gives_independent_samples_per_scope_and_replays_them(tmp_path):
    class Counter:
        settings = ModelSettings(provider="x", model="y")
        calls = 0

        async def complete(self, messages, *, deadline, options=None):
            Counter.calls += 1
            return ModelReply(status="ok", text=str(Counter.calls))

    async def ask(model, scope):
        with cache_scope(scope):
            return (await model.complete([ChatMessage("user", "same")], deadline=None)).text

    async def session():
        model = CachedModel(Counter(), ResponseCache(tmp_path / "c.sqlite"))
        return [await ask(model, "g1"), await ask(model, "g2"), await ask(model, "g1")]

    first = asyncio.run(session())
    assert first == ["1", "2", "3"]  # same prompt, three samples
    assert asyncio.run(session()) == first and Counter.calls == 3


def test_cache_does_not_keep_errors(tmp_path):
    class Failing:
        settings = ModelSettings(provider="x", model="y")
        calls = 0

        async def complete(self, messages, *, deadline, options=None):
            Failing.calls += 1
            return ModelReply(status="provider_error", error="500")

    async def session():
        model = CachedModel(Failing(), ResponseCache(tmp_path / "c.sqlite"))
        return await model.complete([ChatMessage("user", "q")], deadline=None)

    asyncio.run(session())
    asyncio.run(session())
    assert Failing.calls == 2


# --- counterfactual replay -------------------------------------------------------------------
def lab_export(folder: Path, session: str = "s1", treatment: str = "H-F") -> Path:
    """Two agents of an H-F session, two WC rounds each, one human message not sent in time (with
    ``treatment="H-H"`` the two are humans too)."""
    folder.mkdir()
    humans_only = treatment == "H-H"
    keys = dict(session_code=session, treatment=treatment, associate_type="human" if humans_only else "fair",
                label_setting="informed", game_order="WC-WoC", source="lab")
    associate_kind = "human" if humans_only else "agent"
    decisions, messages = [], []
    for r in (1, 2):
        for pair, (agent, human) in enumerate((("agent-1", "h1"), ("agent-2", "h2")) if r == 1
                                              else (("agent-1", "h2"), ("agent-2", "h1"))):
            cid = f"{session}-WC-r{r}-{pair}"
            for player, kind, other, other_kind, choice, other_choice in (
                    (agent, associate_kind, human, "human", "A", "B"), (human, "human", agent, associate_kind, "B", "A")):
                decisions.append({**keys, "game": "WC", "game_index": 1, "round": r, "player_code": player,
                                  "player_kind": kind, "persona": "fair" if kind == "agent" else "",
                                  "associate_code": other, "associate_kind": other_kind,
                                  "conversation_id": cid, "choice": choice, "timed_out": False,
                                  "associate_choice": other_choice, "payoff": 10, "associate_payoff": 80,
                                  "decided_at": 1.0})
                for stage in (1, 2):
                    late = kind == "human" and r == 2 and stage == 2
                    messages.append({**keys, "game": "WC", "round": r, "conversation_id": cid,
                                     "stage": stage, "sender_code": player, "sender_kind": kind,
                                     "receiver_code": other, "receiver_kind": other_kind,
                                     "text": "" if late else f"{player} says {stage}",
                                     "sent_in_time": not late, "stage_started_at": 1.0, "sent_at": 2.0,
                                     "unsent_draft": ""})
    pd.DataFrame(decisions).to_csv(folder / "decisions_export.csv", index=False)
    pd.DataFrame(messages).to_csv(folder / "chat_export.csv", index=False)
    return folder


def test_replay_shows_the_human_messages_to_a_new_agent(tmp_path):
    from agents.simulate.replay import replay_export

    models: list[StandInModel] = []
    outputs = asyncio.run(replay_export(small_config(tmp_path), lab_export(tmp_path / "export"),
                                        persona="selfish", backend=stand_in_backend(models),
                                        show_progress=False))
    comparison = pd.read_csv(outputs["m1:comparison"])
    assert len(comparison) == 4
    assert set(comparison["replay_persona"]) == {"selfish"} and set(comparison["original_choice"]) == {"A"}
    assert comparison["changed"].eq(comparison["replayed_choice"].ne("A")).all()
    replayed = pd.read_csv(outputs["m1:decisions"])
    assert set(replayed["source"]) == {"replay"} and set(replayed["player_code"]) == {"replay-agent-1", "replay-agent-2"}
    assert set(replayed["associate_choice"]) == {"B"}
    # the agent was shown what the human wrote, and nothing for a message not sent in time
    prompts = "\n".join(models[0].requests)
    assert "they said h1 says 1" in prompts and "they said None; decide" in prompts
    chat = pd.read_csv(outputs["m1:messages"])
    assert len(chat) == 16 and set(chat["sender_kind"]) == {"agent", "human"}
    # a rerun is served from the cache
    again: list[StandInModel] = []
    asyncio.run(replay_export(small_config(tmp_path), tmp_path / "export", persona="selfish",
                              backend=stand_in_backend(again), show_progress=False))
    assert again[0].requests == []


def one_choice_backend(models: list, choices: str) -> Backend:
    """Models that decide ``choices[i]`` for the i-th model built, whatever they are asked: two
    arms of identical settings (one model behind two endpoints) that answer differently."""
    answers = iter(choices)

    class OneChoice(StandInModel):
        def __init__(self, config, budget):
            super().__init__(config, budget)
            self.choice = next(answers)

        async def complete(self, messages, *, deadline, options=None):
            reply = await super().complete(messages, deadline=deadline, options=options)
            if "decide" in messages[-1].content:
                reply.text = f"I DECIDE TO CHOOSE [{self.choice}]"
            return reply

    def build(config, budget):
        models.append(OneChoice(config, budget))
        return models[-1]

    return dataclasses.replace(stand_in_backend(models), build_model=build)


def test_replay_arms_with_the_same_settings_get_their_own_answers(tmp_path):
    from agents.simulate.replay import replay_export

    arms = [ModelEntry(label="endpoint-a", config=StandInModelConfig()),
            ModelEntry(label="endpoint-b", config=StandInModelConfig())]
    config = small_config(tmp_path, models=arms)
    export = lab_export(tmp_path / "export")
    models: list[StandInModel] = []
    first = asyncio.run(replay_export(config, export, backend=one_choice_backend(models, "AB"), show_progress=False,
                                      log=lambda line: None))
    # each arm sent its own 2 agents x 2 rounds x 3 turns and kept its own answers
    assert [len(m.requests) for m in models] == [12, 12]
    assert {label: actual["calls"] for label, actual in first.actual.items()} == {"endpoint-a": 12, "endpoint-b": 12}
    a, b = (pd.read_csv(first[f"{label}:comparison"]) for label in ("endpoint-a", "endpoint-b"))
    assert set(a["replayed_choice"]) == {"A"} and set(b["replayed_choice"]) == {"B"}
    assert set(a["replay_model"]) == {"endpoint-a"} and set(b["replay_model"]) == {"endpoint-b"}
    # the same replay again: nothing sent, each arm's own answers from the cache
    again: list[StandInModel] = []
    second = asyncio.run(replay_export(config, export, backend=one_choice_backend(again, "AB"), show_progress=False,
                                       log=lambda line: None))
    assert [m.requests for m in again] == [[], []]
    pd.testing.assert_frame_equal(pd.read_csv(second["endpoint-a:comparison"]), a)
    pd.testing.assert_frame_equal(pd.read_csv(second["endpoint-b:comparison"]), b)


def test_every_replay_keeps_its_own_folder_and_tables(tmp_path):
    from agents.simulate.replay import replay_export

    config = small_config(tmp_path)
    export = lab_export(tmp_path / "export")
    first = asyncio.run(replay_export(config, export, backend=stand_in_backend([]), show_progress=False,
                                      log=lambda line: None))
    tables = first["m1:comparison"].parent
    written = {path: path.read_bytes() for path in tables.glob("*.csv")}
    assert set(pd.read_csv(first["m1:comparison"])["session_code"]) == {"s1"}
    # another export replayed with the same config, then the first again: the first replay's
    # tables stay as they were
    other = asyncio.run(replay_export(config, lab_export(tmp_path / "other", session="s2"),
                                      backend=stand_in_backend([]), show_progress=False, log=lambda line: None))
    again = asyncio.run(replay_export(config, export, backend=stand_in_backend([]), show_progress=False,
                                      log=lambda line: None))
    assert {path: path.read_bytes() for path in tables.glob("*.csv")} == written
    assert set(pd.read_csv(other["m1:comparison"])["session_code"]) == {"s2"}
    # each in a folder of its own, named by when, which export and which persona, saying what it replayed
    assert len({first.folder, other.folder, again.folder}) == 3
    assert sorted((config.run_dir / "replays").iterdir()) == sorted([first.folder, other.folder, again.folder])
    assert first.folder.name.endswith("-export-own-persona") and other.folder.name.endswith("-other-own-persona")
    assert tables == first.folder / "m1"
    described = json.loads((first.folder / "replay.json").read_text())
    assert described["export"] == str(export.resolve()) and list(described["models"]) == ["m1"]


def test_replay_refusals_are_one_line_and_exit_2(tmp_path, capsys):
    """An H-H export, an unknown persona, a path that is no export: one line on stderr, exit 2,
    nothing sent; a data package's zip is read as its folder."""
    import shutil

    from agents.simulate.__main__ import main

    root = Path(__file__).resolve().parent.parent
    config = tmp_path / "quick.toml"
    config.write_text((root / "configs" / "simulation_quick.toml").read_text()
                      .replace('output_dir = "sim_runs"', f'output_dir = "{tmp_path / "runs"}"'))
    cases = {
        "H-H": ([str(lab_export(tmp_path / "hh", treatment="H-H"))], "no agent played in it (an H-H session?)"),
        "persona": ([str(lab_export(tmp_path / "hf")), "--persona", "greedy"],
                    "unknown persona 'greedy': the personas are cooperative, fair, selfish"),
        "missing": ([str(tmp_path / "nowhere")], "no such file or folder"),
    }
    for case, (arguments, expected) in cases.items():
        assert main(["replay", str(config), *arguments, "--no-progress"]) == 2, case
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (case, err)
    assert not (tmp_path / "runs" / "quick" / "replays").exists()  # nothing replayed, no folder

    package = tmp_path / "lab_session_s1"
    shutil.copytree(tmp_path / "hf", package / "lab_session_s1")
    archive = shutil.make_archive(str(package), "zip", package)
    assert main(["replay", str(config), archive, "--no-progress"]) == 0
    out = capsys.readouterr().out
    [folder] = (tmp_path / "runs" / "quick" / "replays").iterdir()
    assert f"replay written to {folder}" in out and folder.name.endswith("-lab_session_s1-own-persona")
    assert len(pd.read_csv(folder / "simulated" / "comparison.csv")) == 4
