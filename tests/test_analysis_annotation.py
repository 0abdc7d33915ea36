"""Annotation (SI Note 2): the template, the import and resolution, Cohen's kappa, the machine
annotator (with a stub model: the agents package's providers are not needed)."""

import json
from dataclasses import dataclass

import pandas as pd
import pytest

from agents.types import ModelReply
from analysis import analyse, annotation, load_exports, machine_annotate, synthetic, write_report
from analysis.load import LABEL_COLUMNS
from analysis.stats import cohens_kappa


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exports")
    parameters = synthetic.SyntheticParameters(participants_per_session=6, label_settings=("informed",),
                                               treatments=("H-H", "H-F"), game_orders=("WC-WoC",))
    tables = synthetic.generate(parameters, seed=7, annotations=False)
    synthetic.write(tables, folder)
    return folder


def row(conversation, annotator, agreement="True", p1="A", p2="A", wants1="A", wants2="A"):
    return {"conversation_id": conversation, "annotator": annotator, "p1_preferred": p1, "p2_preferred": p2,
            "p1_wants_other": wants1, "p2_wants_other": wants2, "agreement": agreement}


# --- Resolution --------------------------------------------------------------------------------------
def test_resolution_takes_agreeing_annotators_else_the_resolver():
    annotations = pd.DataFrame([
        row("c1", "ann-1"), row("c1", "ann-2"),  # agree
        row("c2", "ann-1", agreement="True"), row("c2", "ann-2", agreement="False", p2="B"),
        row("c2", "resolver", agreement="False", p2="B"),  # disagree, resolved
        row("c3", "ann-1", agreement="True"), row("c3", "ann-2", agreement="False"),  # disagree, no resolver
        row("c4", "ann-3", p1="B", agreement="False"),  # one annotator only
    ])
    resolved = annotation.resolve(annotations).set_index("conversation_id")
    assert resolved.loc["c1", "agreement"] == True  # noqa: E712
    assert resolved.loc["c1", "label_source"] == "annotators"
    assert (resolved.loc["c2", "agreement"], resolved.loc["c2", "p2_preferred"]) == (False, "B")
    assert resolved.loc["c2", "p1_preferred"] == "A"  # the annotators agreed on this column
    assert resolved.loc["c2", "label_source"] == "resolver"
    assert pd.isna(resolved.loc["c3", "agreement"]) and resolved.loc["c3", "label_source"] == "unresolved"
    assert resolved.loc["c4", "label_source"] == "single annotator" and resolved.loc["c4", "p1_preferred"] == "B"


def test_machine_labels_are_used_only_where_no_human_annotated():
    annotations = pd.DataFrame([
        row("c1", "ann-1"), row("c1", "ann-2"), row("c1", "machine:gpt", agreement="False"),
        row("c2", "machine:gpt", agreement="False", p2="B"),
    ])
    resolved = annotation.resolve(annotations).set_index("conversation_id")
    assert resolved.loc["c1", "agreement"] == True and resolved.loc["c1", "label_source"] == "annotators"  # noqa: E712
    assert resolved.loc["c2", "agreement"] == False and resolved.loc["c2", "label_source"] == "machine"  # noqa: E712


def test_kappa_per_label_column_between_the_two_annotators_of_each_conversation():
    # Annotators differ between conversations, as in the paper: of each conversation's two
    # annotators, the first by id is compared with the second.
    pairs = [("True", "True"), ("True", "False"), ("False", "False"), ("True", "True"), ("False", "False"),
             ("False", "True")]
    rows = []
    for index, (first, second) in enumerate(pairs):
        rows += [row(f"c{index}", f"b-{index}", agreement=second), row(f"c{index}", f"a-{index}", agreement=first)]
    table = annotation.inter_annotator_agreement(pd.DataFrame(rows)).set_index("label")
    expected = cohens_kappa([a for a, _ in pairs], [b for _, b in pairs])
    assert table.loc["agreement", "cohens_kappa"] == pytest.approx(expected)
    assert table.loc["agreement", "percent_agreement"] == pytest.approx(100 * 4 / 6)
    assert table.loc["agreement", "conversations"] == 6


