"""The experiment files (experiments/*.toml, experiment_design/): the paper's equals what the code runs
today (protocol.py, settings.py's 16 session configs, the locale's words, the agents' persona names),
the shipped examples load, and what the running code will ask of an experiment. In-process, no server."""

from __future__ import annotations

import hashlib
import re

import pytest

import experiment_design
import protocol
from experiment_design import EXPERIMENTS_DIR, ExperimentError, load, load_text

PAPER = EXPERIMENTS_DIR / "paper.toml"
EXAMPLES = ("stag_hunt", "fixed_partner_one_message", "tit_for_tat_en")


@pytest.fixture(scope="module")
def paper():
    return load(PAPER)


def test_every_shipped_experiment_passes_the_check():
    experiments, problems = experiment_design.check_files(experiment_design.experiment_files())
    assert [str(problem) for problem in problems] == []
    assert sorted(e.name for e in experiments) == sorted(["paper", *EXAMPLES])


def test_the_paper_file_holds_protocol_py_s_numbers(paper):
    """Every design value of protocol.py, as the file gives it: the wiring can read the experiment
    instead of protocol.py and change nothing."""
    assert paper.choice_ids == protocol.CHOICES
    assert paper.cooperative_choice == protocol.COOPERATE
    assert paper.payoff_matrix == protocol.PAYOFFS
    assert all(isinstance(points, int) for pair in paper.payoff_matrix.values() for points in pair)  # 70, not 70.0
    assert all(paper.payoff(own, other) == protocol.payoff(own, other) for own, other in protocol.PAYOFFS)
    assert paper.rounds_per_game == protocol.ROUNDS_PER_GAME
    assert paper.stage_limits() == protocol.STAGE_LIMITS
    assert list(paper.stage_limits()) == list(protocol.STAGE_LIMITS)  # in the order a round runs them
    assert paper.stage_limits("WoC") == {"decision": 40, "result": 30}
    assert paper.message_max_chars == protocol.MESSAGE_MAX_CHARS
    assert paper.agent_message_max_words == protocol.AGENT_MESSAGE_MAX_WORDS
    assert paper.design.treatments.associate_types == protocol.ASSOCIATE_TYPES
    assert {a: paper.treatment_code(a) for a in protocol.ASSOCIATE_TYPES} == protocol.TREATMENT_CODES
    assert tuple(paper.design.personas) == protocol.PERSONAS
    assert paper.design.treatments.label_settings == protocol.LABEL_SETTINGS
    assert paper.game_orders == protocol.GAME_ORDERS
    assert paper.game_ids == protocol.GAMES
    assert paper.design.languages == protocol.LANGUAGES
    payment = paper.design.payment
    assert (payment.show_up_fee, payment.currency_per_point, payment.norm_bonus, payment.currency) == (
        protocol.SHOW_UP_FEE, protocol.CURRENCY_PER_POINT, protocol.NORM_BONUS, protocol.CURRENCY_CODE)
    assert paper.design.questionnaires.norm_intervals == protocol.NORM_INTERVALS
    assert paper.matching == "perfect_strangers" and not paper.can_meet_same_associate_again
    assert paper.least_human_participants == 12


def test_the_paper_file_holds_the_texts_and_prompts_the_code_uses(paper):
    from agents.prompts import CHAT_LANGUAGE_NAMES, PERSONA_NAMES
    from lab.base import i18n
    from lab.base.i18n import AGENT_LANGUAGE
    from lab.base.session_settings import GAME_APPS

    assert {name: paper.persona_prompt_name(name) for name in paper.design.personas} == PERSONA_NAMES
    for language in paper.design.languages:
        agent_language = AGENT_LANGUAGE[language]
        texts = i18n.load_texts(language)
        assert paper.associate_words("informed", "human", language) == texts["common_associate_humans"]
        assert paper.associate_words("informed", "fair", language) == texts["common_associate_machines"]
        for associate_type in protocol.ASSOCIATE_TYPES:
            assert paper.associate_words("uninformed", associate_type, language) == texts["common_associate_either"]
        assert [paper.choice_label(choice, language) for choice in paper.choice_ids] == [
            texts["common_choice_a"], texts["common_choice_b"]]
        assert paper.design.agents.system_prompt[language] == f"prompts/system_{agent_language}.j2"
        assert paper.design.agents.example_dialogues[language] == f"prompts/examples_{agent_language}.j2"
        assert paper.design.agents.chat_language[language] == CHAT_LANGUAGE_NAMES[agent_language]
        for persona in protocol.PERSONAS:
            assert paper.roleplay_file(persona, language) == f"prompts/roleplay_{persona}.j2"
    assert experiment_design.GAME_APPS == GAME_APPS
    # the paper's design shows the paper's texts, in every place a design may change them
    assert all(not key.startswith("variants.") for key in paper.text_keys.values())
    assert paper.text_key("rules_body") == "intro_rules_body"


