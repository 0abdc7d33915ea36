"""Which model an agent uses and how it is asked, validated before a session starts.

A ``ModelConfig`` says provider, model, sampling parameters, limits (timeout, retries,
concurrency, requests per minute) and prices. It never holds an API key: ``api_key_env`` names
the environment variable that does, and the key is read only when the client is created.

Lab sessions carry the config as flat ``llm_*`` keys (oTree's admin edits flat values):
``ModelConfig.from_session_config(session.config)`` reads them and raises ``ConfigError`` naming
the bad field. ``default_model_config()`` is the offline simulated model unless an OpenAI or
Anthropic key is in the environment.
"""

from __future__ import annotations

import functools
import os
import tomllib
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Provider = Literal["openai", "anthropic", "openai_compatible", "gemini", "simulated"]
PRICES_PATH = Path(__file__).resolve().parent / "prices.toml"
GEMINI_OPENAI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"
DEFAULT_API_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}
DEFAULT_MODELS = {
    "openai": "gpt-4o",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "simulated": "simulated-persona",
}
SESSION_CONFIG_PREFIX = "llm_"
# Where a provider's SDK sends requests when given no base_url: its environment variable's URL,
# else its own address.
SDK_BASE_URLS = {"openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                 "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com")}
# What the environment may decide (the default provider and model, the SDK's URL), written into a
# session when it is created (``frozen_session_keys``).
FROZEN_FIELDS = ("provider", "model", "base_url", "api_key_env")


class ConfigError(ValueError):
    """A model config that cannot run; the message names the field and why."""


class ModelConfig(BaseModel):
    """One model's settings. Build it with keywords, ``from_session_config`` or ``default_model_config``."""

    # allow_inf_nan: a NaN or infinite number passes every bound (a timeout of inf, a price of NaN).
    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=(), allow_inf_nan=False)

    provider: Provider = "simulated"
    model: str = Field("", description="model name as the provider spells it; empty = the provider's default")
    temperature: Optional[float] = Field(None, ge=0.0, le=2.0, description="None = provider default (the paper)")
    max_tokens: int = Field(1024, ge=16, le=32768, description="reply limit; leave headroom for the reasoning")
    seed: Optional[int] = Field(None, description="sent where the provider takes one (OpenAI-style APIs)")
    base_url: Optional[str] = Field(None, description="openai_compatible: required; others: optional override")
    api_key_env: Optional[str] = Field(None, description="NAME of the env var holding the key, never the key")
    request_timeout: float = Field(60.0, gt=0, description="seconds per HTTP attempt (the turn deadline also bounds it)")
    max_retries: int = Field(3, ge=0, le=20, description="retries after the first attempt, within the deadline")
    retry_base_delay: float = Field(0.5, ge=0, description="first backoff in seconds; doubles, jittered")
    retry_max_delay: float = Field(8.0, ge=0)
    concurrency: int = Field(100, ge=1, description="requests in flight at once, per event loop")
    requests_per_minute: Optional[int] = Field(600, ge=1, description="None = no limit")
    price_input_per_mtok: Optional[float] = Field(None, ge=0, description="USD per million input tokens")
    price_output_per_mtok: Optional[float] = Field(None, ge=0, description="USD per million output tokens")
    reasks: int = Field(1, ge=0, le=3, description="re-asks of a malformed reply, each sent only while the turn's "
                                                "deadline leaves time: 1 (our default), 2 for a small local model")
    memory: Literal["round", "game"] = Field(
        "round", description="round: this round's turns + the history lines (the paper); game: every earlier turn")
    context_window: Optional[int] = Field(
        None, ge=256, description="tokens (prompt + reply); None = agents/context_windows.toml's, if listed")
    check_model: bool = Field(True, description="lab: one real call at session creation; off for offline demos")
    constrained_output: Literal["auto", "on", "off"] = Field(
        "auto", description="the server's sampler told the paper's reply format (agents/grammars.py): on, off, or "
                            "auto = on for an openai_compatible server that takes a grammar (found by the model "
                            "check), off for the cloud providers and without a check")
    chinese_messages: Literal["auto", "on", "off"] = Field(
        "auto", description="agents chatting in Chinese (zh) must write Chinese messages: on (the grammar opens "
                            "a message with a Han character, the parser wants one), off, or auto = on where the "
                            "server takes the grammar (a local model: SmolLM2 wrote English echoes of the prompt "
                            "in zh sessions)")
    grammar_format: Optional[Literal["gbnf", "structured_outputs", "guided_regex"]] = Field(
        None, description="how the server takes the grammar; None = found by the model check (on without it: gbnf)")
    simulated_latency: float = Field(0.0, ge=0, description="simulated: seconds each reply takes")
    simulated_seed: int = 0
    simulated_fair_break_rate: float = Field(0.1, ge=0, le=1, description="simulated: fair agent breaks its word")

    @model_validator(mode="after")
    def _complete(self) -> "ModelConfig":
        """Fill the provider's defaults (model, key variable, Gemini's URL); refuse what cannot run."""
        if self.provider == "openai_compatible" and not self.base_url:
            raise ValueError("base_url is required for provider 'openai_compatible' (e.g. http://localhost:8000/v1)")
        if not self.model:
            if self.provider not in DEFAULT_MODELS:
                raise ValueError(f"model is required for provider {self.provider!r}")
            object.__setattr__(self, "model", DEFAULT_MODELS[self.provider])
        if self.api_key_env is None and self.provider in DEFAULT_API_KEY_ENV:
            object.__setattr__(self, "api_key_env", DEFAULT_API_KEY_ENV[self.provider])
        if self.provider == "gemini" and not self.base_url:
            object.__setattr__(self, "base_url", GEMINI_OPENAI_BASE_URL)
        if self.constrained_output == "on" and self.provider not in ("openai_compatible", "simulated"):
            raise ValueError(f"constrained_output 'on' needs an openai_compatible server (llama.cpp, vLLM) that "
                             f"takes a grammar; {self.provider} does not (use auto or off)")
        if self.api_key_env and not self.api_key_env.replace("_", "").isalnum():
            raise ValueError("api_key_env must be the NAME of an environment variable (letters, digits, _)")
        return self

    # --- construction ------------------------------------------------------------------
    @classmethod
    def build(cls, **fields: Any) -> "ModelConfig":
        """Like ``ModelConfig(**fields)`` but a bad field is a ``ConfigError`` with a plain message."""
        try:
            return cls(**fields)
        except ValidationError as error:
            raise ConfigError(_describe(error)) from None

    @classmethod
    def from_session_config(cls, session_config: dict[str, Any]) -> "ModelConfig":
        """Read the ``llm_*`` keys of an oTree session config; empty strings mean "not set".

        Without ``llm_provider`` the default (``default_model_config()``) is used, with any other
        ``llm_*`` key applied on top.
        """
        fields = {
            key[len(SESSION_CONFIG_PREFIX):]: (None if value == "" else value)
            for key, value in session_config.items()
            if key.startswith(SESSION_CONFIG_PREFIX)
        }
        unknown = sorted(set(fields) - set(cls.model_fields))
        if unknown:
            raise ConfigError(f"unknown model setting(s) {[SESSION_CONFIG_PREFIX + k for k in unknown]}; "
                              f"known: {[SESSION_CONFIG_PREFIX + k for k in cls.model_fields]}")
        fields = {k: v for k, v in fields.items() if v is not None}
        if "provider" not in fields:
            base = default_model_config().model_dump(exclude_defaults=True)
            fields = {**base, **fields}
        try:
            return cls(**fields)
        except ValidationError as error:
            raise ConfigError(_describe(error, prefix=SESSION_CONFIG_PREFIX)) from None

    # --- derived -------------------------------------------------------------------------
    def grammar(self) -> Optional[str]:
        """The grammar format the requests carry, or None (unconstrained: off, or auto unresolved)."""
        if self.constrained_output != "on" or self.provider != "openai_compatible":
            return None
        return self.grammar_format or "gbnf"

    def resolved_base_url(self) -> Optional[str]:
        """Where requests go: the config's URL, else where the provider's SDK sends them (from the
        environment); None for the simulated model."""
        if self.base_url or self.provider not in SDK_BASE_URLS:
            return self.base_url
        variable, address = SDK_BASE_URLS[self.provider]
        return os.environ.get(variable) or address

    def requires_chinese(self) -> bool:
        """Whether an agent chatting in Chinese must write Chinese messages (``chinese_messages``)."""
        return self.chinese_messages == "on" or (self.chinese_messages == "auto" and self.grammar() is not None)

    def api_key(self) -> Optional[str]:
        """The key from the environment, read at client creation only; never stored or logged."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def resolved_context_window(self) -> Optional[int]:
        """The window prompts are checked against: the config's, else the table's (None = unknown)."""
        if self.context_window is not None:
            return self.context_window
        if self.provider == "simulated":
            return None
        from .tokens import known_context_window

        return known_context_window(self.model)

    def prices(self) -> tuple[Optional[float], Optional[float]]:
        """(input, output) USD per million tokens: the config's, else the shipped table's."""
        if self.provider == "simulated":
            return 0.0, 0.0
        table = price_table().get(self.model, {})
        return (
            self.price_input_per_mtok if self.price_input_per_mtok is not None else table.get("input"),
            self.price_output_per_mtok if self.price_output_per_mtok is not None else table.get("output"),
        )

    def cost(self, input_tokens: Optional[int], output_tokens: Optional[int]) -> Optional[float]:
        """USD of one call, or None when a price or a token count is unknown."""
        price_in, price_out = self.prices()
        if price_in is None or price_out is None or input_tokens is None or output_tokens is None:
            return None
        return (input_tokens * price_in + output_tokens * price_out) / 1_000_000


def _describe(error: ValidationError, prefix: str = "") -> str:
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "config"
        problems.append(f"{prefix}{field}: {item['msg']}" if item["loc"] else item["msg"])
    return "invalid model config: " + "; ".join(problems)


@functools.lru_cache(maxsize=1)
def price_table() -> dict[str, dict[str, float]]:
    """``agents/prices.toml``: model name -> {"input": USD/Mtok, "output": USD/Mtok}."""
    with PRICES_PATH.open("rb") as handle:
        return tomllib.load(handle).get("models", {})


def default_model_config() -> ModelConfig:
    """OpenAI if OPENAI_API_KEY is set, else Anthropic if ANTHROPIC_API_KEY is, else simulated."""
    for provider in ("openai", "anthropic"):
        if os.environ.get(DEFAULT_API_KEY_ENV[provider]):
            return ModelConfig(provider=provider)
    return ModelConfig(provider="simulated")


def frozen_session_keys(cfg: ModelConfig) -> dict[str, str]:
    """The model as this process resolves it, as ``llm_*`` keys a session is created with: its
    provider, model, base URL and the NAME of its key's variable (never the key). A server started
    later with another environment (an API key set, another OPENAI_BASE_URL) then calls the
    session's model, not the one its own environment would choose."""
    resolved = dict(provider=cfg.provider, model=cfg.model, base_url=cfg.resolved_base_url(),
                    api_key_env=cfg.api_key_env)
    return {SESSION_CONFIG_PREFIX + name: resolved[name] or "" for name in FROZEN_FIELDS}


def session_config_defaults() -> dict[str, Any]:
    """Flat ``llm_*`` keys for oTree's SESSION_CONFIG_DEFAULTS ("" = not set / default)."""
    keys = ("provider", "model", "temperature", "max_tokens", "seed", "base_url", "api_key_env",
            "request_timeout", "max_retries", "concurrency", "requests_per_minute", "memory", "context_window",
            "check_model", "constrained_output", "chinese_messages", "reasks")
    defaults = ModelConfig()
    out = {}
    for key in keys:
        value = getattr(defaults, key) if key not in ("provider", "model") else ""
        out[SESSION_CONFIG_PREFIX + key] = "" if value is None else value
    return out