# --- Template and import -----------------------------------------------------------------------------
def test_template_has_one_row_per_wc_conversation_anonymised_and_blind(export_dir, tmp_path):
    analysis = write_report(load_exports(export_dir), tmp_path / "report")
    template = pd.read_csv(tmp_path / "report" / "annotation_template.csv", keep_default_na=False)
    key = pd.read_csv(tmp_path / "report" / annotation.KEY_NAME, keep_default_na=False)
    assert list(template.columns) == annotation.TEMPLATE_COLUMNS
    assert len(template) == len(analysis.conversations) == template["item"].nunique()
    assert not {"conversation_id", "treatment", "associate_type", "p1_code", "p2_code"} & set(template.columns)
    assert (template[["annotator", *LABEL_COLUMNS]] == "").all().all()
    # Blind: the opaque ids say nothing (real ids carry the session, the treatment and "agent"),
    # and the rows are not grouped by session or treatment.
    sessions = set(analysis.conversations["session_code"])
    assert not any(s in item for item in template["item"] for s in sessions)
    assert not template["item"].str.contains("agent|H-|WC", regex=True).any()
    order = template.merge(key, on="item")["conversation_id"].map(
        analysis.conversations.set_index("conversation_id")["treatment"])
    assert (order != order.shift()).sum() > len(set(order)) + 2  # treatments interleave
    assert set(key["conversation_id"]) == set(analysis.conversations["conversation_id"])
    messages = analysis.exports.messages
    unsent = messages[messages["sent_in_time"] == False]  # noqa: E712
    if not unsent.empty:  # a message nobody saw appears as "(no message)"
        item = key.set_index("conversation_id").loc[unsent.iloc[0]["conversation_id"], "item"]
        assert annotation.NO_MESSAGE in template.set_index("item").loc[item].to_list()
    # Without annotations the report says where the template is, instead of failing.
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "No annotations yet — fill the template at" in html
    assert str(tmp_path / "report" / "annotation_template.csv") in html
    # Written again (e.g. after more sessions), the same conversations keep their ids.
    write_report(load_exports(export_dir), tmp_path / "report")
    assert pd.read_csv(tmp_path / "report" / annotation.KEY_NAME).equals(key)


def _filled_copies(export_dir, tmp_path, labels):
    """The exports, the key and one filled template per annotator: ``labels(annotator, template)``
    returns the filled copy."""
    write_report(load_exports(export_dir), tmp_path / "report")
    template = pd.read_csv(tmp_path / "report" / "annotation_template.csv", keep_default_na=False)
    folder = tmp_path / "with-annotations"
    folder.mkdir()
    for path in export_dir.glob("*.csv"):
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / annotation.KEY_NAME).write_bytes((tmp_path / "report" / annotation.KEY_NAME).read_bytes())
    for annotator in ("ann-1", "ann-2"):
        labels(annotator, template.copy()).to_csv(folder / f"annotations_{annotator}.csv", index=False)
    return folder, template


def test_filled_templates_are_read_back_and_an_unfilled_one_is_ignored(export_dir, tmp_path):
    def fill(annotator, filled):
        filled["annotator"] = annotator
        filled["agreement"] = filled["p2_message_1"].str.contains("Agreed")
        for column in LABEL_COLUMNS[:4]:
            filled[column] = "A"
        return filled

    folder, template = _filled_copies(export_dir, tmp_path, fill)
    template.to_csv(folder / "unfilled_template.csv", index=False)
    exports = load_exports(folder)
    assert any("unfilled_template.csv" in p.file and p.column == "annotator" for p in exports.problems)
    analysis = analyse(exports)
    agreed = analysis.conversations["agreement"]
    assert agreed.notna().all()
    assert (agreed == analysis.conversations["p2_message_1"].str.contains("Agreed")).all()
    kappa = analysis.kappa.set_index("label")
    assert kappa.loc["agreement", "percent_agreement"] == 100
    rates = next(s for s in analysis.sections if s.key == "agreements").tables["rates"]
    assert set(rates["dimension"]) == {"agreements", "human_breaches", "agent_breaches"}


