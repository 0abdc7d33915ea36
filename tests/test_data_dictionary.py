"""The data dictionary is the one place for column descriptions: docs/DATA.md's tables are generated
from it and it names exactly the columns the exports write; the manifest's secrets are redacted by
value; the analysis reads manifests of version 1 and 2 and compares frozen values only. No server."""

import csv
from types import SimpleNamespace

import pytest

from analysis import manifest as analysis_manifest
from lab.record import data_dictionary as dd
from lab.record import data_dictionary_otree as dd_otree
from lab.record import data_md
from lab.record import manifest as lab_manifest


def test_data_md_tables_are_generated_from_the_dictionary():
    text = data_md.DATA_MD.read_text(encoding="utf-8")
    named = {match.group(2) for match in data_md._BLOCK.finditer(text)}
    assert named == set(data_md.markdown_blocks()), "every generated table, and only those, is in DATA.md"
    assert data_md.render_data_md(text) == text, "docs/DATA.md is stale: run `python -m lab.record.data_md`"


def test_dictionary_names_exactly_the_columns_the_exports_write():
    import instructions
    import questionnaire
    from agents.types import CALL_RECORD_COLUMNS
    from lab.record import exports
    from lab.experimenter import interventions
    from lab.record.agent_exports import LLM_CALL_COLUMNS

    assert list(dd.DECISIONS) == exports.DECISION_COLUMNS
    assert list(dd.MESSAGES) == exports.MESSAGE_COLUMNS
    assert list(dd.PARTICIPANTS) == exports.participant_columns()
    # The participants table writes the questionnaire's fields in the dictionary's order.
    assert list(dd.QUESTIONNAIRE) == (
        questionnaire.NORM_FIELDS + questionnaire.PERCEPTION_FIELDS + questionnaire.SEVEN_C_FIELDS
        + ["believed_human", "llm_familiarity"] + questionnaire.SVO_FIELDS
        + ["svo_angle", "svo_category", "age", "gender", "major"])
    assert list(dd.LLM_CALLS) == LLM_CALL_COLUMNS
    assert LLM_CALL_COLUMNS == [*dd.SESSION_KEYS, "game", "participant_code", *CALL_RECORD_COLUMNS]
    assert list(dd.QUIZ_ATTEMPTS) == next(instructions.custom_export([]))
    assert list(dd.MANIFEST) == lab_manifest.MANIFEST_COLUMNS
    assert list(dd.INTERVENTIONS) == interventions.COLUMNS
    for (app, function_name), table in dd.CUSTOM_EXPORTS.items():
        assert callable(getattr(__import__(app), function_name)) and table in dd.TABLES



def test_the_simulations_and_the_analysis_name_the_labs_columns():
    """agents/ and analysis/ spell the columns they write or read themselves (agents/ imports
    nothing of lab/): the simulation's tables are the lab's, less the online sessions' columns,
    plus its own at the end; every column the analysis reads is one the lab writes."""
    from agents.simulate import tables as simulation
    from analysis.load import SPEC_BY_NAME

    online_only = {"stand_in", "partner_stand_in", "dropout_rule", "after_drop"}
    assert simulation.SESSION_KEYS == list(dd.SESSION_KEYS)
    for own, lab_table in ((simulation.DECISION_COLUMNS, dd.DECISIONS), (simulation.MESSAGE_COLUMNS, dd.MESSAGES)):
        shared = [column for column in lab_table if column not in online_only]
        assert own[:len(shared)] == shared
        assert not set(own[len(shared):]) & set(lab_table), "the simulation's extra columns come last"
    assert simulation.CALL_COLUMNS[:-1] == list(dd.LLM_CALLS)
    for name in ("decisions", "messages", "participants", "llm_calls"):
        spec = SPEC_BY_NAME[name]
        assert set(spec.required + spec.contract) <= set(dd.TABLES[name].columns), name

