"""The similarity testbed offline: thresholds, prompts, parsing, config, the simulated model,
a whole run with its tables, the cache, stand-in models and the CLI."""

from __future__ import annotations

import asyncio
import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

import protocol
from agents.models import call_scope
from agents.similarity import parsing, prompts
from agents.similarity.__main__ import main, run_to_folder
from agents.similarity.config import SimilarityConfig, SimilarityResponse, SweepConfig, load_config
from agents.similarity.runner import Player, planned_calls, run
from agents.similarity.simulated import SimilaritySimulatedModel
from agents.similarity.tables import FILE_NAMES
from agents.similarity.threshold import (
    PrisonersDilemma, PublicGoodsGame, pd_threshold, pd_threshold_independent, pgg_threshold)
from agents.simulate.tables import CALL_COLUMNS
from agents.types import CallStatus, ModelReply, ModelSettings

ROOT = Path(__file__).resolve().parents[1]
TEXTBOOK = PrisonersDilemma(R=3, S=0, T=5, P=1)
CATEGORIES = [
    {"name": "individual_utility_maximization", "description": "own points"},
    {"name": "dominant_strategy", "description": "B pays more whatever the other does"},
    {"name": "altruism", "description": "cares about the other"},
]


def small_config(**overrides) -> SimilarityConfig:
    data = {
        "run_id": "t", "samples": 3,
        "models": [
            {"label": "sharp", "provider": "simulated", "model": "sharp",
             "similarity_response": {"midpoint": 50, "slope": 1.0}},
            {"label": "deaf", "provider": "simulated", "model": "deaf",
             "similarity_response": {"table": {0: 0.0, 100: 0.0}, "baseline_cooperation": 0.0}},
        ],
        "sweep": {"step": 25},
        "public_goods": {"step": 50, "groups": 2},
        "judge": {"model": {"provider": "simulated", "model": "judge-sim"}, "categories": CATEGORIES},
    }
    data.update(overrides)
    return SimilarityConfig(**data)


# --- the threshold ---------------------------------------------------------------------------
def test_paper_payoffs_come_from_protocol_and_give_70_percent():
    game = PrisonersDilemma.from_protocol()
    assert (game.R, game.S, game.T, game.P) == (
        protocol.PAYOFFS[("A", "A")][0], protocol.PAYOFFS[("A", "B")][0],
        protocol.PAYOFFS[("B", "A")][0], protocol.PAYOFFS[("B", "B")][0])
    assert pd_threshold(game) == pytest.approx(0.7)


def test_textbook_threshold_is_five_sevenths_and_separates_the_expected_payoffs():
    b = pd_threshold(TEXTBOOK)
    assert Fraction(b).limit_denominator(100) == Fraction(5, 7)
    cooperate, defect = TEXTBOOK.expected_payoffs(b)
    assert cooperate == pytest.approx(defect)
    above, below = TEXTBOOK.expected_payoffs(b + 0.01), TEXTBOOK.expected_payoffs(b - 0.01)
    assert above[0] > above[1] and below[0] < below[1]


def test_threshold_is_above_one_half_for_every_strict_dilemma():
    rng = random.Random(1)
    for _ in range(200):
        S, P, R, T = sorted(rng.sample(range(-50, 100), 4))
        assert pd_threshold(PrisonersDilemma(R=R, S=S, T=T, P=P)) > 0.5


def test_independent_baseline_reading():
    paper = PrisonersDilemma.from_protocol()
    assert pd_threshold_independent(paper, 0.0) == pytest.approx(0.5)  # otherwise it defects
    assert pd_threshold_independent(paper, 0.5) == pytest.approx(0.4)
    assert pd_threshold_independent(TEXTBOOK, 0.0) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        pd_threshold_independent(paper, 1.5)


def test_public_goods_threshold():
    assert pgg_threshold(PublicGoodsGame(3, 2.0, 20)) == pytest.approx(0.625)
    for n, m in ((3, 1.5), (3, 2.5), (5, 3.0)):
        game = PublicGoodsGame(n, m, 10)
        contribute, keep = game.expected_payoffs(pgg_threshold(game))
        assert contribute == pytest.approx(keep)
        contribute, keep = game.expected_payoffs(pgg_threshold(game) + 0.01)
        assert contribute > keep
    # two players: the PGG is a PD with R = m e, S = m e / 2, T = e + m e / 2, P = e
    m, e = 1.6, 10
    two = PublicGoodsGame(2, m, e)
    as_pd = PrisonersDilemma(R=two.payoff(True, 1), S=two.payoff(True, 0), T=two.payoff(False, 1),
                             P=two.payoff(False, 0))
    assert pgg_threshold(two) == pytest.approx(pd_threshold(as_pd)) == pytest.approx(1 / m)
    assert PublicGoodsGame(3, 2, 20).optimal_welfare == 120