def test_filled_items_without_the_key_are_named_not_silently_dropped(export_dir, tmp_path):
    def fill(annotator, filled):
        filled["annotator"], filled["agreement"] = annotator, "yes"
        return filled

    folder, _ = _filled_copies(export_dir, tmp_path, fill)
    (folder / annotation.KEY_NAME).unlink()
    analysis = analyse(load_exports(folder))
    assert any(p.column == "item" and annotation.KEY_NAME in p.message for p in analysis.exports.problems)


SPELLINGS = [("是", True), ("否", False), ("yes", True), ("No", False), ("1", True), ("0", False),
             ("agreed", True), ("1.0", True), ("0.0", False), ("TRUE", True), ("达成", True), ("未达成", False)]


def test_annotators_spellings_in_both_languages_are_read(tmp_path):
    rows = [row(f"c{i}", "ann-1", agreement=text, p1="策略A", p2="b", wants1="Ａ", wants2="不清楚")
            for i, (text, _) in enumerate(SPELLINGS)]
    pd.DataFrame(rows).to_csv(tmp_path / "annotations.csv", index=False)
    exports = load_exports(tmp_path)
    assert not [p for p in exports.problems if p.level != "info"]
    resolved = annotation.resolve(exports.annotations).set_index("conversation_id")
    for index, (_, expected) in enumerate(SPELLINGS):
        assert resolved.loc[f"c{index}", "agreement"] == expected
        assert resolved.loc[f"c{index}", ["p1_preferred", "p2_preferred", "p1_wants_other", "p2_wants_other"]
                            ].tolist() == ["A", "B", "A", ""]


def test_unreadable_labels_are_listed_with_file_and_row_and_the_resolver_decides(tmp_path):
    pd.DataFrame([row("c1", "ann-1", agreement="maybe", p1="perhaps"), row("c1", "ann-2", agreement="??!"),
                  row("c1", "resolver", agreement="否"),
                  row("c2", "ann-1", agreement="hmm"), row("c2", "ann-2", agreement="yes")]).to_csv(
        tmp_path / "annotations.csv", index=False)
    exports = load_exports(tmp_path)
    agreement = next(p for p in exports.problems if p.column == "agreement")
    assert "annotations.csv" in agreement.file
    for text in ("row 2 'maybe'", "row 3 '??!'", "row 5 'hmm'"):
        assert text in agreement.message
    assert "row 2 'perhaps'" in next(p for p in exports.problems if p.column == "p1_preferred").message
    resolved = annotation.resolve(exports.annotations).set_index("conversation_id")
    # c1: neither annotator's value can be read -> the resolver's; c2: the one readable value.
    assert (resolved.loc["c1", "agreement"], resolved.loc["c1", "label_source"]) == (False, "resolver")
    assert resolved.loc["c2", "agreement"] == True  # noqa: E712
    assert resolved.loc["c2", "label_source"] == "single annotator"


def test_an_annotator_twice_on_one_conversation_is_flagged_and_counted_once(tmp_path):
    pd.DataFrame([row("c1", "ann-1"), row("c1", "ann-1", agreement="False"), row("c1", "ann-2")]).to_csv(
        tmp_path / "annotations.csv", index=False)
    exports = load_exports(tmp_path)
    problem = next(p for p in exports.problems if p.column == "annotator")
    assert "row 3" in problem.message and "'ann-1'" in problem.message
    assert len(exports.annotations) == 2
    assert annotation.inter_annotator_agreement(exports.annotations).set_index("label").loc[
        "agreement", "percent_agreement"] == 100


# --- The machine annotator ---------------------------------------------------------------------------
@dataclass
class StubSettings:
    model: str = "stub-1"


class StubModel:
    """The LanguageModel interface of agents.types: async complete(messages, *, deadline)."""

    def __init__(self, replies):
        self.settings = StubSettings()
        self.replies = replies
        self.prompts = []

    async def complete(self, messages, *, deadline, options=None):
        self.prompts.append(messages[0].content)
        return self.replies(messages[0].content)


def _reply(prompt: str) -> ModelReply:
    if "I will take B" in prompt:
        return ModelReply(status="ok", text="Sure: " + json.dumps({"p1_preferred": "", "p2_preferred": "B",
                                                                    "p1_wants_other": "A", "p2_wants_other": "A",
                                                                    "agreement": False}))
    if "nonsense" in prompt:
        return ModelReply(status="ok", text="I cannot tell.")
    if "timeout" in prompt:
        return ModelReply(status="timeout", error="deadline")
    return ModelReply(status="ok", text=json.dumps({"p1_preferred": "a", "p2_preferred": "A", "p1_wants_other": "A",
                                                    "p2_wants_other": "A", "agreement": "true"}))


