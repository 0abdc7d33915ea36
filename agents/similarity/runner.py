"""The testbed: sweeps, baseline, framings, noise, grounded similarity, judge, public goods.

Every experiment is a list of independent calls gathered at once; the model wrappers of the
agents package bound concurrency and rate. Each call runs inside a *scope* naming its logical
place in the design (experiment, model, framing, score, sample...), which keys the simulation
lab's response cache: an identical rerun is served from the cache and costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pandas as pd

from agents.config import ModelConfig
from agents.models import Budget, build_model, call_scope
from agents.simulate.cache import CachedModel, ResponseCache, cache_scope
from agents.types import CallRecord, CallStatus, ModelSettings
from protocol import COOPERATE  # the prompts label cooperating / contributing A

from . import parsing, prompts
from .config import ModelSpec, SimilarityConfig
from .simulated import SimilaritySimulatedModel
from .tables import COLUMNS, llm_calls_frame, sort_rows
from .threshold import pd_threshold, pgg_threshold

PD_GAME_NAME = "prisoner's dilemma"
PGG_GAME_NAME = "public goods game"


@dataclass
class Player:
    """A model of the run: its label, the LanguageModel, and its config (for the price)."""

    label: str
    model: Any
    model_config: Any = None  # agents.config.ModelConfig, for the price; None = unpriced


# (model spec, its config table with the run's temperature and seed, budget) -> Player
ModelBuilder = Callable[[ModelSpec, dict[str, Any], Any], Player]


def build_player(spec: ModelSpec, table: dict[str, Any], budget: Any = None) -> Player:
    """The simulated provider is this package's model; any other goes through agents.models."""
    model_config = ModelConfig.build(**table)  # validates the table, also for "simulated"
    if spec.is_simulated:
        settings = ModelSettings(provider="simulated", model=model_config.model,
                                 temperature=model_config.temperature,
                                 max_tokens=model_config.max_tokens, seed=model_config.seed)
        return Player(spec.label, SimilaritySimulatedModel(settings, spec.similarity_response),
                      model_config)
    return Player(spec.label, build_model(model_config, budget=budget), model_config)


def _cost(player: Player, input_tokens: Optional[int], output_tokens: Optional[int]) -> Optional[float]:
    return player.model_config.cost(input_tokens, output_tokens) if player.model_config else None


@contextlib.contextmanager
def _scoped(name: str) -> Iterator[None]:
    with cache_scope(name), call_scope(name):
        yield


@dataclass
class Tables:
    """The run's tidy rows; ``frames()`` turns them into the output tables."""

    decisions: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    welfare: list[dict[str, Any]] = field(default_factory=list)
    judge_labels: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    thresholds: list[dict[str, Any]] = field(default_factory=list)
    cache_hits: int = 0  # replies served from the response cache (free)
    cache_misses: int = 0  # replies the providers were asked for

    def frames(self, run_id: str) -> dict[str, pd.DataFrame]:
        """The tables, rows in a fixed order (calls finish in any order; identical reruns must
        write identical files)."""
        frames = {name: sort_rows(name, pd.DataFrame(getattr(self, name), columns=columns))
                  for name, columns in COLUMNS.items()}
        frames["calls"] = llm_calls_frame(self.calls, run_id)
        return frames


@dataclass
class Reply:
    record: CallRecord
    text: Optional[str]


