"""The model check measures whether a local server can serve the session's agents in time
(agents/capacity.py): the session's own prompts at the last round, the server's prompt evaluation,
generation and slots, and per stage the turns that fit; a session that cannot fit is refused at
creation with the numbers and what to change, one that fits narrowly is created with a warning.
Against tests/fake_llm_server.py, whose latency stands for the prompt's evaluation and whose
token_seconds for the generation."""

from __future__ import annotations

import pytest

from agents.capacity import (NARROW_MARGIN, TYPICAL_MESSAGES, ServerSpeed, SessionDemand, assess, stage_prompts,
                             usable_seconds)
from agents.config import ModelConfig
from lab.base import session_settings
from lab.base.session_settings import SessionConfigError

STAGES = {"message_1": 60.0, "message_2": 60.0, "decision": 40.0}


def local(fake=None, **extra) -> ModelConfig:
    fields = dict(provider="openai_compatible", model="local", max_tokens=128, context_window=4096,
                  base_url=fake.base_url_openai if fake else "http://127.0.0.1:9/v1", max_retries=0,
                  request_timeout=30)
    return ModelConfig(**{**fields, **extra})


def demand(agents: int, **extra) -> SessionDemand:
    return SessionDemand(**{**dict(agents=agents, rounds=10, language="zh", persona="fair",
                                   stage_seconds=dict(STAGES)), **extra})


def test_the_prompts_are_the_sessions_own_at_the_last_round():
    prompts = {(p.game, p.stage): p for p in stage_prompts(local(), demand(2))}
    assert set(prompts) == {("WC", "message_1"), ("WC", "message_2"), ("WC", "decision"), ("WoC", "decision")}
    decision = prompts[("WC", "decision")]
    last = decision.prompt_b[-1].content
    assert "In round 9: you choose" in last and "Now this is the 10 round of the game." in last
    assert decision.prompt_b[0].role == "system" and "FAIR-MINDED" in last
    # the round's first prompt is every agent's alike (the server's cache has it); the decision
    # shares only that and the system prompt with another agent's, and is the longest
    assert prompts[("WC", "message_1")].new_tokens <= 2
    assert prompts[("WC", "message_2")].new_tokens < decision.new_tokens < decision.tokens
    assert decision.tokens == max(p.tokens for p in prompts.values())
    assert (decision.shape.kind, decision.shape.steps, prompts[("WoC", "decision")].shape.steps) == ("decision", 5, 4)


def test_one_message_exchange_asks_no_second_message_and_decides_after_the_first():
    from experiment_design import EXPERIMENTS_DIR, load

    one_exchange = load(EXPERIMENTS_DIR / "fixed_partner_one_message.toml")
    prompts = {(p.game, p.stage): p for p in stage_prompts(local(), demand(2, experiment=one_exchange))}
    assert set(prompts) == {("WC", "message_1"), ("WC", "decision"), ("WoC", "decision")}
    # agent B's decision reads A's first message (the round's only one), as the lab's agents do
    assert TYPICAL_MESSAGES["zh"][1] in prompts[("WC", "decision")].prompt_b[-1].content


def speed(eval_seconds=10.0, tokens_per_second=30.0, slots=1, cut_off=False, new_tokens=None) -> ServerSpeed:
    decision = next(p for p in stage_prompts(local(), demand(1)) if p.stage == "decision" and p.game == "WC")
    return ServerSpeed(eval_seconds, new_tokens or decision.new_tokens, "until the first streamed token", cut_off,
                       tokens_per_second, "after the first streamed token", slots, "the server reports none")


def assessed(agents: int, **speed_fields):
    cfg = local()
    return assess(cfg, demand(agents), stage_prompts(cfg, demand(agents)), speed(**speed_fields))