def test_machine_annotation_fills_the_same_columns_labelled_as_machine():
    conversations = pd.DataFrame({
        "conversation_id": ["c1", "c2", "c3", "c4"],
        "p1_message_1": ["Let's both choose A", "What will you choose?", "nonsense", "timeout"],
        "p2_message_1": ["Agreed", "I will take B, sorry.", "", ""],
        "p1_message_2": ["", "", "", ""], "p2_message_2": ["", "", "", ""]})
    model = StubModel(_reply)
    rows = machine_annotate(conversations, model=model).set_index("conversation_id")
    assert set(rows["annotator"]) == {"machine:stub-1"}
    assert rows.loc["c1", LABEL_COLUMNS].tolist() == ["A", "A", "A", "A", "True"]
    assert (rows.loc["c2", "agreement"], rows.loc["c2", "p2_preferred"]) == ("False", "B")
    assert rows.loc["c3", "machine_note"] == "no JSON labels" and rows.loc["c3", "agreement"] == ""
    assert rows.loc["c4", "machine_note"] == "status timeout"
    assert "Player 2, message 1: (no message)" in model.prompts[2]  # empty messages are shown as such
    resolved = annotation.resolve(rows.reset_index()).set_index("conversation_id")
    assert resolved.loc["c1", "agreement"] == True and resolved.loc["c1", "label_source"] == "machine"  # noqa: E712
    assert pd.isna(resolved.loc["c3", "agreement"])



def test_machine_annotation_says_which_prompt_made_it_and_the_prompt_is_in_the_manifest():
    """The annotator's prompt is a file of prompts/ (its payoffs from protocol.py), versioned by its
    content on every machine row and hashed into the session manifest with the agents' prompts."""
    from lab.record.manifest import prompt_hashes

    conversations = pd.DataFrame({"conversation_id": ["c1"], "p1_message_1": ["A?"], "p2_message_1": ["A."],
                                  "p1_message_2": [""], "p2_message_2": [""]})
    model = StubModel(_reply)
    rows = machine_annotate(conversations, model=model)
    version = annotation.machine_prompt_version()
    assert version.startswith("annotation-") and rows["prompt_version"].tolist() == [version]
    assert "Payoffs (own, other): A/A 70/70, A/B 10/80, B/A 80/10, B/B 40/40." in model.prompts[0]
    assert f"annotation/{annotation.MACHINE_PROMPT}" in prompt_hashes()

def test_machine_annotation_is_compared_with_the_human_labels():
    humans = pd.DataFrame([row("c1", "ann-1"), row("c1", "ann-2"), row("c2", "ann-1", agreement="False"),
                           row("c2", "ann-2", agreement="False")])
    machine = pd.DataFrame([row("c1", "machine:stub-1"), row("c2", "machine:stub-1", agreement="True")])
    table = annotation.inter_annotator_agreement(pd.concat([humans, machine]))
    versus = table[table["comparison"] == "machine vs resolved human labels"].set_index("label")
    assert versus.loc["agreement", "percent_agreement"] == 50
    assert versus.loc["agreement", "conversations"] == 2


# --- Machine annotation from the CLI, against the local fake LLM server ------------------------------
def _fake_annotator_reply(request, api):
    """Labels as the humans' rule would give them, except where player 1 opens with a question."""
    prompt = request["messages"][-1]["content"]
    agreed = "Agreed" in prompt.split("Player 2, message 1:")[1].split("\n")[0]
    if "?" in prompt.split("Player 1, message 1:")[1].split("\n")[0]:
        agreed = not agreed
    return json.dumps({"p1_preferred": "A", "p2_preferred": "A", "p1_wants_other": "A", "p2_wants_other": "A",
                       "agreement": agreed})