@pytest.mark.parametrize("bad", [dict(R=3, S=0, T=2, P=1), dict(R=1, S=0, T=5, P=3)])
def test_a_table_that_is_no_dilemma_is_refused(bad):
    with pytest.raises(ValueError):
        PrisonersDilemma(**bad)
    with pytest.raises(ValidationError):
        small_config(payoffs=bad)


# --- prompts and parsing -------------------------------------------------------------------
def test_signal_statements_by_framing():
    game = PrisonersDilemma.from_protocol()
    similar = prompts.pd_prompt(game, "similar", 70.0).messages[-1].content
    dissimilar = prompts.pd_prompt(game, "dissimilar", 70.0).messages[-1].content
    noise = prompts.pd_prompt(game, "noise", 72.5).messages[-1].content
    none = prompts.pd_prompt(game, None, None).messages[-1].content
    assert "you are 70% similar to your co-player" in similar
    assert "you are 30% different from your co-player" in dissimilar and "similar to" not in dissimilar
    assert "72.5%" in noise and "drawn at random" in noise
    assert "signal" not in none.lower() and "%" not in none
    for text in (similar, none):
        assert "80, 10" in text and "I DECIDE TO CHOOSE [A]" in text  # payoffs from protocol


def test_prompt_version_hashes_the_templates_used():
    game = PrisonersDilemma.from_protocol()
    pd_version = prompts.pd_prompt(game, "similar", 10.0).version
    assert pd_version == prompts.pd_prompt(game, None, None).version
    assert pd_version != prompts.pgg_prompt(PublicGoodsGame(3, 2, 20), "similar", 10.0).version
    assert pd_version.startswith("similarity-")


def test_shipped_questions_and_the_rating_prompt():
    questions = prompts.load_questions(prompts.TEMPLATE_DIR.parents[1] / "agents/similarity/questions.toml")
    assert 20 <= len(questions) <= 30
    shown = [prompts.ShownAnswer(q.id, q.text, q.options, "A", "my reasons") for q in questions[:2]]
    with_reasons = prompts.rating_prompt(shown, show_reasoning=True).messages[-1].content
    without = prompts.rating_prompt(shown, show_reasoning=False).messages[-1].content
    assert "my reasons" in with_reasons and "my reasons" not in without
    assert "SIMILARITY:" in without


@pytest.mark.parametrize("reply, expected", [
    ("Both pay. I DECIDE TO CHOOSE [A]", "A"),
    ("<think>I DECIDE TO CHOOSE [B]? No.</think>I DECIDE TO CHOOSE [A]", "A"),  # drafts in <think> are no choice
    ("I must say I DECIDE TO CHOOSE [A] or [B]. I DECIDE TO CHOOSE [B]", "B"),  # the options restated
    ("I DECIDE TO CHOOSE [A] ... no, I DECIDE TO CHOOSE [B]", None),  # two choices: none, never the last
    ("I DECIDE TO CHOOSE [A]. Just kidding.", None),
])
def test_the_testbed_reads_a_choice_as_the_lab_does(reply, expected):
    from agents import parsing as lab_parsing

    assert parsing.parse_choice(reply) == lab_parsing.parse_choice(reply) == expected


def test_parsers():
    assert parsing.parse_choice("i decide to choose b") == "B"
    assert parsing.parse_choice("I pick A") is None
    assert parsing.reasoning_of("Because.\nI DECIDE TO CHOOSE [A]") == "Because."
    assert parsing.parse_answer("ANSWER: C", 3) == "C" and parsing.parse_answer("ANSWER: D", 3) is None
    assert parsing.parse_similarity("SIMILARITY: 85%") == 85.0
    assert parsing.parse_similarity("SIMILARITY: 185") is None
    known = ["altruism", "dominant_strategy"]
    assert parsing.parse_labels("LABELS: dominant_strategy, Altruism", known) == ["altruism", "dominant_strategy"]
    assert parsing.parse_labels("LABELS: NONE", known) == []
    assert parsing.parse_labels("LABELS: greed", known) is None