def test_settings_py_offers_the_paper_s_16_sessions_as_they_were(paper):
    """settings.py builds its configs from experiments/paper.toml: the paper's 16, with the names,
    treatments and apps they had when settings.py built them from protocol.py, and the experiment's
    values today's defaults (SESSION_CONFIG_DEFAULTS), so the sessions run as before."""
    import protocol
    import settings

    before = []
    for associate_type in protocol.ASSOCIATE_TYPES:
        code = protocol.TREATMENT_CODES[associate_type]
        for label_setting in protocol.LABEL_SETTINGS:
            for game_order, (first, second) in protocol.GAME_ORDERS.items():
                apps = {"WC": "game_with_chat", "WoC": "game_without_chat"}
                before.append(dict(
                    name=f"{code.replace('-', '').lower()}_{label_setting}_{first.lower()}_first",
                    display_name=f"{code} · label-{label_setting} · {first}→{second}",
                    app_sequence=["instructions", apps[first], apps[second], "questionnaire", "payment"],
                    num_demo_participants=12 if associate_type == "human" else 2, associate_type=associate_type,
                    label_setting=label_setting, game_order=game_order))
    papers = [config for config in settings.SESSION_CONFIGS if config["experiment"] == "paper"]
    assert settings.SESSION_CONFIGS[:16] == papers  # the paper's first, as the create page lists them
    for config, was in zip(papers, before, strict=True):
        assert {key: config[key] for key in was} == was
        assert config["experiment"] == "paper" and config["experiment_sha256"] == paper.text_sha256
        values = {key: value for key, value in config.items()
                  if key not in was and key not in ("experiment", "experiment_sha256", "doc")}
        assert values == {key: settings.SESSION_CONFIG_DEFAULTS[key] for key in values}
        assert all(type(value) is type(settings.SESSION_CONFIG_DEFAULTS[key]) for key, value in values.items())


def test_the_examples_configs_are_named_after_their_experiment():
    stag_hunt, fixed, tft = (load(EXPERIMENTS_DIR / f"{name}.toml") for name in EXAMPLES)
    names = {c["name"] for e in (stag_hunt, fixed, tft) for c in e.session_configs()}
    assert "stag_hunt_hf_informed_wc_first" in names
    assert "fixed_partner_one_message_hs_uninformed_woc_first" in names
    assert "tft_ht_informed_wc_first" in names and "tft_hu_uninformed_woc_first" in names
    config = next(c for c in tft.session_configs(server_language="zh_hans") if c["name"] == "tft_hu_informed_wc_first")
    assert config["language"] == "en"  # the server's language is not one this experiment offers
    assert config["display_name"] == f"{tft.design.title} · H-U · label-informed · WC→WoC"
    assert config["participation_fee"] == 2.0 and config["real_world_currency_per_point"] == 0.005
    assert config["experiment"] == "tit_for_tat_en" and config["num_demo_participants"] == 2
    one_message = next(c for c in fixed.session_configs() if c["associate_type"] == "human")
    assert {key for key in one_message if key.endswith("_seconds")} == {
        "message_1_seconds", "read_1_seconds", "decision_seconds", "result_seconds"}
    assert one_message["num_demo_participants"] == 4
    assert fixed.session_configs(max_rounds_per_game=3)[0]["rounds_per_game"] == 3


