"""The experimenter's setup: the lab's language, round defaults within the server's limit, the
database URL at start (empty = SQLite, password masked), English bot sessions, Chinese texts."""

import os
import re
import signal
import subprocess
import time

import pytest

from lab.base import i18n
from labserver.server import database_problem, masked_database_url
from tests import processes
from tests.lab_server import PROJECT, PYTHON, free_port, lab_env, run_bots

CJK = "\u4e00-\u9fff"


@pytest.mark.parametrize("raw,expected", [
    (None, "zh_hans"), ("", "zh_hans"), ("zh-hans", "zh_hans"), ("zh_Hans", "zh_hans"), ("zh", "zh_hans"),
    ("en", "en"), ("en-US", "en"), ("de", "de"), ("de-AT", "de"),
])
def test_lab_language_from_otree_language_code(raw, expected):
    assert i18n.lab_language(raw) == expected
    assert i18n.otree_language_code(raw) == {"zh_hans": "zh-hans", "en": "en", "de": "de"}[expected]


def test_a_language_is_its_locale_file():
    """The lab's languages are locale/'s files; oTree's and HTML's spellings follow by rule."""
    assert set(i18n.LANGUAGES) >= {"zh_hans", "en", "de"}
    assert [i18n.html_lang(code) for code in ("zh_hans", "en", "de", "pt_br")] == ["zh-Hans", "en", "de", "pt-BR"]
    with pytest.raises(ValueError, match="add locale/<code>.toml"):
        i18n.lab_language("fr")


def test_otree_s_own_texts_follow_a_session_in_german():
    """oTree's catalogs, bound as oTree's start binds them, give a German session oTree's own texts
    in German (lab/server/otree_language.py)."""
    import gettext
    from pathlib import Path

    import otree
    from lab.server import otree_language

    gettext.bindtextdomain("django", localedir=str(Path(otree.__file__).parent / "locale"))
    catalog = otree_language._catalog.__wrapped__("django", "de")
    assert catalog.gettext("Please wait") == "Bitte warten"
    assert catalog.gettext("This field is required.") == "Dieses Feld ist erforderlich."


def _settings(**env):
    code = "import settings; print(settings.LANGUAGE_CODE, settings.SESSION_CONFIG_DEFAULTS['language'], " \
           "settings.SESSION_CONFIG_DEFAULTS['rounds_per_game'])"
    return processes.run([PYTHON, "-c", code], cwd=PROJECT, env=lab_env(**env), capture_output=True, text=True,
                         timeout=60)


def test_server_language_defaults_to_chinese_and_sessions_follow_it():
    assert _settings().stdout.split() == ["zh-hans", "zh_hans", "10"]
    assert _settings(OTREE_LANGUAGE_CODE="en").stdout.split() == ["en", "en", "10"]
    assert _settings(OTREE_LANGUAGE_CODE="de").stdout.split() == ["de", "de", "10"]  # a German lab


def test_a_language_without_texts_is_refused_with_a_message():
    result = _settings(OTREE_LANGUAGE_CODE="fr")
    assert result.returncode != 0 and "OTREE_LANGUAGE_CODE" in result.stderr and "Traceback" not in result.stderr


def test_round_defaults_follow_the_servers_limit(monkeypatch):
    monkeypatch.setenv("LAB_MAX_ROUNDS_PER_GAME", "3")
    from lab.base.session_settings import config_defaults, validate

    defaults = config_defaults()
    assert defaults["rounds_per_game"] == 3
    config = dict(defaults, associate_type="human", label_setting="informed", game_order="WC-WoC")
    assert validate(config, 4).rounds_per_game == 3  # created as offered, nothing edited
    assert _settings(LAB_MAX_ROUNDS_PER_GAME="3").stdout.split()[-1] == "3"


@pytest.mark.parametrize("url,shown", [
    ("postgresql://lab:s3cr3t@db.example:5432/lab", "postgresql://lab:***@db.example:5432/lab"),
    ("postgresql://lab@db.example/lab", "postgresql://lab@db.example/lab"),
    ("sqlite:///db.sqlite3", "sqlite:///db.sqlite3"),
])
def test_database_url_is_shown_without_its_password(url, shown):
    assert masked_database_url(url) == shown
    assert database_problem(url) is None


def test_an_unusable_database_url_is_named_without_its_password():
    assert "mysql" in database_problem("mysql://u:pw@h/db") and "pw" not in database_problem("mysql://u:pw@h/db")
    assert "not a database URL" in database_problem("not a url")


def _start_and_read_banner(project_copy, **env):
    port = free_port()
    process = processes.popen([PYTHON, "-m", "labserver", "run", "--port", str(port)], cwd=project_copy,
                              env=lab_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            lines.append(line)
            if "Stop with Ctrl-C" in line:
                break
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    return "".join(lines)


@pytest.mark.server
def test_an_empty_database_url_means_sqlite(project_copy):
    output = _start_and_read_banner(project_copy, DATABASE_URL="")
    assert "database: SQLite (./db.sqlite3)" in output and "Traceback" not in output


@pytest.mark.server
def test_the_banner_masks_the_database_password(project_copy, postgres_url):
    # The test server trusts local connections, so any password opens it.
    with_password = postgres_url.replace("postgresql://postgres@", "postgresql://postgres:not-to-be-shown@")
    output = _start_and_read_banner(project_copy, DATABASE_URL=with_password)
    assert "TRY-OUT SERVER" in output
    assert "not-to-be-shown" not in output and "postgres:***@" in output


@pytest.mark.server
def test_english_bot_sessions_play_through(project_copy, database_url):
    run_bots(project_copy, "hh_uninformed_wc_first", 2, {"rounds_per_game": 1, "language": "en"}, database_url)


def test_chinese_texts_write_money_in_yuan_with_full_width_colons():
    texts = i18n.texts("zh_hans", currency="CNY", fee="15", rate="0.06", bonus="10")
    assert "<b>15 元</b>" in texts["intro_welcome_terms"] and "CNY" not in "".join(texts.values())
    assert i18n.currency_name("zh_hans", "CNY") == "元" and i18n.currency_name("en", "CNY") == "CNY"
    half_width_after_chinese = {key: value for key, value in texts.items() if re.search(f"[{CJK}]\\s*:", value)}
    assert not half_width_after_chinese
    counter = texts["game_message_counter_before"] + "300" + texts["game_message_counter_after"]
    assert counter == "还可输入 300 字"
