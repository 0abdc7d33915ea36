"""The check of an experiment file (python -m labserver check-experiment, and the server start's
check_all_or_exit): each kind of problem on a broken copy of experiments/paper.toml, its message
naming the field and what to change; every problem of a file, not the first; the command's output
and exit status. In-process but for the command (one subprocess per exit status)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from experiment_design import EXPERIMENTS_DIR, PROJECT_DIR, TEST_EXPERIMENTS_DIR, check, check_all_or_exit
from tests import processes

PAPER_TEXT = (EXPERIMENTS_DIR / "paper.toml").read_text(encoding="utf-8")
WITH_CHAT = "chat_exchanges = 2  # WC: two messages each way before the decision"
WITHOUT_CHAT = "chat_exchanges = 0  # WoC: the same game without the communication stages"


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder of its own (locale/, prompts/, experiments/ with the paper), to break freely."""
    root = tmp_path / "project"
    shutil.copytree(PROJECT_DIR / "locale", root / "locale")
    shutil.copytree(PROJECT_DIR / "prompts", root / "prompts", ignore=shutil.ignore_patterns("similarity"))
    (root / "experiments").mkdir()
    shutil.copy(EXPERIMENTS_DIR / "paper.toml", root / "experiments" / "paper.toml")
    return root


def problems(project: Path, *replacements: tuple[str, str], name: str = "study") -> list[str]:
    """The problems of a copy of paper.toml with its own config names and ``replacements`` made."""
    text = PAPER_TEXT.replace('session_config_prefix = ""', f'session_config_prefix = "{name}_"')
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path = project / "experiments" / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return [str(problem).removeprefix(f"{path}: ") for problem in check(path, root=project)]


def test_a_copy_of_the_paper_passes(project):
    assert problems(project) == []


@pytest.mark.parametrize("written,shown", [
    ("nan", "is nan, not a finite number"),
    ("inf", "is inf, not a finite number"),
    ("-inf", "is -inf, not a finite number"),
    ("0", "is 0"),
    ("-40", "is -40"),
    ('"40"', 'is "40" (text in quotes), not a number'),
    ("true", "is true, not a number"),
])
def test_a_stage_limit_is_a_positive_finite_number(project, written, shown):
    assert problems(project, ("decision = 40", f"decision = {written}")) == [
        f"stage_limits.decision: {shown}: write a positive number of seconds"]


def test_other_limits_and_counts(project):
    assert problems(project, ("max_chars = 300", "max_chars = 2.5"), ("rounds_per_game = 10", "rounds_per_game = 0"),
                    ("currency_per_point = 0.06", "currency_per_point = 0"), ("show_up_fee = 15.0", "show_up_fee = nan")
                    ) == [
        "game.rounds_per_game: is 0: write a whole number of at least 1",
        "messages.max_chars: is 2.5, not a whole number: write a whole number of at least 1",
        "payment.show_up_fee: is nan, not a finite number: write 0 or more, such as 15",
        "payment.currency_per_point: is 0: write more than 0, such as 0.06",
    ]


@pytest.mark.parametrize("row,message", [
    ('A = { A = [70, "seventy"], B = [10, 80] }',
     'game.payoffs.A.A[2]: is "seventy" (text in quotes), not a number: write a number of points, such as 70'),
    ("A = { A = [70, 70, 70], B = [10, 80] }",
     "game.payoffs.A.A: has 3 items: write exactly 2 ([own points, other's points])"),
    ("A = { A = 70, B = [10, 80] }",
     "game.payoffs.A.A: is 70, not an array: write an array [ ... ] ([own points, other's points])"),
    ("A = { A = [70, 70] }",
     "game.payoffs.A: lacks B (the points when you choose A and the other B): add B = [own points, other's points]"),
    ("A = [70, 70]",
     "game.payoffs.A: is an array, not a table: write a table (payoffs.<own choice>.<other's choice> = [own points, "
     "other's points], for all four pairs)"),
    ("A = { A = [70, 70], B = [10, 80], C = [0, 0] }",
     "game.payoffs.A.C: C is not a choice (the choices: A, B): remove it or correct the id"),
])
def test_payoffs_are_a_2x2_table_of_number_pairs(project, row, message):
    found = problems(project, ("A = { A = [70, 70], B = [10, 80] }", row))
    assert found == [message]