def test_what_the_running_code_asks_of_an_example():
    stag_hunt = load(EXPERIMENTS_DIR / "stag_hunt.toml")
    assert stag_hunt.payoff("A", "A") == 80 and stag_hunt.payoff("B", "A") == 50 and stag_hunt.payoff("A", "B") == 10
    fixed = load(EXPERIMENTS_DIR / "fixed_partner_one_message.toml")
    assert fixed.chat_exchanges("WC") == 1
    assert list(fixed.stage_limits("WC")) == ["message_1", "read_1", "decision", "result"]
    assert fixed.can_meet_same_associate_again
    assert fixed.text_key("new_associate") == "variants_new_associate_fixed_partner"
    assert fixed.text_key("game_intro_with_chat") == "variants_game_intro_with_chat_exchanges1"
    assert fixed.session_size_problem("human", 2) == (
        "fixed_partner matching with 2 games needs a new partner for the second game: use at least 4 participants")
    assert fixed.session_size_problem("fair", 1) is None
    tft = load(EXPERIMENTS_DIR / "tit_for_tat_en.toml")
    treatment = tft.treatment(dict(associate_type="tit_for_tat", label_setting="uninformed", game_order="WoC-WC"))
    assert (treatment.code, treatment.game_order, treatment.informed, treatment.with_agents) == (
        "H-T", ("WoC", "WC"), False, True)
    assert tft.associate_words("informed", "unconditional_cooperator", "en") == "AI"
    assert tft.associate_words("informed", "human", "en") == "human"
    assert tft.persona_prompt_name("tit_for_tat") == "RECIPROCATING"
    assert tft.text_params("en") == {"choice_1": "A", "choice_2": "B", "cooperative_choice": "A"}
    with pytest.raises(ValueError, match="associate_type.*'fair'.*tit_for_tat_en has human, tit_for_tat"):
        tft.treatment(dict(associate_type="fair", label_setting="informed", game_order="WC-WoC"))


def test_the_new_personas_are_motivations_not_instructions():
    """Written as the paper writes its personas (SI Note 5): a person's motivation; never told to
    choose A or B, to cooperate or to defect."""
    tft = load(EXPERIMENTS_DIR / "tit_for_tat_en.toml")
    for name in tft.design.personas:
        text = (experiment_design.PROJECT_DIR / tft.roleplay_file(name, "en")).read_text(encoding="utf-8")
        assert text.startswith(f"You are a {tft.persona_prompt_name(name)} human, and your motivation in playing the "
                               "game is")
        for word in (" A ", " B ", "choose", "cooperate", "defect", "promise"):
            assert word not in text


def test_hashes_the_record_and_the_design(paper):
    text = PAPER.read_bytes()
    assert paper.text == text.decode("utf-8")
    assert paper.text_sha256 == hashlib.sha256(text).hexdigest()
    # comments, spacing and key order are not the design; a value is
    reworded = load_text(paper.text.replace("# Seconds (SI Note 1).", "# Seconds.").replace(
        "max_chars = 300  # a chat line, not an essay", "max_chars=300"), "paper")
    assert reworded.text_sha256 != paper.text_sha256
    assert reworded.canonical_hash == paper.canonical_hash
    assert load_text(paper.text.replace("decision = 40", "decision = 45"), "paper").canonical_hash != paper.canonical_hash


def test_an_experiment_is_loaded_once_per_text_and_cannot_change(paper):
    assert load_text(paper.text, "paper") is load_text(PAPER.read_text(encoding="utf-8"), "paper")
    with pytest.raises(TypeError, match="immutable"):
        paper.design.game.payoffs["A"]["A"] = (0, 0)
    with pytest.raises(TypeError, match="immutable"):
        paper.design.labels["informed"].human["en"] = "robots"
    with pytest.raises(Exception, match="frozen"):
        paper.design.game.rounds_per_game = 3


def test_load_text_refuses_with_every_problem(paper):
    broken = paper.text.replace("decision = 40", "decision = nan").replace("result = 30", "result = -1")
    with pytest.raises(ExperimentError) as refused:
        load_text(broken, "paper")
    assert [p.field for p in refused.value.problems] == ["stage_limits.decision", "stage_limits.result"]
    assert "paper.toml: stage_limits.decision: is nan, not a finite number" in str(refused.value)


def test_the_reference_documents_every_field():
    """docs/experiment-file.md names every key of the schema, so the reference cannot fall behind it."""
    from pydantic import BaseModel

    from experiment_design import schema

    reference = (experiment_design.PROJECT_DIR / "docs" / "experiment-file.md").read_text(encoding="utf-8")
    models = [value for value in vars(schema).values()
              if isinstance(value, type) and issubclass(value, BaseModel) and value not in (BaseModel, schema.Model)]
    prose = re.sub(r"```.*?```", "", reference, flags=re.S)
    quoted = " ".join(re.findall(r"`([^`]+)`", prose))  # keys as the reference writes them: `decision`, `[game]`
    undocumented = {f"{model.__name__}.{key}" for model in models for key in model.model_fields
                    if not re.search(rf"(?<![\w<]){key}(?![\w>])", quoted)}
    assert undocumented == set()
    for page in experiment_design.QUESTIONNAIRE_PAGES + experiment_design.MATCHING_RULES:
        assert f"`{page}`" in reference