def _session(**config):
    from lab.base.session_settings import config_defaults

    full = {**config_defaults(), "associate_type": "fair", "label_setting": "informed", "game_order": "WC-WoC",
            "name": "hf_informed_wc_first", **config}
    return SimpleNamespace(code="abc123", config=full, num_participants=2, _created=None)


def test_manifest_keys_are_described():
    record = lab_manifest.creation_record(_session(llm_provider="simulated"))
    produced = set(record) | {"manifest_version", "provenance", "created_at", "started_at", "ended_at",
                              "exported_at", "differs_at_export"}
    assert produced == set(dd.MANIFEST_KEYS)


def test_secrets_are_redacted_by_value_not_by_a_word_in_the_key(monkeypatch):
    secret = "sk-this-is-the-key-0123456789"
    monkeypatch.setenv("MY_MODEL_KEY", secret)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-9876543210")
    monkeypatch.setenv("OTREE_ADMIN_PASSWORD", "pw")  # too short to search for: "pw" stays in "pwd"
    record = lab_manifest.creation_record(_session(
        llm_provider="openai_compatible", llm_base_url=f"http://127.0.0.1:9/v1?key={secret}",
        llm_api_key_env="MY_MODEL_KEY", llm_max_tokens=700, llm_model="sk-openai-9876543210-pwd"))
    config = record["session_config"]
    assert config["llm_max_tokens"] == 700, "a setting named like a token is no secret"
    assert config["llm_api_key_env"] == "MY_MODEL_KEY", "the variable's name is kept"
    assert config["llm_base_url"] == "http://127.0.0.1:9/v1?key=(redacted)"
    assert config["llm_model"] == "(redacted)-pwd"
    assert record["model_settings"]["max_tokens"] == 700
    assert record["model_settings"]["base_url"] == "http://127.0.0.1:9/v1?key=(redacted)"
    assert secret not in repr(record)


def _write_manifest_csv(path, rows, columns):
    with path.open("w", newline="", encoding="utf8") as fp:
        writer = csv.writer(fp)
        writer.writerow(columns)
        writer.writerows(rows)


def test_analysis_reads_both_versions_and_compares_frozen_values_only(tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    protocol = [("stage_limits", '{"decision": 40.0}'), ("rounds_per_game", "10"), ("message_max_chars", "300"),
                ("payoff_table", '{"AA": [70, 70]}'), ("payment", '{"norm_bonus": 10.0}')]
    # Version 1 (before the freeze): three columns, computed at export.
    _write_manifest_csv(folder / "v1.csv", [("old", k, v) for k, v in protocol + [
        ("manifest_version", "1"), ("prompts_sha256", '"aaa"'), ("treatment", '"H-H"')]],
        ["session_code", "key", "value"])
    # Version 2: frozen; today's code would hash the prompts differently (beside, not instead).
    _write_manifest_csv(folder / "v2.csv", [("new", k, v, "") for k, v in protocol + [
        ("manifest_version", "2"), ("provenance", '"frozen at session creation"'), ("treatment", '"H-H"')]]
        + [("new", "prompts_sha256", '"aaa"', '"bbb"')],
        ["session_code", "key", "value", "value_at_export"])
    manifests = analysis_manifest.load_manifests([folder])
    assert manifests["new"]["prompts_sha256"] == "aaa" and manifests["new"]["differs_at_export"] == {
        "prompts_sha256": "bbb"}
    assert analysis_manifest.check_poolable(manifests) == [], "today's prompts are not the session's"
    lines = dict(zip(sorted(manifests), analysis_manifest.summary_lines(manifests)))
    assert "NOT FROZEN" in lines["old"]
    assert "frozen at creation; today's code differs in prompts_sha256" in lines["new"]
    report = analysis_manifest.report_html(manifests, [])
    assert "Not frozen at creation" in report and "old" in report


@pytest.mark.parametrize("annotation, expected", [("int", "integer"), ("float", "number"), ("bool", "boolean")])
def test_model_settings_have_table_schema_types(annotation, expected):
    from typing import Optional

    assert dd_otree._annotation_type(Optional[eval(annotation)])[0] == expected
