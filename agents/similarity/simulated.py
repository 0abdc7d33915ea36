"""An offline LanguageModel for the similarity testbed: it reads its prompt and answers.

The agents package's simulated provider plays the lab's personas; this one knows the
testbed's five prompts (game decision, question, similarity rating, judge) and answers each
from a configurable ``SimilarityResponse``: P(cooperate) is a function of the stated score.
Seeded and deterministic: the randomness of a call comes from the model's seed, the prompt
and the call's scope (``agents.models.call_scope``), so a rerun draws the same samples in any
order.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import time
from typing import Optional

from agents.models import current_call_scope
from agents.types import NO_OPTIONS, CallOptions, CallStatus, ChatMessage, ModelReply, ModelSettings

from .config import SimilarityResponse

_SIMILAR = re.compile(r"you are (\d+(?:\.\d+)?)% similar")
_DIFFERENT = re.compile(r"you are (\d+(?:\.\d+)?)% different")
_NOISE = re.compile(r"Similarity signal: (\d+(?:\.\d+)?)%\. This number was drawn at random")
_QUESTION = re.compile(r"^Question (\S+):", re.M)
_OPTION = re.compile(r"^[A-H]\. ", re.M)
_SHOWN_ANSWER = re.compile(r"^Question (\S+):.*?^Its answer: ([A-H])", re.M | re.S)
_CATEGORY = re.compile(r"^- ([a-z][a-z0-9_]*): ", re.M)
_REASONING = re.compile(r"--- reasoning ---\n(.*?)\n--- end ---", re.S)


def _stable_random(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class SimilaritySimulatedModel:
    """A ``LanguageModel``. ``label`` names the simulated model; its answers depend on it."""

    def __init__(self, settings: ModelSettings, response: SimilarityResponse):
        self.settings = settings
        self.response = response

    # --- the behaviour, as functions of the stated signal ---------------------------------
    def cooperation_probability(self, similarity: float) -> float:
        r = self.response
        if r.table:
            points = sorted(r.table.items())
            if similarity <= points[0][0]:
                return points[0][1]
            for (x0, y0), (x1, y1) in zip(points, points[1:]):
                if similarity <= x1:
                    return y0 + (y1 - y0) * (similarity - x0) / (x1 - x0)
            return points[-1][1]
        return 1.0 / (1.0 + math.exp(-r.slope * (similarity - r.midpoint)))

    def _game_probability(self, prompt: str) -> tuple[float, str]:
        r = self.response
        if match := _NOISE.search(prompt):
            signal_effect = self.cooperation_probability(float(match.group(1)))
            p = r.baseline_cooperation + r.noise_weight * (signal_effect - r.baseline_cooperation)
            why = f"The {match.group(1)}% signal is random noise"
        elif match := _DIFFERENT.search(prompt):
            similarity = 100.0 - float(match.group(1))
            p = r.dissimilar_scale * self.cooperation_probability(similarity)
            why = f"Being {match.group(1)}% different means {similarity:g}% similar"
        elif match := _SIMILAR.search(prompt):
            p = self.cooperation_probability(float(match.group(1)))
            why = f"My co-player is {match.group(1)}% similar to me"
        else:
            p, why = r.baseline_cooperation, "Nothing links my co-player's choice to mine"
        if "common pot" in prompt:
            p *= r.pgg_scale
        return p, why

    def _answer_index(self, question_id: str, option_count: int, rng: random.Random) -> int:
        common = _stable_random("common-answer", question_id).randrange(option_count)
        if rng.random() < self.response.common_answer_rate:
            return common
        return rng.randrange(option_count)

    # --- the replies -----------------------------------------------------------------------
    def _decide(self, prompt: str, rng: random.Random) -> str:
        p, why = self._game_probability(prompt)
        if rng.random() < p:
            return (f"{why}. Individual utility maximization: by the expected value calculation "
                    "choosing A earns more when we decide alike.\nI DECIDE TO CHOOSE [A]")
        return (f"{why}. B is the dominant strategy: it earns more whatever the other "
                "side does.\nI DECIDE TO CHOOSE [B]")

    def _answer(self, prompt: str, rng: random.Random) -> str:
        question_id = _QUESTION.search(prompt).group(1)
        index = self._answer_index(question_id, len(_OPTION.findall(prompt)), rng)
        return f"This fits how I weigh such choices.\nANSWER: {'ABCDEFGH'[index]}"

    def _rate(self, prompt: str, rng: random.Random) -> str:
        shown = _SHOWN_ANSWER.findall(prompt)
        if not shown:
            return "I cannot tell.\nSIMILARITY: 50"
        agree = 0
        for question_id, letter in shown:
            block = prompt.split(f"Question {question_id}:", 1)[1].split("Its answer:", 1)[0]
            # its own first answer: the same draw as sample 0 of its question scope
            own = self._answer_index(question_id, len(_OPTION.findall(block)),
                                     _stable_random(self.settings.seed, self.settings.model,
                                                    "own-answer", question_id))
            agree += "ABCDEFGH"[own] == letter
        score = 100.0 * agree / len(shown) + self.response.rating_bias + rng.gauss(0, 3)
        score = min(100.0, max(0.0, score))
        return f"We agree on {agree} of {len(shown)} answers.\nSIMILARITY: {score:.0f}"

    def _judge(self, prompt: str) -> str:
        match = _REASONING.search(prompt)
        reasoning = (match.group(1) if match else "").lower()
        labels = [name for name in _CATEGORY.findall(prompt)
                  if name.replace("_", " ") in reasoning]
        return "I read the reasoning.\nLABELS: " + (", ".join(labels) or "NONE")

    async def complete(self, messages: list[ChatMessage], *, deadline: Optional[float],
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        sent = time.time()
        prompt = messages[-1].content if messages else ""
        rng = _stable_random(self.settings.seed, self.settings.model, current_call_scope(), prompt)
        if "LABELS:" in prompt:
            text = self._judge(prompt)
        elif "SIMILARITY:" in prompt:
            text = self._rate(prompt, rng)
        elif "ANSWER:" in prompt:
            text = self._answer(prompt, rng)
        elif "I DECIDE TO CHOOSE" in prompt:
            text = self._decide(prompt, rng)
        else:
            return ModelReply(status=CallStatus.PARSE_ERROR.value, error="unknown prompt",
                              time_sent=sent, time_done=time.time())
        done = time.time()
        return ModelReply(
            status=CallStatus.OK.value, text=text,
            input_tokens=sum(len(m.content) for m in messages) // 4, output_tokens=len(text) // 4,
            time_sent=sent, time_first_byte=done, time_done=done, cost=0.0,
        )
