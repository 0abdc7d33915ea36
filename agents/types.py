"""The contract of the agents package: plain data in, plain data out.

The lab (oTree), the simulation lab and the analysis all depend on these names only.
Everything here is JSON-serialisable through ``to_dict``/``from_dict`` so that a restarted
server resumes an agent exactly where it was. No oTree import anywhere in ``agents``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, runtime_checkable


class CallStatus(str, enum.Enum):
    """How one model call ended: exactly one of these, never an exception."""

    OK = "ok"
    PARSE_ERROR = "parse_error"  # a reply came back but held no usable message/choice
    LENGTH = "length"  # truncated by max_tokens (finish_reason length / stop_reason max_tokens)
    REFUSAL = "refusal"  # the provider or model refused
    RATE_LIMITED = "rate_limited"  # 429 / quota, after the retries the deadline allowed
    PROVIDER_ERROR = "provider_error"  # 5xx, dropped connection, malformed HTTP
    TIMEOUT = "timeout"  # the turn's deadline passed before a reply
    BUDGET = "budget"  # not sent: the session's money budget was spent
    CANCELLED = "cancelled"  # the caller gave up on the turn (e.g. server shutting down)
    CONFIG_ERROR = "config_error"  # bad key / model name: 401, 404
    INTERRUPTED = "interrupted"  # sent, then the server stopped before the reply (cost estimated)
    ABANDONED = "abandoned"  # lab: sent, then the turn was settled by the fallback before the reply (cost estimated)
    CONTEXT_OVERFLOW = "context_overflow"  # the prompt does not fit the model's window (not sent, or 400)


class TurnKind(str, enum.Enum):
    MESSAGE_1 = "message_1"
    MESSAGE_2 = "message_2"
    DECISION = "decision"


class TurnStatus(str, enum.Enum):
    """How a turn ended, as the lab records it."""

    OK = "ok"  # first reply parsed
    REASKED = "reasked"  # first reply malformed, a re-ask parsed
    FALLBACK = "fallback"  # no usable reply in time: no message / random choice, flagged


@dataclass
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass
class ModelSettings:
    """What is sent with every request; fixed before the call is sent."""

    provider: str  # "openai" | "anthropic" | "openai_compatible" | "gemini" | "simulated"
    model: str
    temperature: Optional[float] = None  # None = provider default (the paper used defaults)
    max_tokens: int = 1024
    seed: Optional[int] = None
    context_window: Optional[int] = None  # tokens, prompt + reply; None = unknown (not checked)
    memory: str = "round"  # the agents' default memory scope ("round" | "game")
    # How the server is told the reply's format (agents/grammars.py: gbnf, structured_outputs,
    # guided_regex), or None: unconstrained (llm_constrained_output off, or a cloud provider).
    grammar: Optional[str] = None
    # Agents chatting in Chinese must write Chinese messages (ModelConfig.requires_chinese).
    chinese_messages: bool = False
    reasks: int = 1  # re-asks of a malformed reply while the deadline leaves time (ModelConfig.reasks)


@dataclass
class CallRecord:
    """One model call on the record (Deliberate Lab style): one status, everything kept."""

    call_id: str
    agent_id: str
    round_number: int
    turn: str  # TurnKind value
    attempt: int  # 1 = first ask, 2 and on = the re-asks after a malformed reply
    provider: str
    model: str
    parameters: dict[str, Any]  # temperature, max_tokens, seed... as sent
    prompt_version: str  # content hash of the templates that rendered the prompt
    messages: list[dict[str, str]]  # the full messages sent
    raw_reply: Optional[str]
    parsed: Optional[str]  # the message text or "A"/"B"
    status: str  # CallStatus value
    error: Optional[str] = None  # short, never containing a key
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    cost: Optional[float] = None  # in the price table's currency (USD)
    time_sent: Optional[float] = None  # unix epoch seconds
    time_first_byte: Optional[float] = None
    time_done: Optional[float] = None
    retries: int = 0  # HTTP-level retries inside this call
    simulated: bool = False  # True for the offline persona model
    # What real models need on the record:
    prompt_tokens: Optional[int] = None  # counted by us before sending (tiktoken or the estimate)
    trimmed: int = 0  # earlier rounds' transcripts dropped to fit the context window
    reasoning: Optional[str] = None  # <think> blocks and providers' reasoning fields, never parsed
    flags: str = ""  # comma-separated: message_too_long, message_cut, ambiguous_choice, ...

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data: its own copy of every field, the parameters and each
        message included. Not ``dataclasses.asdict``, whose generic deep copy took 92 µs for a
        ten-message record against 5 µs here, and the lab takes this dict five times per call
        (the journal twice, the engine's in-flight table twice, the call's row once)."""
        d = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        d["parameters"] = dict(self.parameters)
        d["messages"] = [dict(message) for message in self.messages]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CallRecord":
        return cls(**d)