def test_a_turn_is_its_prompts_evaluation_and_a_full_reply_on_one_slot():
    capacity = assessed(2)
    decision = next(s for s in capacity.stages if s.stage == "decision" and s.game == "WC")
    assert decision.eval_seconds == pytest.approx(10.0)
    assert decision.reply_seconds == pytest.approx(128 / 30)  # llm_max_tokens at the measured speed
    assert decision.turn_seconds == pytest.approx(14.27, abs=0.01)
    assert usable_seconds(40) == 39.5 and decision.turns_per_slot == 2 and decision.capacity == 2
    assert decision.margin == pytest.approx(39.5 / (2 * 14.2667), abs=0.01)  # 1.38: less than 1.5
    assert capacity.verdict == "narrow" and capacity.binding is decision
    # the first message's prompt is every agent's alike: its turn is the reply alone
    first = next(s for s in capacity.stages if s.stage == "message_1")
    assert first.eval_seconds < 0.05 and first.turns_per_slot == 13


def test_fits_narrow_refused_by_the_number_of_agents():
    assert assessed(1).verdict == "fits"
    narrow = assessed(2)
    assert narrow.verdict == "narrow" and narrow.binding.margin < NARROW_MARGIN
    refused = assessed(6)
    assert refused.verdict == "refused" and refused.max_agents == 2
    summary = refused.summary()
    assert summary.startswith("capacity: the session does not fit. Measured at the model check: a decision prompt "
                              "of the last round")
    assert ("So a decision turn takes 14.3 s on one slot (10.0 s prompt, 4.3 s for a reply of llm_max_tokens = "
            "128), and 2 turn(s) per slot fit its 40 s: 2 in all, for the session's 6 agents (one per participant)"
            ) in summary
    # what to change, with numbers: fewer agents, a server with more slots or faster
    assert refused.advice == ["at most 1 participants (agents)", "a server with 6 slots at this speed, or 3.3x faster"]


def test_the_advice_names_a_reply_limit_that_fits_when_the_reply_is_what_is_too_long():
    capacity = assessed(4, eval_seconds=2.0, tokens_per_second=10.0)  # 12.8 s of reply, 2 s of prompt
    assert capacity.verdict == "refused"
    # 4 turns with a margin of 1.5 in 39.5 s: 6.58 s a turn, 4.58 s of reply at 10 tokens/s
    assert "llm_max_tokens = 45 or less" in capacity.advice
    two_slots = assess(local(), demand(4), stage_prompts(local(), demand(4)),
                       speed(eval_seconds=2.0, tokens_per_second=10.0, slots=4), concurrency=2)
    assert "llm_concurrency = 4 (the server has 4 slots)" in two_slots.advice


def test_a_turn_too_slow_for_its_stage_on_its_own_asks_for_a_faster_server_not_more_slots():
    capacity = assessed(1, eval_seconds=50.0)  # 54.3 s a decision turn, 39.5 s to do it in
    assert capacity.verdict == "refused"
    assert capacity.advice == ["no number of participants (one turn alone is too slow)",
                               "a server 2.1x faster (one turn alone is too slow for more slots to help)"]


def test_a_prompt_the_server_did_not_evaluate_in_time_refuses_the_session():
    capacity = assessed(1, eval_seconds=80.0, cut_off=True, tokens_per_second=None)
    assert capacity.verdict == "refused"
    assert "was evaluated in more than 80.0 s (cut off)" in capacity.summary()
    assert capacity.advice[0] == "no number of participants (one turn alone is too slow)"


def session_config(fake, **extra) -> dict:
    return {**dict(associate_type="fair", label_setting="informed", game_order="WC-WoC", language="zh_hans",
                   llm_provider="openai_compatible", llm_model="local", llm_base_url=fake.base_url_openai,
                   llm_max_tokens=128, llm_max_retries=0, llm_request_timeout=30, llm_concurrency=100,
                   rounds_per_game=10), **extra}