# --- config ----------------------------------------------------------------------------------
def test_shipped_configs_validate():
    quick = load_config(ROOT / "configs/similarity_quick.toml")
    assert all(m.is_simulated for m in quick.models) and quick.judge.model.is_simulated
    example = load_config(ROOT / "configs/similarity_example.toml")
    assert len(example.models) >= 3 and not any(m.is_simulated for m in example.models)
    assert len(example.judge.categories) >= 10


def test_config_errors():
    with pytest.raises(ValidationError, match="simulated"):
        small_config(models=[{"provider": "openai", "model": "gpt-4o", "similarity_response": {}}])
    with pytest.raises(ValidationError, match="unique"):
        small_config(models=[{"provider": "simulated", "model": "a"}, {"provider": "simulated", "model": "a"}])
    with pytest.raises(ValidationError, match="judge.model"):
        small_config(judge={"categories": CATEGORIES})
    with pytest.raises(ValidationError):
        small_config(sweep={"step": 10, "framings": ["similarish"]})
    assert SweepConfig(step=30).scores() == [0, 30, 60, 90, 100]


# --- the simulated model ------------------------------------------------------------------------
def _cooperation_share(response: SimilarityResponse, framing, score, n=300) -> float:
    model = SimilaritySimulatedModel(ModelSettings("simulated", "m", seed=0), response)
    messages = prompts.pd_prompt(PrisonersDilemma.from_protocol(), framing, score).messages

    async def draw() -> float:
        replies = []
        for i in range(n):
            with call_scope(f"s{i}"):
                replies.append(await model.complete(messages, deadline=math.inf))
        return sum(parsing.parse_choice(r.text) == "A" for r in replies) / n

    return asyncio.run(draw())


def test_simulated_response_follows_the_stated_score():
    response = SimilarityResponse(midpoint=60, slope=0.3, noise_weight=0.0, dissimilar_scale=1.0,
                                  baseline_cooperation=0.0)
    assert _cooperation_share(response, "similar", 10) < 0.05
    assert 0.4 < _cooperation_share(response, "similar", 60) < 0.6
    assert _cooperation_share(response, "similar", 100) > 0.95
    assert _cooperation_share(response, "dissimilar", 100) > 0.95  # shown as "0% different"
    assert _cooperation_share(response, "noise", 100) == 0.0
    assert _cooperation_share(response, None, None) == 0.0
    table = SimilarityResponse(table={0: 0.0, 50: 1.0, 100: 0.0})
    model = SimilaritySimulatedModel(ModelSettings("simulated", "m"), table)
    assert model.cooperation_probability(25) == pytest.approx(0.5)
    assert model.cooperation_probability(100) == 0.0


# --- a whole run -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("similarity")
    config = small_config()
    tables, written = run_to_folder(config, out)
    return config, out, tables, {name: pd.read_csv(path) for name, path in written.items() if name != "report"}


def test_every_experiment_has_its_rows(quick_run):
    config, _, tables, frames = quick_run
    decisions = frames["decisions"]
    assert set(decisions["experiment"]) == {"sweep", "baseline", "pgg", "exogenous", "endogenous"}
    sweep = decisions[decisions["experiment"] == "sweep"]
    assert len(sweep) == 2 * 3 * 5 * config.samples  # models x framings x points x samples
    assert set(sweep["framing"]) == {"similar", "dissimilar", "noise"}
    dissimilar = sweep[sweep["framing"] == "dissimilar"]
    assert (dissimilar["stated_number"] == 100 - dissimilar["similarity"]).all()
    assert (decisions["status"] == "ok").all() and decisions["choice"].isin(["A", "B"]).all()
    assert (decisions.loc[decisions["game"] == "pd", "threshold"] == 70.0).all()
    assert (decisions.loc[decisions["game"] == "pgg", "threshold"] == 62.5).all()
    # the sharp model follows the score, the deaf one never cooperates
    sharp = sweep[(sweep["model"] == "sharp") & (sweep["framing"] == "similar")]
    assert sharp.loc[sharp["similarity"] == 100, "cooperated"].all()
    assert not sharp.loc[sharp["similarity"] == 0, "cooperated"].any()
    assert not decisions.loc[decisions["model"] == "deaf", "cooperated"].any()