# A call's fields in the order the tables write them (the lab's llm_calls, the simulations'
# calls): the lab's data dictionary describes them in this order (tests/test_data_dictionary.py).
CALL_RECORD_COLUMNS = (
    "call_id", "agent_id", "round_number", "turn", "attempt", "provider", "model", "parameters",
    "prompt_version", "messages", "raw_reply", "parsed", "status", "error", "input_tokens",
    "output_tokens", "cost", "time_sent", "time_first_byte", "time_done", "retries",
    "prompt_tokens", "trimmed", "reasoning", "flags", "simulated",
)


@dataclass
class TurnResult:
    """What a turn produced. ``text`` for message turns, ``choice`` for decisions."""

    agent_id: str
    round_number: int
    turn: str  # TurnKind value
    status: str  # TurnStatus value
    text: Optional[str] = None  # None = no message sent (fallback)
    choice: Optional[str] = None  # "A" | "B"
    fallback_reason: Optional[str] = None  # a CallStatus value when status == fallback
    calls: list[CallRecord] = field(default_factory=list)
    started_at: Optional[float] = None
    finished_at: Optional[float] = None
    flags: str = ""  # comma-separated, as CallRecord.flags (e.g. message_cut)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TurnResult":
        d = dict(d)
        d["calls"] = [CallRecord.from_dict(c) for c in d.get("calls", [])]
        return cls(**d)


@dataclass
class ModelReply:
    """What a provider adapter returns for one request. Never raises."""

    status: str  # CallStatus value
    text: Optional[str] = None
    error: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    time_sent: Optional[float] = None
    time_first_byte: Optional[float] = None
    time_done: Optional[float] = None
    retries: int = 0
    # Added by the agents package (optional for other LanguageModel implementations):
    cost: Optional[float] = None  # USD of this call, from the price table; None = unknown
    retry_after: Optional[float] = None  # seconds the provider asked to wait (429/503)
    retryable: Optional[bool] = None  # whether another attempt could succeed (None = by status)
    reasoning: Optional[str] = None  # a provider's separate reasoning field (e.g. reasoning_content)
    # The server's own account of a call (llama-server: prompt_n, prompt_ms, predicted_n, predicted_ms).
    timings: Optional[dict] = None
    not_sent: bool = False  # a timeout before the request left: too little time for a call of its kind


@dataclasses.dataclass(frozen=True)
class CallOptions:
    """What one call asks besides its messages, passed by the caller (the agent) with the call:
    the reply's shape (agents/grammars.py; sent only by a model whose config constrains output)
    and, for a re-ask, the temperature and seed that make it differ from the first ask."""

    shape: Any = None  # agents.grammars.OutputShape or None
    temperature: Optional[float] = None  # None = the model's settings
    seed: Optional[int] = None
    # Raw request fields and a reply limit of the model check's probes (agents/models/check.py).
    fields: Optional[dict] = None
    max_tokens: Optional[int] = None

    def as_dict(self) -> dict:
        return {"shape": dataclasses.asdict(self.shape) if self.shape is not None else None,
                "temperature": self.temperature, "seed": self.seed, "fields": self.fields,
                "max_tokens": self.max_tokens}


NO_OPTIONS = CallOptions()  # a call that asks nothing besides its messages


@runtime_checkable
class LanguageModel(Protocol):
    """One small interface for every provider (Concordia style)."""

    settings: ModelSettings

    async def complete(self, messages: list[ChatMessage], *, deadline: float,
                       options: CallOptions = NO_OPTIONS) -> ModelReply:
        """Send ``messages`` with ``options``; return by ``deadline`` (time.monotonic() seconds), never raise."""
        ...
