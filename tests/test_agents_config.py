"""Model configs: validated at session creation with errors that name the field; prices; limits."""

from __future__ import annotations

import asyncio
import time

import pytest

from agents.config import (
    GEMINI_OPENAI_BASE_URL,
    ConfigError,
    ModelConfig,
    default_model_config,
    price_table,
    session_config_defaults,
)
from agents.models import Budget, estimate_cost
from agents.models.layers import _RequestsPerMinute


def test_session_config_keys_build_a_config():
    cfg = ModelConfig.from_session_config({
        "llm_provider": "openai", "llm_model": "gpt-4o", "llm_temperature": 0.7, "llm_seed": 5,
        "llm_max_tokens": 800, "llm_base_url": "", "other_key": 1,
    })
    assert (cfg.provider, cfg.model, cfg.temperature, cfg.seed, cfg.max_tokens) == ("openai", "gpt-4o", 0.7, 5, 800)
    assert cfg.api_key_env == "OPENAI_API_KEY" and cfg.base_url is None


@pytest.mark.parametrize("session_config, field", [
    ({"llm_provider": "openia"}, "llm_provider"),
    ({"llm_provider": "openai", "llm_temperature": 3}, "llm_temperature"),
    ({"llm_provider": "openai", "llm_max_tokens": 0}, "llm_max_tokens"),
    ({"llm_provider": "openai_compatible", "llm_model": "x"}, "base_url"),
    ({"llm_tempreature": 1}, "llm_tempreature"),
    ({"llm_provider": "openai", "llm_api_key_env": "sk-abc 123"}, "api_key_env"),
])
def test_a_bad_session_config_names_the_field(session_config, field):
    with pytest.raises(ConfigError, match=field):
        ModelConfig.from_session_config(session_config)


def test_build_turns_validation_errors_into_config_errors():
    with pytest.raises(ConfigError, match="concurrency"):
        ModelConfig.build(provider="openai", concurrency=0)


def test_defaults_per_provider(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert ModelConfig.from_session_config({}).provider == "simulated"
    gemini = ModelConfig(provider="gemini")
    assert gemini.base_url == GEMINI_OPENAI_BASE_URL and gemini.api_key_env == "GEMINI_API_KEY"
    assert ModelConfig(provider="anthropic").api_key_env == "ANTHROPIC_API_KEY"
    assert ModelConfig(provider="openai_compatible", model="m", base_url="http://x/v1").api_key_env is None
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    assert default_model_config().provider == "openai"


def test_the_session_config_defaults_round_trip(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    defaults = session_config_defaults()
    assert all(key.startswith("llm_") for key in defaults)
    assert ModelConfig.from_session_config(defaults) == ModelConfig(provider="simulated")


def test_prices_come_from_the_config_or_the_table():
    assert "gpt-4-0613" in price_table()
    table = ModelConfig(provider="openai", model="gpt-4o")
    assert table.cost(1_000_000, 1_000_000) == pytest.approx(sum(price_table()["gpt-4o"].values()))
    override = ModelConfig(provider="openai", model="gpt-4o", price_input_per_mtok=1, price_output_per_mtok=1)
    assert estimate_cost(override, 500_000, 500_000) == pytest.approx(1.0)
    assert ModelConfig(provider="openai", model="unknown-model").cost(10, 10) is None
    assert ModelConfig(provider="simulated").cost(10, 10) == 0.0


def test_budget_counts_and_stops():
    budget = Budget(1.0)
    budget.charge(0.6)
    assert not budget.exhausted
    budget.charge(0.4)
    assert budget.exhausted and budget.spent == pytest.approx(1.0)
    unlimited = Budget(None)
    unlimited.charge(1e9)
    assert not unlimited.exhausted


def test_requests_per_minute_window_schedules_and_refuses():
    window = _RequestsPerMinute(2)
    now = time.monotonic()
    assert window.reserve(now + 1) is not None and window.reserve(now + 1) is not None
    assert window.reserve(now + 1) is None  # the third send would be a minute later
    later = window.reserve(now + 120)
    assert later is not None and later >= now + 59


def test_configs_are_frozen_and_hold_no_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-appear")
    cfg = ModelConfig(provider="openai")
    assert "sk-should-not-appear" not in cfg.model_dump_json()
    assert cfg.api_key() == "sk-should-not-appear"
    with pytest.raises(Exception):
        cfg.model = "other"  # frozen: a session's config cannot drift mid-session


def test_asyncio_is_not_needed_to_build_a_simulated_model():
    from agents.models import build_model

    model = build_model(ModelConfig(provider="simulated"))
    assert model.settings.provider == "simulated"
    assert asyncio.run(model.complete([], deadline=time.monotonic() + 1)).status == "ok"


def test_the_model_a_session_is_created_with_holds_whatever_the_environment_says_later(monkeypatch):
    """frozen_session_keys: the provider, model, URL and key variable as resolved at creation; read
    back in another environment they name the same model."""
    from agents.config import frozen_session_keys, session_config_defaults

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    created = {**session_config_defaults(), **frozen_session_keys(ModelConfig.from_session_config(
        session_config_defaults()))}
    assert {key: created[key] for key in ("llm_provider", "llm_model", "llm_base_url", "llm_api_key_env")} == dict(
        llm_provider="simulated", llm_model="simulated-persona", llm_base_url="", llm_api_key_env="")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-later")
    assert ModelConfig.from_session_config(created).provider == "simulated"

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    keyed = frozen_session_keys(ModelConfig.from_session_config(session_config_defaults()))
    assert keyed == dict(llm_provider="openai", llm_model="gpt-4o", llm_base_url="http://127.0.0.1:9/v1",
                         llm_api_key_env="OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert ModelConfig.from_session_config(keyed).base_url == "http://127.0.0.1:9/v1"
    assert frozen_session_keys(ModelConfig(provider="anthropic"))["llm_base_url"] == "https://api.anthropic.com"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "nan", "-inf"])
def test_a_model_setting_is_a_finite_number(value):
    with pytest.raises(ConfigError, match="llm_request_timeout"):
        ModelConfig.from_session_config({"llm_provider": "simulated", "llm_request_timeout": value})