def test_a_missing_payoff_row(project):
    assert problems(project, ("B = { A = [80, 10], B = [40, 40] }\n", "")) == [
        "game.payoffs: lacks the row B (the points when you choose B): add B = { A = [own, other], B = [own, other] } "
        "(a 2x2 table of [own points, other's points])"]


def test_the_cooperative_choice_is_a_choice(project):
    assert problems(project, ('cooperative_choice = "A"', 'cooperative_choice = "C"')) == [
        'game.cooperative_choice: is "C", which is not a choice (the choices: A, B): write one of them, or remove the '
        "key (no cooperation rate)"]


def test_two_games_with_chat_are_refused(project):
    found = problems(project, (WITHOUT_CHAT, "chat_exchanges = 1"))
    assert found[0].startswith("games: has two games with chat: a session can hold one game with chat and one without")
    assert "set one game's chat_exchanges to 0" in found[0]


def test_stages_follow_the_games(project):
    assert problems(project, (WITH_CHAT, "chat_exchanges = 1")) == [
        "stage_limits.message_2: is set, but the game with chat has 1 message exchange(s): remove it",
        "stage_limits.read_2: is set, but the game with chat has 1 message exchange(s): remove it"]
    assert problems(project, ("message_1 = 60\n", "")) == [
        "stage_limits.message_1: is missing: a game with 2 message exchange(s) has this stage; add message_1 = "
        "<seconds>"]


def test_rounds_perfect_strangers_cannot_serve(project):
    assert problems(project, ("human = 12", "human = 10")) == [
        "demo_participants.human: is 10: with 10 participants each can meet only 9 different associates, but "
        "perfect-strangers matching needs a new one in each of 10 rounds: use at least 12 participants (or fewer "
        "rounds per game)"]
    assert problems(project, ("human = 12", "human = 13")) == [
        "demo_participants.human: is 13: a human-human session needs an even number of participants (2 per pair); 13 "
        "cannot be paired: use 14"]
    assert problems(project, ("human = 12", "human = 6"), ("rounds_per_game = 10", "rounds_per_game = 5")) == []


def test_a_treatment_s_persona_must_be_defined(project):
    assert problems(project, ('"fair", "selfish"]', '"fair", "selfsh"]')) == [
        'treatments.associate_types: names "selfsh", which is neither human nor a persona of [personas] (known: '
        "human, cooperative, fair, selfish): define [personas.selfsh] or correct the name"]
    assert problems(project, ('label_settings = ["informed", "uninformed"]', 'label_settings = ["informed", "blind"]')
                    ) == ['treatments.label_settings: names "blind", which has no [labels.blind] table (known: '
                          "informed, uninformed): add it or correct the name"]


def test_duplicate_names(project):
    assert problems(project, ('"cooperative", "fair"', '"fair", "fair"')) == [
        "treatments.associate_types: lists fair twice: list each associate type once"]
    assert problems(project, ('id = "B"', 'id = "A"')) == [
        'game.choices[2].id: is "A", the id of the first choice too: give each choice its own id']
    assert problems(project, ('code = "S"', 'code = "F"')) == [
        'personas.selfish.code: is "F", the code of fair too: give each persona its own code (the treatment codes and '
        "session config names tell them apart)"]
    assert problems(project, ("[personas.selfish]", "[personas.fair]")) == [
        "is not valid TOML: Cannot declare ('personas', 'fair') twice (at line 97, column 15)"]


def test_session_config_names_clash_across_files(project):
    """A copy of paper.toml that keeps its prefix "" gives the paper's config names."""
    path = project / "experiments" / "mystudy.toml"
    path.write_text(PAPER_TEXT, encoding="utf-8")
    assert [str(p) for p in check(path, root=project)] == [
        f"{path}: session_config_prefix: gives the session config hh_informed_wc_first, which "
        f"{project / 'experiments' / 'paper.toml'} gives too: set session_config_prefix to a prefix of this "
        'experiment\'s own (such as "mystudy_")']


