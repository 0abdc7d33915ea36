"""Which experiment files the create page offers: those whose design the pages can run (the paper's,
its payoffs and session values aside), each other one with what keeps it from running."""

from __future__ import annotations

from experiment_design import EXPERIMENTS_DIR, load, load_text
from lab.base.offered_experiments import not_runnable, offered

PAPER = load(EXPERIMENTS_DIR / "paper.toml")


def _variant(*replacements: tuple[str, str]):
    text = PAPER.text.replace('session_config_prefix = ""', 'session_config_prefix = "variant_"')
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return load_text(text, "variant")


def test_the_paper_runs_and_so_does_a_copy_with_other_session_values():
    assert not_runnable(PAPER, PAPER) == []
    longer = _variant(("rounds_per_game = 10", "rounds_per_game = 6"), ("decision = 40", "decision = 25"),
                      ("show_up_fee = 15.0", "show_up_fee = 20.0"))
    assert not_runnable(longer, PAPER) == []


def test_other_payoffs_and_a_part_of_the_paper_s_treatments_run():
    humans_only = ('associate_types = ["human", "cooperative", "fair", "selfish"]', 'associate_types = ["human"]')
    stag = ("A = { A = [70, 70], B = [10, 80] }", "A = { A = [80, 80], B = [10, 50] }")
    assert not_runnable(_variant(stag, humans_only), PAPER) == []
    assert not_runnable(_variant(stag), PAPER) == []
    assert not_runnable(_variant(("agent_max_words = 20", "agent_max_words = 35")), PAPER) == []


def test_the_shipped_examples_say_what_keeps_them_from_running():
    examples = {name: load(EXPERIMENTS_DIR / f"{name}.toml")
                for name in ("stag_hunt", "fixed_partner_one_message", "tit_for_tat_en")}
    assert not_runnable(examples["fixed_partner_one_message"], PAPER) == []
    # Example 3's own personas, labels, agents' files, currency and fixed partner all run.
    assert not_runnable(examples["tit_for_tat_en"], PAPER) == []
    assert not_runnable(examples["stag_hunt"], PAPER) == []
    assert offered({"paper": PAPER, **examples}) == ("paper", "fixed_partner_one_message", "stag_hunt",
                                                     "tit_for_tat_en")


def test_a_config_of_a_file_not_offered_is_refused_with_the_reason(tmp_path, monkeypatch):
    import experiment_design
    from experiment_design import experiment as experiment_module
    from lab.base.offered_experiments import why_not_offered

    # Every shipped example runs: a folder of the paper and one file the pages cannot run (its
    # reason stood in for: what the pages run grows).
    (tmp_path / "paper.toml").write_text(PAPER.text, encoding="utf-8")
    (tmp_path / "refused.toml").write_text(_variant().text, encoding="utf-8")
    for module in (experiment_design, experiment_module):
        monkeypatch.setattr(module, "EXPERIMENTS_DIR", tmp_path)
    monkeypatch.setattr("lab.base.offered_experiments.not_runnable",
                        lambda experiment, paper: ["a reason"] if experiment.name == "refused" else [])
    reason = why_not_offered("variant_hh_informed_wc_first")
    assert reason == ("it is a session config of experiments/refused.toml, which the lab's pages cannot run yet "
                      "(a reason): docs/your-experiment.md says what runs in the lab"), reason
    assert why_not_offered("hf_informed_wc_first") is None  # the paper's: offered
    assert why_not_offered("no_such_config") is None


def test_matching_message_exchanges_and_a_single_game_run():
    fixed = ('matching = "perfect_strangers"', 'matching = "random"  #')
    assert not_runnable(_variant(fixed), PAPER) == []
    one_game = _variant(("[[games]]\nchat_exchanges = 0", "#"),
                        ('game_orders = [["WC", "WoC"], ["WoC", "WC"]]', 'game_orders = [["WC"]]'))
    assert not_runnable(one_game, PAPER) == []


def test_choices_labelled_their_own_way_run_but_not_other_ids():
    labelled = _variant(('label = { zh_hans = "A", en = "A" }', 'label = { zh_hans = "蓝", en = "Blue" }'),
                        ('label = { zh_hans = "B", en = "B" }', 'label = { zh_hans = "红", en = "Red" }'))
    assert not_runnable(labelled, PAPER) == []
    other_ids = _variant(('id = "A"', 'id = "C"'), ('cooperative_choice = "A"', 'cooperative_choice = "C"'),
                         ("A = { A = [70, 70], B = [10, 80] }", "C = { C = [70, 70], B = [10, 80] }"),
                         ("B = { A = [80, 10], B = [40, 40] }", "B = { C = [80, 10], B = [40, 40] }"))
    assert not_runnable(other_ids, PAPER) == ["game.choices differs from the paper's"]


def test_either_choice_or_none_may_be_the_cooperative_one():
    b_cooperates = _variant(('cooperative_choice = "A"', 'cooperative_choice = "B"'))
    assert not_runnable(b_cooperates, PAPER) == []
    none = _variant(('cooperative_choice = "A"', "#"), ("norm_bonus = 10.0", "norm_bonus = 0"),
                    ('pages = ["norm_estimates", ', "pages = ["),
                    ("norm_intervals = [[0, 20], [20, 40], [40, 60], [60, 80], [80, 100]]", ""))
    assert none.cooperative_choice is None and not_runnable(none, PAPER) == []


def test_the_tests_own_experiment_files_are_read_only_in_a_test_run_and_never_in_production():
    from experiment_design import TEST_EXPERIMENTS_DIR, test_experiments_enabled

    assert not test_experiments_enabled({})
    assert test_experiments_enabled({"LAB_TEST_EXPERIMENTS": "1"})
    assert not test_experiments_enabled({"LAB_TEST_EXPERIMENTS": "1", "OTREE_PRODUCTION": "1"})
    tests_copy = load(TEST_EXPERIMENTS_DIR / "tft_strangers.toml")
    assert not_runnable(tests_copy, PAPER) == []
    import os

    import settings

    assert "LAB_TEST_EXPERIMENTS" not in os.environ  # this process is a lab's: its create page has none of them
    assert "tft_strangers" not in settings.EXPERIMENTS
    assert not [config for config in settings.SESSION_CONFIGS if config["name"].startswith("test_tft_")]


def test_a_session_takes_its_treatment_code_labels_and_currency_from_its_experiment():
    from experiment_design import TEST_EXPERIMENTS_DIR
    from lab.base.session_settings import params_from_config

    tests_copy = load(TEST_EXPERIMENTS_DIR / "tft_strangers.toml")
    config = dict(associate_type="tit_for_tat", label_setting="informed", game_order="WC-WoC", language="en")
    p = params_from_config(config, tests_copy)
    assert (p.treatment, p.informed, p.associate_words, p.currency) == ("H-T", True, "AI", "GBP")
    for associate_type in ("human", "unconditional_cooperator"):
        p = params_from_config(dict(config, associate_type=associate_type, label_setting="uninformed"), tests_copy)
        assert (p.informed, p.associate_words) == (False, "AI or human")
    assert params_from_config(dict(config, associate_type="unconditional_cooperator"), tests_copy).treatment == "H-U"
    paper = params_from_config(dict(config, associate_type="fair"))  # no experiment named: the paper's
    assert (paper.treatment, paper.associate_words, paper.currency) == ("H-F", "intelligent machines", "CNY")