def test_the_package_imports_nothing_of_the_project():
    """Every room may use it (the apps, lab/, agents/, analysis/, settings.py): it stands below them all."""
    from tests.test_architecture import PROJECT, imported_names, module_name, source_files

    project_rooms = {module_name(path).split(".")[0] for path in source_files()} - {"experiment_design"}
    for path in (PROJECT / "experiment_design").glob("*.py"):
        reached = {name.split(".")[0] for name in imported_names(path)}
        assert reached & project_rooms == set(), path.name
        assert reached <= {"experiment_design", "pydantic", "pydantic_core", "__future__", "collections", "dataclasses",
                           "functools", "hashlib", "json", "math", "pathlib", "re", "string", "sys", "tomllib",
                           "typing", "unicodedata"}, path.name


def test_each_difference_from_the_paper_shows_its_own_texts(paper):
    """The slots of the texts (docs/experiment-file.md, Texts): the paper's key where the design is the
    paper's in what the text says, a [variants] key named by the design's features elsewhere."""
    labelled = load_text(paper.text.replace('label = { zh_hans = "A", en = "A" }', 'label = { zh_hans = "鹿", en = "Stag" }'),
                         "labelled")
    assert {slot: key for slot, key in labelled.text_keys.items() if key != paper.text_keys[slot]} == {
        "rules_body": "variants.rules_body_games2_perfect_strangers",
        "rules_body_after": "variants.rules_body_after_chat2_games2",
        "decision_prompt": "variants.decision_prompt",
        "game_intro_with_chat": "variants.game_intro_with_chat_exchanges2",
        "game_intro_without_chat": "variants.game_intro_without_chat",
        "norm_intro": "variants.norm_intro_bonus",
        "norm_game_WC": "variants.norm_game_WC",
        "norm_game_WoC": "variants.norm_game_WoC",
    }
    assert labelled.text_params("zh_hans") == {"choice_1": "鹿", "choice_2": "B", "cooperative_choice": "鹿"}
    unpaid = load_text(paper.text.replace("norm_bonus = 10.0", "norm_bonus = 0"), "unpaid")
    assert {slot: key for slot, key in unpaid.text_keys.items() if key != paper.text_keys[slot]} == {
        "welcome_terms": "variants.welcome_terms_no_bonus", "norm_intro": "variants.norm_intro_no_bonus"}


def test_a_session_runs_the_experiment_file_the_server_started_with(tmp_path, monkeypatch):
    """The session's record keeps the file's text and hashes; a file edited after the server started
    (its sessions' settings are the file's as it was then) refuses creation until a restart."""
    import hashlib

    import experiment_design
    from lab.record.manifest import session_experiment_now
    from lab.base.session_settings import SessionConfigError, session_experiment

    paper_bytes = (EXPERIMENTS_DIR / "paper.toml").read_bytes()
    record = session_experiment_now({"experiment": "paper"})[1]
    assert record["text"].encode("utf-8") == paper_bytes
    assert record["text_sha256"] == hashlib.sha256(paper_bytes).hexdigest()
    assert record["design_sha256"] == load(EXPERIMENTS_DIR / "paper.toml").canonical_hash
    assert session_experiment({"experiment": "paper", "experiment_sha256": record["text_sha256"]}).name == "paper"

    (tmp_path / "paper.toml").write_bytes(paper_bytes.replace(b"rounds_per_game = 10", b"rounds_per_game = 8"))
    monkeypatch.setattr(experiment_design, "EXPERIMENTS_DIR", tmp_path)
    with pytest.raises(SessionConfigError, match="edited after this server started.*: restart the server"):
        session_experiment({"experiment": "paper", "experiment_sha256": record["text_sha256"]})
    assert session_experiment_now({"experiment": "paper"})[1]["text_sha256"] != record["text_sha256"]  # as differs_at_export
    with pytest.raises(SessionConfigError, match="experiments/gone.toml cannot run now"):
        session_experiment({"experiment": "gone"})
    gone, gone_record = session_experiment_now({"experiment": "gone"})
    assert gone is None and "cannot run now" in gone_record["error"]