def test_names_in_session_configs_are_names(project):
    assert problems(project, ("[labels.uninformed]", '[labels."Not informed"]\ninformed = false\nhuman = { zh_hans = "?", '
                                                     'en = "?" }\nagent = { zh_hans = "?", en = "?" }\n\n'
                                                     "[labels.uninformed]")) == [
        'labels."Not informed": "Not informed" is not a name of lower-case letters, digits and _, starting with a '
        "letter: rename it (session config names carry it)"]
    assert problems(project, ('"informed", "uninformed"]', '"informed", "Not informed"]')) == [
        'treatments.label_settings[2]: is "Not informed": write a name of lower-case letters, digits and _, starting '
        'with a letter (such as "fair")']


def test_unknown_keys_are_refused_with_their_path(project):
    assert problems(project, ("max_chars = 300", "max_chars = 300\nmax_char = 200")) == [
        "messages.max_char: is not a key of this table: remove it or correct its spelling (the keys here: max_chars, "
        "agent_max_words)"]
    assert problems(project, ("[labels.informed]\ninformed = true", "[labels.informed]\ninformed = true\ncolor = 1"))[
        0].startswith("labels.informed.color: is not a key of this table")


def test_a_persona_s_prompt_file_in_each_offered_language(project):
    assert problems(project, ('roleplay = { zh_hans = "prompts/roleplay_fair.j2", en = "prompts/roleplay_fair.j2" }',
                              'roleplay = { zh_hans = "prompts/roleplay_fair.j2", en = "prompts/fair_en.j2" }')) == [
        f"personas.fair.roleplay.en: names prompts/fair_en.j2, which does not exist in {project}: write the file, or "
        "correct the path (relative to the project folder)"]
    assert problems(project, ('roleplay = { zh_hans = "prompts/roleplay_fair.j2", en = "prompts/roleplay_fair.j2" }',
                              'roleplay = { zh_hans = "prompts/roleplay_fair.j2" }')) == [
        'personas.fair.roleplay: lacks en, which languages offers: add en = "prompts/<file>.j2"']
    assert problems(project, ('"prompts/roleplay_fair.j2" }', '"../roleplay_fair.j2" }'))[0].startswith(
        'personas.fair.roleplay.en: is "../roleplay_fair.j2" (not inside the project folder')


def test_a_participant_text_missing_in_a_language(project):
    locale = project / "locale" / "zh_hans.toml"
    locale.write_text(locale.read_text(encoding="utf-8").replace('decision_title = "您的选择"\n', ""), encoding="utf-8")
    assert problems(project) == [
        "locale/zh_hans.toml: game.decision_title is missing, and this design shows it: write it (locale/en.toml has "
        "it in English)"]


def test_a_design_other_than_the_paper_s_names_the_texts_it_needs(project):
    for language in ("zh_hans", "en"):  # a locale without random matching's texts
        locale = project / "locale" / f"{language}.toml"
        text = locale.read_text(encoding="utf-8")
        for key in ("rules_body_games2_random", "new_associate_random"):
            text = text.replace(f"{key} = ", f"{key}_draft = ")
        locale.write_text(text, encoding="utf-8")
    found = problems(project, ('matching = "perfect_strangers"', 'matching = "random"'))
    needs = "is missing, and this design shows it: write it (docs/experiment-file.md, Texts, says what it tells and " \
            "which placeholders it may use)"
    assert found == [f"locale/{language}.toml: variants.{key} {needs}" for language in ("zh_hans", "en")
                     for key in ("rules_body_games2_random", "new_associate_random")]


def test_a_text_asking_for_a_placeholder_the_design_does_not_fill(project):
    locale = project / "locale" / "en.toml"
    locale.write_text(locale.read_text(encoding="utf-8").replace("then choose {choice_1} or {choice_2}.</p>",
                                                                 "then choose {choice_1} or {choise_2}.</p>"))
    found = problems(project, (WITH_CHAT, "chat_exchanges = 1"), ("message_2 = 60\nread_2 = 30\n", ""))
    assert len(found) == 1
    assert found[0].startswith("locale/en.toml: variants.game_intro_with_chat_exchanges1 asks for {choise_2}, which its "
                               "page does not fill in for this design (it would show as written): remove it or correct "
                               "its name (its placeholders: bonus, choice_1, choice_2, cooperative_choice, currency, "
                               "decision, fee, max_chars, message_1, rate, read_1, result, rounds)")
    # a stage the design does not have: its seconds are nowhere to be found
    locale.write_text(locale.read_text(encoding="utf-8").replace("{choise_2}", "{choice_2} ({message_2} seconds)"))
    found = problems(project, (WITH_CHAT, "chat_exchanges = 1"), ("message_2 = 60\nread_2 = 30\n", ""))
    assert found[0].startswith("locale/en.toml: variants.game_intro_with_chat_exchanges1 asks for {message_2}, which its "
                               "page does not fill in")