def test_grounded_scores_and_welfare(quick_run):
    _, _, _, frames = quick_run
    scores, welfare = frames["scores"], frames["welfare"]
    exogenous = scores[scores["kind"] == "exogenous"]
    assert len(exogenous) == 3  # sharp-sharp, sharp-deaf, deaf-deaf
    assert exogenous["score"].between(0, 100).all()
    endogenous = scores[scores["kind"] == "endogenous"]
    assert len(endogenous) == 2 * 4  # views x ordered (rater, target) pairs
    assert endogenous["exogenous_score"].notna().all()
    assert welfare["welfare_share"].between(0, 1).all()
    pgg = welfare[welfare["game"] == "pgg"]
    assert set(pgg["players"]) == {3}
    deaf = pgg[pgg["model"] == "deaf"]
    assert deaf["welfare_share"].tolist() == pytest.approx([0.5] * len(deaf))  # n e / (n m e)


def test_judge_labels_name_the_judge_on_every_row(quick_run):
    _, _, _, frames = quick_run
    labels = frames["judge_labels"]
    judged = frames["decisions"]["reasoning"].notna().sum()
    assert len(labels) == judged * len(CATEGORIES)
    assert (labels["judge_model"] == "judge-sim").all() and (labels["judge_provider"] == "simulated").all()
    assigned = labels.groupby("category")["assigned"].sum()
    assert assigned["dominant_strategy"] > 0 and assigned["altruism"] == 0


def test_every_call_is_on_the_record(quick_run):
    _, out, tables, frames = quick_run
    calls = frames["calls"]
    assert list(calls.columns) == CALL_COLUMNS
    assert (calls["treatment"] == "A-A").all() and (calls["source"] == "simulation").all()
    decisions, answers, scores = frames["decisions"], frames["answers"], frames["scores"]
    expected = len(decisions) + len(answers) + len(scores[scores["kind"] == "endogenous"]) \
        + frames["judge_labels"]["judge_call_id"].nunique()
    assert len(calls) == expected == tables.cache_misses
    assert calls["prompt_version"].str.startswith("similarity-").all()
    first = calls.iloc[0]
    assert json.loads(first["messages"])[0]["role"] == "system"
    assert json.loads(first["parameters"])["temperature"] == 1.0
    assert set(calls["call_id"]) >= set(decisions["call_id"])


def test_the_analysis_package_reads_llm_calls_and_nothing_else_as_lab_tables(quick_run):
    from analysis.load import load_exports

    _, out, _, frames = quick_run
    exports = load_exports(out)
    assert len(exports.llm_calls) == len(frames["calls"])
    assert exports.decisions.empty and exports.messages.empty


def test_an_identical_rerun_is_served_from_the_cache(quick_run, tmp_path):
    config, out, _, frames = quick_run
    again = run(config, out)
    assert again.cache_misses == 0 and again.cache_hits == len(frames["calls"])
    rerun = again.frames(config.run_id)["decisions"]
    key = ["scope", "choice"]
    assert sorted(map(tuple, rerun[key].values)) == sorted(map(tuple, frames["decisions"][key].values))
    fresh = run(config.model_copy(update={"seed": 1}), out)  # a new seed draws new samples
    assert fresh.cache_misses > 0


class MalformedModel:
    """A stand-in LanguageModel whose replies never hold a choice/answer/rating."""

    def __init__(self, name: str):
        self.settings = ModelSettings("openai", name, temperature=1.0)

    async def complete(self, messages, *, deadline, options=None):
        return ModelReply(CallStatus.OK.value, text="I would rather not say.", input_tokens=10, output_tokens=5)


class FailingModel(MalformedModel):
    async def complete(self, messages, *, deadline, options=None):
        return ModelReply(CallStatus.RATE_LIMITED.value, error="429 after retries")


def test_unusable_replies_are_recorded_not_raised(tmp_path):
    config = small_config(cache=False, judge={"enabled": False})
    builders = {"sharp": MalformedModel, "deaf": FailingModel}
    tables = run(config, tmp_path, builder=lambda spec, table, budget: Player(spec.label, builders[spec.label](spec.label)))
    frames = tables.frames(config.run_id)
    decisions = frames["decisions"]
    assert set(decisions.loc[decisions["model"] == "sharp", "status"]) == {"parse_error"}
    assert set(decisions.loc[decisions["model"] == "deaf", "status"]) == {"rate_limited"}
    assert decisions["choice"].isna().all()
    assert frames["scores"]["score"].isna().all()  # no answers, no ratings: no grounded games
    assert not (decisions["experiment"].isin(["exogenous", "endogenous"])).any()
    assert (frames["welfare"]["complete"] == False).all()  # noqa: E712 (pandas element-wise)
    assert set(frames["calls"]["status"]) == {"parse_error", "rate_limited"}


