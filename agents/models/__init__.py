"""Language models on real providers, behind one small interface, that never overrun a deadline.

``build_model(cfg)`` returns a ``LanguageModel`` made of layers that each take and return a
``LanguageModel`` (Concordia style)::

    DeadlineGuard(RetryingModel(RateLimitedModel(BudgetedModel(adapter))))

- the adapter sends ONE request through the provider's official async SDK (``openai``,
  ``anthropic``; Gemini and OpenAI-compatible servers through ``openai`` with a base URL), with
  the SDK's own retries off and a per-attempt timeout no later than the deadline;
- ``RateLimitedModel``: a requests-per-minute window (shared by every loop and thread) and a
  concurrency limit (per event loop); waiting for either counts against the deadline;
- ``RetryingModel``: retries 429 / 5xx / dropped connections / per-attempt timeouts with jittered
  exponential backoff, honouring Retry-After, but only while the deadline leaves room;
- ``BudgetedModel``: refuses to send once a shared ``Budget`` is spent. It sits innermost, so
  the budget is checked when a request is actually sent (after the rate and concurrency queues,
  and before each retry), and each attempt's cost is charged as its reply arrives;
- ``DeadlineGuard``: ``asyncio.timeout`` at the deadline and a catch-all, so ``complete`` returns
  a ``ModelReply`` by the deadline and never raises (cancellation by the caller excepted).

SDK clients are created lazily inside the running event loop, one per loop (an async client
belongs to one loop). Error texts are scrubbed of keys before they are recorded.

Modules: ``providers`` (the adapters), ``layers`` (rate limits, retries, the deadline guard),
``budget`` (``Budget``, ``BudgetedModel``), ``calls`` (what they all share: the call's scope, the
time left, scrubbed errors), ``build`` (``build_model``), ``check`` (``check_model``). This face
hands on what the rest of the project calls.
"""

from __future__ import annotations

from .budget import Budget, call_charges, estimate_cost
from .build import UnavailableModel, build_adapter, build_model, model_settings, serving_problem
from ..types import CallOptions
from .calls import call_scope, current_call_scope, redact
from .check import ServerInspection, check_model, grammar_state, inspect_server, resolve_constrained_output
