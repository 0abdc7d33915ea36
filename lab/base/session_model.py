"""The agents' model of a session at its creation: built (a missing API key is refused now, not at
the first turn), resolved as this process's environment says and frozen into the session's config,
and checked by one real call; an openai_compatible server is inspected for the grammar it takes
and for whether it serves the session's agents in time (agents/capacity.py)."""

from __future__ import annotations

import logging
import time
import protocol
from lab.base.i18n import agent_language

log = logging.getLogger("lab.agents")


class ModelRefused(ValueError):
    """The session's model cannot serve it; the message says why and what to change."""


def check_session_model(config: dict, merged: dict, p, num_participants: int, experiment,
                        record: dict | None) -> None:
    """The model of a session's agents (or of an online session's stand-ins), checked (``p``: the
    session's SessionParams; session_settings imports this module). ``config`` receives the keys
    the check froze or resolved, ``record`` (the session's vars) its outcome under ``model_check``.
    Raises ModelRefused."""
    if p.associate_type == "human" and merged.get("online") and merged.get("stand_in") == "agent":
        from agents.config import ConfigError, ModelConfig, frozen_session_keys
        from agents.models import build_model

        try:  # the stand-ins' model: a missing API key is refused now, not at the first dropout
            model_config = ModelConfig.from_session_config(merged)
            build_model(model_config)
        except ConfigError as exc:
            raise ModelRefused(f"Stand-in agents' model config: {exc}") from None
        config.update(frozen_session_keys(model_config))
    elif p.associate_type != "human":
        from agents.config import ConfigError, ModelConfig, frozen_session_keys
        from agents.models import build_model, check_model

        try:
            model_config = ModelConfig.from_session_config(merged)
            model = build_model(model_config)  # a missing API key fails here, not mid-session
        except ConfigError as exc:
            raise ModelRefused(f"Agent model config: {exc}") from None
        # The model as resolved here and now is the session's for its whole life (the engine, the
        # manifest and the dashboard read these keys), whatever a later server's environment says.
        config.update(frozen_session_keys(model_config))
        if model_config.check_model:
            # One real call now, so a wrong URL, key or model name is refused before participants
            # arrive, not discovered as every agent turn falling back (llm_check_model=False: off).
            problem, reply = check_model(model_config, model=model)
            log.info(
                "model check %s/%s: %s, %s ms, tokens %s/%s, cost %s", model_config.provider, model_config.model,
                reply.status, None if not (reply.time_done and reply.time_sent) else
                round(1000 * (reply.time_done - reply.time_sent)), reply.input_tokens, reply.output_tokens, reply.cost)
            if record is not None:
                record["model_check"] = dict(
                    status="failed" if problem else "ok", provider=model_config.provider, model=model_config.model,
                    reply_status=str(reply.status), checked_at=time.time())
            if problem:
                raise ModelRefused(f"Agent model: {problem} (set llm_check_model to false to skip this check, "
                                   "e.g. for an offline demo)")
            if model_config.provider == "openai_compatible":
                _inspect_server(config, model_config, model, p, record, num_participants, experiment)
        if "llm_constrained_output" not in _resolved(config):
            # no check, or a cloud provider: auto is off, and the session records it so
            _record_grammar(config, model_config, None, p, record)


# The model keys the model check resolves, written into the session's config (so the engine, the
# frozen manifest and a restarted server all use what the check found).
_RESOLVED_MARK = "constrained_output_resolved_at"  # not llm_*: not a model setting


def _resolved(config: dict) -> dict:
    return config if config.get(_RESOLVED_MARK) else {}


def _resolved_keys(cfg) -> dict:
    return {"llm_constrained_output": cfg.constrained_output, "llm_grammar_format": cfg.grammar_format or "",
            "llm_chinese_messages": "on" if cfg.requires_chinese() else "off", _RESOLVED_MARK: time.time()}


def _record_grammar(config: dict, model_config, inspection, p, record: dict | None):
    """What the check resolved of the grammar, into the config (the engine, the manifest) and the
    record (the pages): on or off and why, and whether zh messages must be Chinese."""
    from agents.models import grammar_state, resolve_constrained_output

    resolved = resolve_constrained_output(model_config, inspection)
    config.update(_resolved_keys(resolved))
    if record is not None:
        chinese = (f"; messages must be Chinese (llm_chinese_messages {model_config.chinese_messages})"
                   if p.language == "zh_hans" and resolved.requires_chinese() else "")
        record.setdefault("model_check", dict(status="not run", provider=model_config.provider,
                                              model=model_config.model, checked_at=time.time()))
        record["model_check"].update(constrained_output=resolved.constrained_output,
                                     grammar_format=resolved.grammar_format,
                                     grammar=grammar_state(model_config, inspection) + chinese)
    return resolved


def agent_stage_seconds(p) -> dict[str, float]:
    """The stages in which an agent calls its model, and their limits."""
    return {stage: p.stage_limits[stage] for stage in ("message_1", "message_2", "decision")}


def _inspect_server(config: dict, model_config, model, p, record: dict | None,
                    num_participants: int, experiment=None) -> None:
    """An openai_compatible server at the model check: the grammar it takes (llm_constrained_output
    auto/on), and whether it serves the session's agents in time (agents/capacity.py): refused with
    the numbers if not, warned about if narrowly."""
    from agents.capacity import SessionDemand, check_capacity
    from agents.models import inspect_server

    inspection = inspect_server(model_config, model=model)
    log.info("model check of %s: grammar %s (%s)", model_config.base_url, inspection.grammar_format,
             "; ".join(inspection.notes))
    if model_config.constrained_output == "on" and inspection.grammar_format is None:
        raise ModelRefused(
            f"Agent model: llm_constrained_output is on, but the server at {model_config.base_url} obeyed none "
            f"of the grammar fields tried ({'; '.join(inspection.notes)}). Use auto or off, or a server that "
            f"takes a grammar (llama.cpp, vLLM; docs/agents.md).")
    resolved = _record_grammar(config, model_config, inspection, p, record)
    default_concurrency = type(model_config).model_fields["concurrency"].default
    demand = SessionDemand(num_participants, p.rounds_per_game, agent_language(p.language), p.associate_type,
                           agent_stage_seconds(p), games=tuple(game for game in protocol.GAMES if game in p.games),
                           message_max_chars=p.message_max_chars, experiment=experiment)
    # measured with the resolved model (its grammar), as the session's agents will call it
    capacity = check_capacity(resolved, demand,
                              concurrency=None if resolved.concurrency == default_concurrency else resolved.concurrency)
    if resolved.concurrency == default_concurrency:  # left at its default: the calls queue in the lab, by deadline
        config["llm_concurrency"] = capacity.speed.slots
    log.info("Agent model: %s", capacity.summary())
    warned = capacity.verdict in ("narrow", "unmeasured")
    if record is not None:
        record["model_check"].update(capacity=capacity.as_record(), warning=capacity.summary() if warned else None)
    if capacity.verdict == "refused":
        raise ModelRefused(f"Agent model: {capacity.summary()} (to create it anyway: llm_check_model false, "
                           "and llm_constrained_output on to keep the grammar)")