def test_machine_annotation_cli_is_blind_and_compared_with_the_humans(export_dir, tmp_path, monkeypatch):
    from analysis.__main__ import main as cli_main
    from tests.fake_llm_server import FakeLLMServer

    def fill(annotator, filled):
        filled["annotator"] = annotator
        filled["agreement"] = filled["p2_message_1"].str.contains("Agreed").map({True: "是", False: "否"})
        for column in LABEL_COLUMNS[:4]:
            filled[column] = "A"
        return filled

    folder, template = _filled_copies(export_dir, tmp_path, fill)
    monkeypatch.setenv("FAKE_ANNOTATOR_KEY", "dummy")
    with FakeLLMServer() as server:
        server.set(reply=_fake_annotator_reply)
        code = cli_main(["annotate", str(tmp_path / "report"), "--provider", "openai_compatible", "--model",
                         "fake-annotator", "--base-url", server.base_url_openai, "--api-key-env",
                         "FAKE_ANNOTATOR_KEY", "--timeout", "30"])
        prompts = [request["messages"][-1]["content"] for _, request in server.requests]
    assert code == 0
    machine = pd.read_csv(tmp_path / "report" / annotation.MACHINE_FILE_NAME, dtype=str, keep_default_na=False)
    assert set(machine["item"]) == set(template["item"]) and "conversation_id" not in machine
    assert set(machine["annotator"]) == {"machine:fake-annotator"}
    # Blind: the model saw neither conversation ids, sessions nor treatments.
    exports = load_exports(folder)
    secrets_of_the_design = set(exports.decisions["conversation_id"]) | set(exports.decisions["session_code"])
    assert len(prompts) == len(template)
    assert not any(secret in prompt for prompt in prompts for secret in secrets_of_the_design)
    assert not any(t in prompt for prompt in prompts for t in ("H-H", "H-F", "agent-"))

    (folder / annotation.MACHINE_FILE_NAME).write_bytes((tmp_path / "report" / annotation.MACHINE_FILE_NAME)
                                                         .read_bytes())
    analysis = analyse(load_exports(folder))
    versus = analysis.kappa[analysis.kappa["comparison"] == "machine vs resolved human labels"].set_index("label")
    humans = template.set_index("item")["p2_message_1"].str.contains("Agreed")
    questions = template.set_index("item")["p1_message_1"].str.contains("?", regex=False)
    assert questions.any() and not questions.all()  # the machine disagrees on some, not all
    machine_says = humans ^ questions
    assert versus.loc["agreement", "conversations"] == len(template)
    assert versus.loc["agreement", "cohens_kappa"] == pytest.approx(
        cohens_kappa(humans.astype(str), machine_says.reindex(humans.index).astype(str)))
    assert versus.loc["agreement", "percent_agreement"] == pytest.approx(100 * (~questions).mean())
    # Humans annotated everything: the machine's labels are compared, not used.
    assert set(analysis.resolved_labels["label_source"]) == {"annotators"}


def test_machine_annotation_cli_without_a_template_says_so(tmp_path):
    from analysis.__main__ import main as cli_main

    assert cli_main(["annotate", str(tmp_path), "--provider", "simulated"]) == 2


def test_a_report_in_a_new_folder_keeps_the_items_of_the_key_passed_with_the_inputs(export_dir, tmp_path):
    def fill(annotator, filled):
        filled["annotator"], filled["agreement"] = annotator, "1"
        return filled

    folder, template = _filled_copies(export_dir, tmp_path, fill)
    write_report(load_exports(folder), tmp_path / "new-report")
    old = pd.read_csv(folder / annotation.KEY_NAME).sort_values("item", ignore_index=True)
    new = pd.read_csv(tmp_path / "new-report" / annotation.KEY_NAME).sort_values("item", ignore_index=True)
    assert new.equals(old)