def test_the_report_shows_every_part(quick_run):
    _, out, _, _ = quick_run
    report = (out / "report.html").read_text()
    for title in ("b-similarity thresholds", "Cooperation vs similarity", "random noise",
                  "Grounded similarity", "Reasoning labels", "Public goods game", "judge-sim"):
        assert title in report
    assert report.count("data:image/png;base64") == 5
    assert len(list((out / "figures").glob("*.svg"))) == len(list((out / "figures").glob("*.png"))) == 5
    assert pd.read_csv(out / "similarity_label_counts.csv")["judge_model"].eq("judge-sim").all()


def test_cli_runs_the_quick_config(tmp_path, capsys):
    assert main([str(ROOT / "configs/similarity_quick.toml"), "--out", str(tmp_path), "--no-report"]) == 0
    for name in FILE_NAMES.values():
        assert (tmp_path / name).exists()
    assert "calls sent" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('run_id = "x"\nmodels = []\n')
    assert main([str(bad), "--out", str(tmp_path / "bad")]) == 2


@pytest.mark.parametrize("pairs", ["all", "cross", "self"])
def test_the_plan_counts_the_calls_a_run_makes(pairs, tmp_path):
    config = small_config(cache=False, grounding={"pairs": pairs})
    calls = run(config, tmp_path).frames(config.run_id)["calls"]
    assert planned_calls(config) == calls.groupby("model_label").size().to_dict()


def test_cli_estimate_runs_nothing(tmp_path, capsys):
    assert main([str(ROOT / "configs/similarity_example.toml"), "--out", str(tmp_path), "--estimate"]) == 0
    out = capsys.readouterr().out
    assert "GPT-4o: " in out and "calls" in out and "judge-gemini-2.5-pro" in out
    assert not any(tmp_path.iterdir())


# --- order, intervals, errors -------------------------------------------------------------------
def test_tables_are_written_in_a_fixed_order(tmp_path):
    config = small_config()
    first = run(config, tmp_path / "a").frames(config.run_id)["decisions"]
    second = run(config, tmp_path / "b").frames(config.run_id)["decisions"]
    keep = ["experiment", "game", "view", "model", "co_player", "framing", "similarity", "sample", "seat", "choice"]
    pd.testing.assert_frame_equal(first[keep], second[keep])
    sweep = first[(first["experiment"] == "sweep") & (first["model"] == "sharp") & (first["framing"] == "similar")]
    assert list(sweep["similarity"]) == sorted(sweep["similarity"])  # numbers sort as numbers


def test_cooperation_rates_have_wilson_intervals():
    from agents.similarity.report import cooperation_rates

    decisions = pd.DataFrame({"model": ["m"] * 10 + ["n"] * 10, "choice": ["B"] * 10 + ["A"] * 10})
    rates = cooperation_rates(decisions, ["model"]).set_index("model")
    # R: prop.test(0, 10, correct = FALSE)$conf.int -> 0.0000000 0.2775328
    assert (rates.loc["m", "ci_low"], rates.loc["m", "ci_high"]) == pytest.approx((0.0, 0.2775328), abs=1e-6)
    # R: prop.test(10, 10, correct = FALSE)$conf.int -> 0.7224672 1.0000000
    assert (rates.loc["n", "ci_low"], rates.loc["n", "ci_high"]) == pytest.approx((0.7224672, 1.0), abs=1e-6)


def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = tmp_path / "c.toml"
    config.write_text('run_id = "x"\nsamples = 1\n[[models]]\nprovider = "openai"\nmodel = "gpt-4o"\n')
    assert main([str(config), "--out", str(tmp_path / "out")]) == 2  # no API key in the environment
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    config.write_text('run_id = "x"\nbudget_usd = 1.0\n[[models]]\nprovider = "openai"\nmodel = "gpt-4-turbo"\n')
    assert main([str(config), "--out", str(tmp_path / "out")]) == 2  # a budget needs prices
    err = capsys.readouterr().err
    assert "gpt-4-turbo" in err and "price_input_per_mtok" in err and len(err.strip().splitlines()) == 1
    config.write_text('run_id = "x"\nsamples = = 1\n')
    assert main([str(config), "--out", str(tmp_path / "out")]) == 2
    assert "not valid TOML" in capsys.readouterr().err
