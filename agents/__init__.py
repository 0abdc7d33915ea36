"""Persona LLM agents of the paper's SI Note 5, usable by the lab and the simulations alike.

- ``agents.types``: the contract (statuses, CallRecord, TurnResult, ModelReply, LanguageModel);
- ``agents.config``: ``ModelConfig`` (validated), ``default_model_config``, ``ConfigError``;
- ``agents.models``: ``build_model(cfg, budget=...)``, ``Budget`` and ``check_model`` (a package: the
  provider adapters, the layers around them, the budget);
- ``agents.agent``: ``PersonaAgent``;
- ``agents.prompts`` / ``agents.parsing``: the paper's prompts and reading the replies;
- ``agents.simulated``: the offline persona model.

No oTree import anywhere in this package. See docs/agents.md.
"""