def test_the_second_task_breach_template_is_blind_and_its_ratings_are_reported(tmp_path):
    exports_dir = tmp_path / "exports"
    parameters = synthetic.SyntheticParameters(participants_per_session=6, label_settings=("informed",),
                                               treatments=("H-F", "H-S"), game_orders=("WC-WoC",))
    synthetic.write(synthetic.generate(parameters, seed=11), exports_dir)
    (exports_dir / "motives.csv").unlink(missing_ok=True)
    analysis = write_report(load_exports(exports_dir), tmp_path / "report")
    breaches = pd.read_csv(tmp_path / "report" / annotation.BREACH_TEMPLATE_NAME, dtype=str, keep_default_na=False)
    agent_breaches = analysis.sides[(analysis.sides["kind"] == "agent") & (analysis.sides["breached"] == True)]  # noqa: E712
    assert len(breaches) == len(agent_breaches) > 0
    assert list(breaches.columns) == annotation.BREACH_TEMPLATE_COLUMNS
    assert (breaches["agent_output"].str.contains("I DECIDE TO CHOOSE [B]", regex=False)).all()
    key = pd.read_csv(tmp_path / "report" / annotation.KEY_NAME)
    assert set(breaches["item"]) <= set(key["item"])
    assert not breaches["item"].str.contains("H-|agent", regex=True).any()
    # Two annotators: one writes 是/否, the other 1/0; they disagree on the first breach's coherence.
    first, second = breaches.copy(), breaches.copy()
    first["annotator"], second["annotator"] = "ann-1", "ann-2"
    first["coherent"], second["coherent"] = "是", "1"
    second.loc[0, "coherent"] = "0"
    first["error_free"], second["error_free"] = "否", "0"
    for motive in ("risk_aversion", "inequality_aversion", "strategic_defection", "unconditional_defection"):
        first[motive], second[motive] = "1", "2"
    first.to_csv(exports_dir / "breaches_ann-1.csv", index=False)
    second.to_csv(exports_dir / "breaches_ann-2.csv", index=False)
    (exports_dir / annotation.KEY_NAME).write_bytes((tmp_path / "report" / annotation.KEY_NAME).read_bytes())
    exports = load_exports(exports_dir)
    assert not [p for p in exports.problems if p.level != "info"]
    motives = next(s for s in analyse(exports).sections if s.key == "motives")
    checks = motives.tables["coherence_error_free"].set_index(["persona", "check"])
    total = checks.xs("coherent", level="check")["ratings"].sum()
    assert total == 2 * len(breaches)
    assert checks.xs("coherent", level="check")["yes"].sum() == 2 * len(breaches) - 1
    assert checks.xs("error_free", level="check")["yes"].sum() == 0
    kappa = motives.tables["coherence_error_free_kappa"].set_index("check")
    assert kappa.loc["coherent", "breaches"] == len(breaches)
    assert kappa.loc["coherent", "percent_agreement"] == pytest.approx(100 * (len(breaches) - 1) / len(breaches))
    assert not motives.tables["motive_tests"].empty


def test_annotations_without_a_readable_agreement_are_not_called_missing(export_dir, tmp_path):
    def fill(annotator, filled):
        filled["annotator"], filled["agreement"] = annotator, "perhaps"
        return filled

    folder, _ = _filled_copies(export_dir, tmp_path, fill)
    analysis = analyse(load_exports(folder))
    notes = " ".join(next(s for s in analysis.sections if s.key == "agreements").notes)
    assert "No annotations yet" not in notes and "none has a resolved agreement label" in notes
    problem = next(p for p in analysis.exports.problems if p.column == "agreement")
    assert "'perhaps'" in problem.message and "row 2" in problem.message


def test_machine_annotation_cli_without_usable_replies_fails_and_says_why(export_dir, tmp_path, monkeypatch,
                                                                          capsys):
    from analysis.__main__ import main as cli_main
    from tests.fake_llm_server import FakeLLMServer

    write_report(load_exports(export_dir), tmp_path / "report")
    monkeypatch.setenv("FAKE_ANNOTATOR_KEY", "dummy")
    with FakeLLMServer() as server:
        server.set(reply="I would rather not say.")
        code = cli_main(["annotate", str(tmp_path / "report"), "--provider", "openai_compatible", "--model",
                         "fake-annotator", "--base-url", server.base_url_openai, "--api-key-env",
                         "FAKE_ANNOTATOR_KEY", "--timeout", "30"])
    assert code == 1
    assert "no reply held usable labels (no JSON labels)" in capsys.readouterr().err
    rows = pd.read_csv(tmp_path / "report" / annotation.MACHINE_FILE_NAME, keep_default_na=False)
    assert (rows["machine_note"] == "no JSON labels").all()
    # Such rows are no labels: nothing is resolved from them.
    assert annotation.resolve(rows.assign(conversation_id=rows["item"]))["label_source"].eq("unresolved").all()