class SimilarityRun:
    def __init__(self, config: SimilarityConfig, players: list[Player], judge: Optional[Player] = None):
        self.config = config
        self.players = players
        self.judge = judge
        self.tables = Tables()
        self.pd = config.pd_game()
        self.pgg = config.public_goods.game() if config.public_goods.enabled else None
        self.questions = (prompts.load_questions(config.grounding.questions_path)
                          if config.grounding.enabled else [])

    # --- one call on the record ----------------------------------------------------------
    async def _ask(self, player: Player, prompt: prompts.Prompt, *, scope: str, turn: str,
                   game: str, parse: Callable[[Optional[str]], Any]) -> tuple[Reply, Any]:
        settings = player.model.settings
        with _scoped(f"{self.config.run_id}/{scope}"):
            reply = await player.model.complete(
                prompt.messages, deadline=time.monotonic() + self.config.call_timeout_s)
        parsed = parse(reply.text) if reply.status == CallStatus.OK.value else None
        status = reply.status
        if status == CallStatus.OK.value and parsed is None:
            status = CallStatus.PARSE_ERROR.value
        record = CallRecord(
            call_id=uuid.uuid4().hex, agent_id=player.label, round_number=1, turn=turn,
            attempt=1, provider=settings.provider, model=settings.model,
            parameters={"temperature": settings.temperature, "max_tokens": settings.max_tokens,
                        "seed": settings.seed},
            prompt_version=prompt.version,
            messages=[{"role": m.role, "content": m.content} for m in prompt.messages],
            raw_reply=reply.text, parsed=None if parsed is None else str(parsed), status=status,
            error=reply.error, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
            cost=reply.cost if reply.cost is not None else _cost(player, reply.input_tokens,
                                                                 reply.output_tokens),
            time_sent=reply.time_sent, time_first_byte=reply.time_first_byte,
            time_done=reply.time_done, retries=reply.retries,
            simulated=settings.provider == "simulated",
        )
        self.tables.calls.append({"game": game, "model_label": player.label, **record.to_dict()})
        return Reply(record, reply.text), parsed

    async def _decide(self, player: Player, *, game: str, experiment: str, framing: Optional[str],
                      similarity: Optional[float], sample: int, co_player: str = "", view: str = "",
                      group_id: str = "", seat: int = 0) -> dict[str, Any]:
        if game == "pd":
            prompt, threshold = prompts.pd_prompt(self.pd, framing, similarity), pd_threshold(self.pd)
        else:
            prompt, threshold = prompts.pgg_prompt(self.pgg, framing, similarity), pgg_threshold(self.pgg)
        framing_name = framing or "none"
        score_key = "" if similarity is None else prompts.format_percent(similarity)
        scope = "/".join([game, experiment, view, player.label, co_player, framing_name, score_key,
                          group_id, f"seat{seat}", f"s{sample}"])
        reply, choice = await self._ask(player, prompt, scope=scope, turn="decision",
                                        game=f"similarity_{game}", parse=parsing.parse_choice)
        stated = None if similarity is None else (100.0 - similarity if framing == "dissimilar" else similarity)
        row = {
            "session_code": self.config.run_id, "source": "simulation", "experiment": experiment,
            "game": game, "view": view, "model": player.label, "co_player": co_player,
            "framing": framing_name, "similarity": similarity, "stated_number": stated,
            "sample": sample, "group_id": group_id, "seat": seat, "choice": choice,
            "cooperated": None if choice is None else choice == COOPERATE,
            "status": reply.record.status, "reasoning": parsing.reasoning_of(reply.text),
            "threshold": round(100.0 * threshold, 4), "call_id": reply.record.call_id,
            "provider": reply.record.provider, "provider_model": reply.record.model,
            "prompt_version": reply.record.prompt_version, "scope": scope,
        }
        self.tables.decisions.append(row)
        return row

    # --- experiments ---------------------------------------------------------------------
    async def sweep(self) -> None:
        """Cooperation vs stated score per model and framing, and the no-signal baseline."""
        sweep = self.config.sweep
        conditions: list[tuple[Optional[str], Optional[float]]] = [
            (framing, score) for framing in sweep.framings for score in sweep.scores()]
        if sweep.baseline:
            conditions.append((None, None))
        await asyncio.gather(*(
            self._decide(player, game="pd", experiment="baseline" if framing is None else "sweep",
                         framing=framing, similarity=score, sample=sample)
            for player in self.players for framing, score in conditions
            for sample in range(self.config.samples)))

    async def public_goods(self) -> None:
        """Groups of ``players`` copies of one model, every member shown the same signal."""
        pgg_config = self.config.public_goods
        conditions: list[tuple[Optional[str], Optional[float]]] = [
            (framing, score) for framing in pgg_config.framings for score in pgg_config.scores()]
        if pgg_config.baseline:
            conditions.append((None, None))
        groups = pgg_config.groups or self.config.samples

        async def group(player: Player, framing: Optional[str], score: Optional[float], index: int) -> None:
            group_id = f"g{index}"
            rows = await asyncio.gather(*(
                self._decide(player, game="pgg", experiment="pgg", framing=framing, similarity=score,
                             sample=index, group_id=group_id, seat=seat)
                for seat in range(self.pgg.players)))
            self._add_welfare(rows, game="pgg", experiment="pgg", view="", model=player.label,
                              co_player=player.label, framing=framing or "none", similarity=score,
                              group_id=group_id)

        await asyncio.gather(*(group(player, framing, score, index) for player in self.players
                               for framing, score in conditions for index in range(groups)))

    def _add_welfare(self, rows: list[dict[str, Any]], *, game: str, experiment: str, view: str,
                     model: str, co_player: str, framing: str, similarity: Optional[float],
                     group_id: str) -> None:
        complete = all(r["choice"] is not None for r in rows)
        cooperators = sum(bool(r["cooperated"]) for r in rows) if complete else None
        if game == "pgg":
            optimum = self.pgg.optimal_welfare
            welfare = self.pgg.welfare(cooperators) if complete else None
        else:
            optimum = 2 * self.pd.R
            payoff = {(True, True): self.pd.R, (True, False): self.pd.S,
                      (False, True): self.pd.T, (False, False): self.pd.P}
            a, b = (bool(r["cooperated"]) for r in rows)
            welfare = payoff[(a, b)] + payoff[(b, a)] if complete else None
        self.tables.welfare.append({
            "session_code": self.config.run_id, "experiment": experiment, "game": game, "view": view,
            "model": model, "co_player": co_player, "framing": framing, "similarity": similarity,
            "group_id": group_id, "players": len(rows), "complete": complete,
            "cooperators": cooperators, "welfare": welfare, "optimal_welfare": optimum,
            "welfare_share": None if welfare is None else welfare / optimum,
        })

    def _pairs(self) -> list[tuple[Player, Player]]:
        mode = self.config.grounding.pairs
        if mode == "self":
            return [(p, p) for p in self.players]
        pairs = list(itertools.combinations_with_replacement(self.players, 2))
        return [(a, b) for a, b in pairs if a is not b] if mode == "cross" else pairs

    async def grounding(self) -> None:
        """Exogenous and endogenous similarity, each then fed into a game of the two models."""
        answers = await self._answer_questions()
        pairs = self._pairs()
        exogenous = {}
        for a, b in pairs:
            score = self._agreement(answers, a.label, b.label)
            exogenous[(a.label, b.label)] = score
            self.tables.scores.append({
                "session_code": self.config.run_id, "kind": "exogenous", "view": "",
                "rater": "", "model": a.label, "co_player": b.label, "score": score, "sample": 0,
                "status": CallStatus.OK.value if score is not None else "no_answers",
                "call_id": None, "exogenous_score": score})
        endogenous = await self._rate_similarity(answers, pairs, exogenous)

        games = [self._pair_game(a, b, "exogenous", "", exogenous[(a.label, b.label)],
                                 exogenous[(a.label, b.label)]) for a, b in pairs]
        for view in self.config.grounding.endogenous_views:
            games += [self._pair_game(a, b, "endogenous", view, endogenous.get((view, a.label, b.label)),
                                      endogenous.get((view, b.label, a.label))) for a, b in pairs]
        await asyncio.gather(*games)

    async def _answer_questions(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """answers[model][question id] = one row per sample."""
        async def answer(player: Player, question: prompts.Question, sample: int) -> None:
            reply, letter = await self._ask(
                player, prompts.question_prompt(question), scope=f"question/{player.label}/{question.id}/s{sample}",
                turn="question", game="similarity_questions",
                parse=lambda text: parsing.parse_answer(text, len(question.options)))
            self.tables.answers.append({
                "session_code": self.config.run_id, "model": player.label, "question_id": question.id,
                "category": question.category, "sample": sample, "answer": letter,
                "status": reply.record.status, "reasoning": parsing.reasoning_of(reply.text),
                "call_id": reply.record.call_id})

        await asyncio.gather(*(answer(p, q, s) for p in self.players for q in self.questions
                               for s in range(self.config.grounding.answer_samples)))
        answers: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for row in sorted(self.tables.answers, key=lambda r: r["sample"]):
            answers.setdefault(row["model"], {}).setdefault(row["question_id"], []).append(row)
        return answers

    @staticmethod
    def _agreement(answers: dict, model_a: str, model_b: str) -> Optional[float]:
        """Percent agreement on the question set: per question, the share of agreeing answer
        pairs (distinct samples when a model meets itself), averaged over questions."""
        shares = []
        for question_id, rows_a in answers.get(model_a, {}).items():
            letters_a = [r["answer"] for r in rows_a if r["answer"]]
            letters_b = [r["answer"] for r in answers.get(model_b, {}).get(question_id, []) if r["answer"]]
            if model_a == model_b:
                pairs = list(itertools.combinations(letters_a, 2))
            else:
                pairs = list(itertools.product(letters_a, letters_b))
            if pairs:
                shares.append(sum(x == y for x, y in pairs) / len(pairs))
        return round(100.0 * sum(shares) / len(shares), 2) if shares else None

    async def _rate_similarity(self, answers: dict, pairs: list[tuple[Player, Player]],
                               exogenous: dict) -> dict[tuple[str, str, str], Optional[float]]:
        """Each model of a pair reads the other's first answers and rates their similarity."""
        by_label = {p.label: p for p in self.players}
        ordered = sorted({(a.label, b.label) for a, b in pairs} | {(b.label, a.label) for a, b in pairs})

        async def rate(rater: Player, target: Player, view: str, sample: int) -> tuple[str, str, str, Optional[float]]:
            shown = []
            for question in self.questions:
                rows = [r for r in answers.get(target.label, {}).get(question.id, []) if r["answer"]]
                if rows:
                    shown.append(prompts.ShownAnswer(question.id, question.text, question.options,
                                                     rows[0]["answer"], rows[0]["reasoning"]))
            prompt = prompts.rating_prompt(shown, show_reasoning=view == "answers_and_reasoning")
            reply, score = await self._ask(
                rater, prompt, scope=f"rating/{view}/{rater.label}/{target.label}/s{sample}",
                turn="similarity_rating", game="similarity_rating", parse=parsing.parse_similarity)
            exo = exogenous.get((rater.label, target.label), exogenous.get((target.label, rater.label)))
            self.tables.scores.append({
                "session_code": self.config.run_id, "kind": "endogenous", "view": view,
                "rater": rater.label, "model": rater.label, "co_player": target.label, "score": score,
                "sample": sample, "status": reply.record.status, "call_id": reply.record.call_id,
                "exogenous_score": exo})
            return view, rater.label, target.label, score

        results = await asyncio.gather(*(
            rate(rater, target, view, sample) for view in self.config.grounding.endogenous_views
            for rater, target in ((by_label[r], by_label[t]) for r, t in ordered) for sample in range(self.config.grounding.rating_samples)))
        collected: dict[tuple[str, str, str], list[float]] = {}
        for view, rater, target, score in results:
            if score is not None:
                collected.setdefault((view, rater, target), []).append(score)
        return {key: round(sum(v) / len(v), 2) for key, v in collected.items()}

    async def _pair_game(self, a: Player, b: Player, experiment: str, view: str,
                         score_a: Optional[float], score_b: Optional[float]) -> None:
        """Both models play with the similarity each was given; sample i meets sample i."""
        if score_a is None or score_b is None:
            return  # no usable score (every answer or rating failed): the game cannot be framed

        async def pair(sample: int) -> None:
            group_id = f"{a.label}~{b.label}"
            rows = await asyncio.gather(
                self._decide(a, game="pd", experiment=experiment, view=view, framing="similar",
                             similarity=score_a, sample=sample, co_player=b.label, group_id=group_id, seat=0),
                self._decide(b, game="pd", experiment=experiment, view=view, framing="similar",
                             similarity=score_b, sample=sample, co_player=a.label, group_id=group_id, seat=1))
            self._add_welfare(list(rows), game="pd", experiment=experiment, view=view, model=a.label,
                              co_player=b.label, framing="similar", similarity=(score_a + score_b) / 2,
                              group_id=f"{group_id}/s{sample}")

        await asyncio.gather(*(pair(sample) for sample in range(self.config.samples)))

    async def label_reasoning(self) -> None:
        """The judge labels each decision's chain of thought with the configured categories."""
        judge_config = self.config.judge
        categories = judge_config.categories
        names = [c.name for c in categories]
        decisions = [r for r in self.tables.decisions
                     if r["choice"] is not None and r["reasoning"]]
        decisions.sort(key=lambda r: r["scope"])
        if judge_config.max_decisions and len(decisions) > judge_config.max_decisions:
            decisions = sorted(random.Random(self.config.seed).sample(decisions, judge_config.max_decisions),
                               key=lambda r: r["scope"])
        judge = self.judge

        async def label(decision: dict[str, Any]) -> None:
            game_name = PD_GAME_NAME if decision["game"] == "pd" else PGG_GAME_NAME
            prompt = prompts.judge_prompt(game_name, decision["choice"], decision["reasoning"], categories)
            reply, labels = await self._ask(judge, prompt, scope=f"judge/{decision['scope']}",
                                            turn="judge", game="similarity_judge",
                                            parse=lambda text: parsing.parse_labels(text, names))
            for name in names:
                self.tables.judge_labels.append({
                    "session_code": self.config.run_id, "decision_call_id": decision["call_id"],
                    "experiment": decision["experiment"], "game": decision["game"],
                    "view": decision["view"], "model": decision["model"],
                    "framing": decision["framing"], "similarity": decision["similarity"],
                    "choice": decision["choice"], "category": name,
                    "assigned": None if labels is None else name in labels,
                    "judge_label": judge.label, "judge_provider": reply.record.provider,
                    "judge_model": reply.record.model, "judge_status": reply.record.status,
                    "judge_call_id": reply.record.call_id})

        await asyncio.gather(*(label(d) for d in decisions))

    def _thresholds(self) -> None:
        rows = [{"game": "pd", "parameters": f"R={self.pd.R:g} S={self.pd.S:g} T={self.pd.T:g} P={self.pd.P:g}",
                 "threshold": pd_threshold(self.pd)}]
        if self.pgg:
            rows.append({"game": "pgg", "parameters": f"n={self.pgg.players} m={self.pgg.multiplier:g} "
                                                      f"e={self.pgg.endowment:g}",
                         "threshold": pgg_threshold(self.pgg)})
        self.tables.thresholds = [{"session_code": self.config.run_id, **r,
                                   "threshold_percent": round(100 * r["threshold"], 4)} for r in rows]

    async def run(self) -> Tables:
        self._thresholds()
        phases = [self.sweep()]
        if self.pgg:
            phases.append(self.public_goods())
        if self.config.grounding.enabled:
            phases.append(self.grounding())
        await asyncio.gather(*phases)
        if self.config.judge.enabled and self.judge is not None:
            await self.label_reasoning()
        return self.tables


def _player_table(config: SimilarityConfig, spec: ModelSpec, *, is_judge: bool) -> dict[str, Any]:
    table = dict(spec.table)
    table.setdefault("seed", config.seed)
    if not is_judge and config.temperature != "per_model":
        table["temperature"] = config.temperature  # "N samples per point at a set temperature"
    return table


@dataclass
class BuiltModels:
    players: list[Player]
    judge: Optional[Player]
    cache: Optional[ResponseCache]

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    def count_cache_use(self, tables: Tables) -> None:
        for player in self.players + ([self.judge] if self.judge else []):
            tables.cache_hits += getattr(player.model, "hits", 0)
            tables.cache_misses += getattr(player.model, "misses", 0)


def build_models(config: SimilarityConfig, out_dir: Path, *,
                 builder: Optional[ModelBuilder] = None) -> BuiltModels:
    """Players (and the judge) built once, each wrapped in the response cache when enabled."""
    builder = builder or build_player
    budget = Budget(config.budget_usd) if config.budget_usd is not None else None
    cache = ResponseCache(config.cache_path or out_dir / "cache.sqlite") if config.cache else None

    def make(spec: ModelSpec, is_judge: bool) -> Player:
        player = builder(spec, _player_table(config, spec, is_judge=is_judge), budget)
        if cache is not None:
            player.model = CachedModel(player.model, cache, namespace=str(config.seed))
        return player

    players = [make(spec, False) for spec in config.models]
    judge = make(config.judge.model, True) if config.judge.enabled and config.judge.model else None
    return BuiltModels(players, judge, cache)


def run(config: SimilarityConfig, out_dir: Path, *,
        builder: Optional[ModelBuilder] = None) -> Tables:
    """Run every experiment of the config and return the tables (nothing written yet)."""
    models = build_models(config, out_dir, builder=builder)
    try:
        tables = asyncio.run(SimilarityRun(config, models.players, models.judge).run())
        models.count_cache_use(tables)
        return tables
    finally:
        models.close()


# Rough tokens of one call (prompt in, reasoning out) for the cost estimate before a run.
ESTIMATED_INPUT_TOKENS = 400
ESTIMATED_OUTPUT_TOKENS = 500


def planned_calls(config: SimilarityConfig) -> dict[str, int]:
    """First asks per model label (the judge: at most), for ``--estimate`` and budgeting."""
    n_models = len(config.models)
    decisions = len(config.sweep.framings) * len(config.sweep.scores()) * config.samples
    decisions += config.samples if config.sweep.baseline else 0
    pgg = config.public_goods
    if pgg.enabled:
        points = len(pgg.framings) * len(pgg.scores()) + (1 if pgg.baseline else 0)
        decisions += points * (pgg.groups or config.samples) * pgg.players
    other_calls = 0
    grounding = config.grounding
    if grounding.enabled:
        questions = len(prompts.load_questions(grounding.questions_path))
        partners = {"all": n_models, "cross": n_models - 1, "self": 1}[grounding.pairs]
        seats = {"all": n_models + 1, "cross": n_models - 1, "self": 2}[grounding.pairs]
        views = len(grounding.endogenous_views)
        other_calls = questions * grounding.answer_samples + views * partners * grounding.rating_samples
        decisions += (1 + views) * seats * config.samples
    calls = {spec.label: decisions + other_calls for spec in config.models}
    if config.judge.enabled and config.judge.model is not None:
        judged = decisions * n_models
        calls[config.judge.model.label] = min(judged, config.judge.max_decisions or judged)
    return calls


def estimated_cost(config: SimilarityConfig) -> dict[str, Optional[float]]:
    """USD per model label at the rough token counts above; None when a price is unknown."""
    specs = {spec.label: spec for spec in config.models}
    if config.judge.enabled and config.judge.model is not None:
        specs[config.judge.model.label] = config.judge.model
    costs = {}
    for label, calls in planned_calls(config).items():
        one = ModelConfig.build(**specs[label].table).cost(ESTIMATED_INPUT_TOKENS, ESTIMATED_OUTPUT_TOKENS)
        costs[label] = None if one is None else calls * one
    return costs