def test_a_new_language_is_files(project):
    """German offered, without its texts: every text of the file, the prompts, and one line for the
    missing locale file with every key the design needs."""
    (project / "locale" / "de.toml").unlink()
    found = problems(project, ('languages = ["zh_hans", "en"]', 'languages = ["zh_hans", "en", "de"]'))
    assert found[:3] == ['game.choices[1].label: lacks de, which languages offers: add de = "..."',
                         'game.choices[2].label: lacks de, which languages offers: add de = "..."',
                         'labels.informed.human: lacks de, which languages offers: add de = "..."']
    assert 'personas.fair.roleplay: lacks de, which languages offers: add de = "prompts/<file>.j2"' in found
    assert "agents.system_prompt: lacks de, which languages offers: add de = ..." in found
    missing = [line for line in found if line.startswith("languages: locale/de.toml is missing")]
    assert len(missing) == 1 and len(found) == 13
    assert "copy locale/en.toml to locale/de.toml and translate it" in missing[0]
    for key in ("intro.rules_body,", "game.decision_prompt,", "questionnaire.svo_intro,", "online.exit_code,"):
        assert key in missing[0]
    assert "common.associate_humans" not in missing[0]  # the experiment file gives the associates' words
    assert problems(project, ('languages = ["zh_hans", "en"]', 'languages = ["zh_hans", "EN"]')) == [
        'languages[2]: is "EN": write a language code as the locale files are named (such as "en", "zh_hans", "de")']


def test_a_language_s_locale_file_lacking_keys_is_named_key_by_key(project):
    """German (locale/de.toml) offered by the tests' German lab: the file as shipped passes; without
    some of its texts, the check names each key the design shows, and only those."""
    german_lab = (TEST_EXPERIMENTS_DIR / "german_lab.toml").read_text(encoding="utf-8")
    path = project / "experiments" / "german_lab.toml"
    path.write_text(german_lab, encoding="utf-8")
    assert [str(problem) for problem in check(path, root=project)] == []
    locale = project / "locale" / "de.toml"
    text = locale.read_text(encoding="utf-8")
    for line in ('decision_title = "Ihre Wahl"\n', 'svo_item = "Aufgabe {number}"\n', 'exit_code = "Ihr Abschlusscode:"\n',
                 'new_associate_fixed_partner = "Ihr Gegenüber in dieser Runde ist dasselbe wie in den anderen Runden '
                 'dieses Spiels."\n'):
        assert line in text, line
        text = text.replace(line, "")
    locale.write_text(text, encoding="utf-8")
    written = "is missing, and this design shows it: write it (locale/en.toml has it in English)"
    assert [str(problem).removeprefix(f"{path}: ") for problem in check(path, root=project)] == [
        f"locale/de.toml: {key} {written}" for key in ("game.decision_title", "questionnaire.svo_item", "online.exit_code")]


def test_every_problem_not_the_first(project):
    assert sorted(problems(project, ("decision = 40", "decision = nan"), ("max_chars = 300", 'max_chars = "300"'),
                           ("matching =", "matchin = 1\nmatching ="))) == [
        "matchin: is not a key of this table: remove it or correct its spelling (the keys here: schema_version, title, "
        "session_config_prefix, languages, game, games, stage_limits, messages, matching, payment, treatments, "
        "demo_participants, labels, personas, agents, questionnaires)",
        'messages.max_chars: is "300" (text in quotes), not a number: write a whole number of at least 1',
        "stage_limits.decision: is nan, not a finite number: write a positive number of seconds"]
    # once the form is right, every problem of the design and its files
    found = problems(project, ('cooperative_choice = "A"', 'cooperative_choice = "Z"'), ("human = 12", "human = 11"),
                     ('"fair", "selfish"]', '"fair", "greedy"]'), ("prompts/roleplay_selfish.j2\" }", "prompts/x.j2\" }"))
    assert [line.split(": ")[0] for line in found] == [
        "game.cooperative_choice", "treatments.associate_types", "demo_participants.human", "personas.selfish.roleplay.en"]