@pytest.mark.parametrize("participants, verdict", [(1, "fits"), (3, "narrow")])
def test_session_creation_measures_the_server_and_records_the_capacity(fake_llm, participants, verdict):
    """Evaluation 0.6 s (the fake's latency), generation ~500 tokens/s: a decision turn ~0.9 s on
    one slot; in a decision stage of 4 s (3.6 s usable) one agent fits, three narrowly."""
    fake_llm.set(latency=0.6, token_seconds=0.002, grammar_fields={"grammar"})
    config, record = session_config(fake_llm, decision_seconds=4), {}
    session_settings.validate(config, participants, record=record)
    check = record["model_check"]
    assert check["capacity"]["verdict"] == verdict, check["capacity"]["summary"]
    assert check["capacity"]["agents"] == participants and check["capacity"]["slots"] == 1
    assert check["grammar"] == ("on (gbnf): the server obeyed that grammar field at the model check; messages must "
                                "be Chinese (llm_chinese_messages auto)")
    assert (check["warning"] is None) == (verdict == "fits")
    if verdict == "narrow":
        assert check["warning"].startswith("capacity: the session fits narrowly (margin 1.")
    # llm_concurrency left at its default: the server's slots (none reported: one), so that the
    # calls queue in the lab by deadline, not in the server
    assert config["llm_concurrency"] == 1 and config["llm_chinese_messages"] == "on"
    decision = [r for api, r in fake_llm.requests if r.get("max_tokens") == 1]
    assert len(decision) == 2 and "In round 9: you choose" in decision[1]["messages"][-1]["content"]


def test_a_session_the_server_cannot_serve_is_refused_with_the_numbers(fake_llm):
    fake_llm.set(latency=0.6, token_seconds=0.002, slots=2)
    with pytest.raises(SessionConfigError) as refused:
        session_settings.validate(session_config(fake_llm, decision_seconds=4), 12)
    message = str(refused.value)
    assert message.startswith("Agent model: capacity: the session does not fit.")
    assert "2 slot(s) (the server's /props)" in message and "for the session's 12 agents" in message
    assert "To fit: at most " in message and "participants (agents); or " in message


def test_a_cloud_model_is_not_measured_and_its_grammar_state_is_recorded(fake_llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config, record = session_config(fake_llm, llm_provider="openai", llm_model="gpt-4o"), {}
    session_settings.validate(config, 12, record=record)
    assert "capacity" not in record["model_check"] and fake_llm.request_count == 1
    assert record["model_check"]["grammar"] == "off: openai takes no grammar"
    assert config["llm_concurrency"] == 100 and config["llm_chinese_messages"] == "off"


def test_a_server_error_while_measuring_leaves_the_capacity_unmeasured_and_warned():
    cfg = local()
    failed = speed()
    failed.error = "the server answered a measuring call with provider_error: HTTP 500"
    capacity = assess(cfg, demand(2), stage_prompts(cfg, demand(2)), failed)
    assert capacity.verdict == "unmeasured" and capacity.stages == []
    assert capacity.summary() == ("capacity: not measured: the server answered a measuring call with "
                                  "provider_error: HTTP 500")
    assert capacity.as_record()["margin"] is None


def test_the_pages_show_the_grammar_and_the_capacity_and_warn_when_narrow():
    """The dashboard's and the agents page's rows, and the line above every session page."""
    from types import SimpleNamespace

    from lab.experimenter.admin_views import model_check_banner
    from lab.experimenter.dashboard import model_check_details

    narrow = assessed(2)
    record = dict(status="ok", grammar="on (gbnf): the server obeyed that grammar field at the model check",
                  capacity=narrow.as_record(), warning=narrow.summary())
    session = SimpleNamespace(vars={"model_check": record}, config={})
    details = model_check_details(session)
    assert details == dict(check="ok", grammar=record["grammar"], capacity=narrow.summary(),
                           capacity_verdict="narrow", warning=narrow.summary())
    banner = model_check_banner(session)
    assert banner.startswith('<div class="alert alert-warning small py-2" id="lab-model-check"><b>Agents\' model:</b> '
                             "capacity: the session fits narrowly (margin 1.38x, less than 1.5x)")
    assert "grammar: on (gbnf): the server obeyed" in banner
    fits = dict(record, capacity=assessed(1).as_record(), warning=None)
    assert 'class="alert alert-light' in model_check_banner(SimpleNamespace(vars={"model_check": fits}, config={}))
    assert model_check_banner(SimpleNamespace(vars={}, config={})) == ""  # H-H, or no check recorded