def test_the_server_start_refuses_naming_every_problem(project):
    (project / "experiments" / "broken.toml").write_text(
        PAPER_TEXT.replace('session_config_prefix = ""', 'session_config_prefix = "broken_"')
        .replace('cooperative_choice = "A"', 'cooperative_choice = "Z"').replace("human = 12", "human = 11"))
    with pytest.raises(SystemExit) as refused:
        check_all_or_exit(project / "experiments", root=project)
    lines = str(refused.value.code).splitlines()
    assert lines[0].startswith("Refusing to start: the experiment files have these problems")
    assert [line.split(": ")[1] for line in lines[1:]] == ["game.cooperative_choice", "demo_participants.human"]
    (project / "experiments" / "broken.toml").unlink()
    assert [e.name for e in check_all_or_exit(project / "experiments", root=project)] == ["paper"]


def _command(*files) -> tuple[int, list[str]]:
    result = processes.run([sys.executable, "-m", "labserver", "check-experiment", *map(str, files)],
                           cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    return result.returncode, result.stdout.splitlines()


def test_the_command_s_output_and_exit_status(tmp_path):
    assert _command("experiments/paper.toml", "experiments/tit_for_tat_en.toml") == (
        0, ["ok: experiments/paper.toml (16 session configs)", "ok: experiments/tit_for_tat_en.toml (12 session configs)"])
    broken = tmp_path / "broken.toml"
    broken.write_text(PAPER_TEXT.replace("decision = 40", "decision = nan").replace("result = 30", "result = 0"))
    assert _command("experiments/stag_hunt.toml", broken) == (1, [
        "ok: experiments/stag_hunt.toml (16 session configs)",
        f"{broken}: stage_limits.decision: is nan, not a finite number: write a positive number of seconds",
        f"{broken}: stage_limits.result: is 0: write a positive number of seconds"])
    status, lines = _command(tmp_path / "absent.toml", broken)
    assert status == 2 and lines[0] == f"{tmp_path / 'absent.toml'}: cannot be read: No such file or directory"


def test_the_lab_server_does_not_start_with_a_broken_experiment_file(tmp_path):
    """settings.py (what oTree imports first) checks every file of experiments/: here a folder with the
    paper and a broken copy, given to the check in place of experiments/."""
    shutil.copy(EXPERIMENTS_DIR / "paper.toml", tmp_path / "paper.toml")
    (tmp_path / "broken.toml").write_text(
        PAPER_TEXT.replace('session_config_prefix = ""', 'session_config_prefix = "broken_"')
        .replace('cooperative_choice = "A"', 'cooperative_choice = "Z"'), encoding="utf-8")
    start = ("import pathlib, sys, experiment_design; "  # the package's name `check` is the function
             f"sys.modules['experiment_design.check'].EXPERIMENTS_DIR = pathlib.Path({str(tmp_path)!r}); "
             "import settings")
    result = processes.run([sys.executable, "-c", start], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Refusing to start: the experiment files have these problems" in result.stderr
    assert "broken.toml: game.cooperative_choice" in result.stderr
    (tmp_path / "broken.toml").unlink()
    result = processes.run([sys.executable, "-c", start + "; print(len(settings.SESSION_CONFIGS))"],
                           cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["16"], result.stderr[-2000:]


def test_an_uninformed_label_setting_names_agents_and_humans_alike(project):
    assert problems(project, ('agent = { zh_hans = "智能机器或人类", en = "intelligent machines or humans" }',
                              'agent = { zh_hans = "智能机器或人类", en = "machines" }')) == [
        'labels.uninformed.agent: names agents "machines" and humans "intelligent machines or humans" (en) in an '
        "uninformed setting, which would tell participants who their associates are: give both the same words"]
