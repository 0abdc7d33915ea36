"""A session refused at creation leaves nothing behind, on SQLite and PostgreSQL: through the
REST API the refusal is a 400 with the message (not a 500 with a traceback), through the admin's
create-session form the message shows with a note instead of a traceback, and neither leaves a
session, participant, player, group, subsession or agent seat; the next session is created and
starts. Every value no session can run with is refused so (no participants, a NUL, NaN or
infinity, a limit or money below its least, a treatment other than the config's name says), and
the create page offers no treatment field."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
import requests

import settings
from lab.experimenter.session_creation import TRACEBACK_NOTE
from lab.base.session_settings import MONEY_KEYS, STAGE_CONFIG_KEYS, TREATMENT_KEYS

CONFIG = "hf_informed_wc_first"
# The model check's one call goes to a port nobody listens on (9: discard, a privileged port).
UNREACHABLE_MODEL = dict(llm_provider="openai_compatible", llm_model="m", llm_base_url="http://127.0.0.1:9/v1",
                         llm_max_retries=0, llm_request_timeout=5, rounds_per_game=1)
TABLES = ["otree_session", "otree_participant", "instructions_player", "instructions_subsession",
          "game_with_chat_subsession", "game_with_chat_group", "game_with_chat_player", "game_with_chat_agentseat",
          "game_without_chat_player", "game_without_chat_agentseat", "questionnaire_player", "payment_player"]


def row_counts(server) -> dict:
    """Rows of every table a session's creation writes, straight from the server's database."""
    return dict(server.query(" UNION ALL ".join(f"SELECT '{table}', COUNT(*) FROM {table}" for table in TABLES)))


def nothing_left(server) -> None:
    assert requests.get(f"{server.base_url}/api/sessions", timeout=30).json() == []
    assert row_counts(server) == dict.fromkeys(TABLES, 0)


def post_session(server, config: str, participants, **fields) -> requests.Response:
    return post_raw(server, dict(session_config_name=config, num_participants=participants,
                                 modified_session_config_fields=fields))


def create_with_admin_form(server, config: str, participants: int, **fields) -> dict:
    """What oTree's create-session page sends over its websocket, and the reply it shows."""
    import websockets

    defaults = {**settings.SESSION_CONFIG_DEFAULTS, **next(c for c in settings.SESSION_CONFIGS if c["name"] == config)}
    form = {"session_config": config, "num_participants": str(participants)}
    # The page sends checked boxes only: a box left out is False.
    form.update({f"{config}.{key}": "on" for key, value in defaults.items() if value is True})
    form.update({f"{config}.{key}": str(value) for key, value in fields.items()})

    async def exchange() -> dict:
        async with websockets.connect(f"ws://127.0.0.1:{server.port}/create_session") as socket:
            await socket.send(json.dumps(form))
            while True:
                reply = json.loads(await asyncio.wait_for(socket.recv(), timeout=60))
                if "error" in reply or "session_url" in reply or "validation_errors" in reply:
                    return reply

    return asyncio.run(exchange())


@pytest.mark.server
def test_refused_session_leaves_nothing_and_rest_says_why(lab_server, database_url):
    server = lab_server(database_url)
    refused = post_session(server, CONFIG, 2, **UNREACHABLE_MODEL)
    assert refused.status_code in (400, 422), (refused.status_code, refused.text[:1000])
    assert refused.headers["content-type"].startswith("text/plain")
    assert "the model check" in refused.text and "could not be reached" in refused.text, refused.text
    assert "Traceback" not in refused.text
    nothing_left(server)

    # Another refusal in creating_session: an odd number of people in H-H.
    odd = post_session(server, "hh_uninformed_wc_first", 3, rounds_per_game=1)
    assert odd.status_code in (400, 422) and "even number of participants" in odd.text, (odd.status_code, odd.text)
    nothing_left(server)

    reply = create_with_admin_form(server, CONFIG, 2, **UNREACHABLE_MODEL)
    assert reply.get("error", "").startswith("Failed to create session: Agent model: the model check"), reply
    assert reply["traceback"] == TRACEBACK_NOTE, reply  # the page shows the message only with one
    nothing_left(server)

    every_unrunnable_value_is_refused(server)
    nothing_left(server)

    # The create page offers the config's settings but not its treatment (fixed by its name).
    page = requests.get(f"{server.base_url}/create_session", timeout=30).text
    assert f"name='{CONFIG}.rounds_per_game'" in page and f"name='{CONFIG}.participation_fee'" in page
    for key in TREATMENT_KEYS:
        assert f"{CONFIG}.{key}" not in page, key

    # The next session (SQLite may give it the refused one's id) is created and starts; a show-up
    # fee and a norm bonus of 0 are designs, and the config's own treatment may be repeated.
    created = post_session(server, CONFIG, 2, llm_provider="simulated", rounds_per_game=1, participation_fee=0,
                           norm_bonus=0, associate_type="fair", label_setting="informed", game_order="WC-WoC")
    assert created.status_code == 200, created.text[:1000]
    participants = server.get_session(created.json()["code"])["participants"]
    first_page = requests.get(server.start_url(participants[0]["code"]), timeout=30)
    assert first_page.status_code == 200 and "/instructions/" in first_page.url, first_page.url


def refused(response: requests.Response, *words: str) -> None:
    """A 400 with the message as plain text naming ``words``, no traceback."""
    assert response.status_code == 400, (response.status_code, response.text[:1000])
    assert response.headers["content-type"].startswith("text/plain")
    assert all(word in response.text for word in words), (words, response.text)
    assert "Traceback" not in response.text and "File " not in response.text, response.text


def post_raw(server, body: dict) -> requests.Response:
    """POST /api/sessions with the body as given (NaN and infinity as JSON's extensions, as
    Python's json module and oTree's read them)."""
    return requests.post(f"{server.base_url}/api/sessions", data=json.dumps(body),
                         headers={"content-type": "application/json"}, timeout=60)


def every_unrunnable_value_is_refused(server) -> None:
    for participants in (0, -2, 1.5, "2"):
        refused(post_session(server, CONFIG, participants), "num_participants", "at least 1")
    refused(post_raw(server, dict(session_config_name=CONFIG, num_participants=2, label="a\x00b")), "label", "NUL")
    refused(post_raw(server, dict(session_config_name=CONFIG, num_participants=2, room_name="lab\x00")), "room_name")
    refused(post_raw(server, dict(session_config_name=CONFIG, num_participants=2, room_name="nowhere")), "room_name")
    refused(post_raw(server, dict(session_config_name=CONFIG, num_participants=2, colour="red")), "colour")
    refused(post_raw(server, dict(num_participants=2)), "session_config_name")
    for key in ("llm_model", "language", "prolific_completion_codes"):
        refused(post_session(server, CONFIG, 2, **{key: "x\x00y"}), key, "NUL")
    refused(post_session(server, CONFIG, 2, rounds_per_game=[1]), "rounds_per_game")
    for key in STAGE_CONFIG_KEYS.values():
        for seconds in (math.nan, math.inf, -math.inf, 0, -5, "nan"):
            refused(post_session(server, CONFIG, 2, **{key: seconds}), key)
    for key, (least, _) in MONEY_KEYS.items():
        for amount in (math.nan, math.inf, -math.inf, -15) + ((0,) if least is None else ()):
            refused(post_session(server, CONFIG, 2, **{key: amount}), key)
    for key, value in dict(associate_type="selfish", label_setting="uninformed", game_order="WoC-WC").items():
        refused(post_session(server, CONFIG, 2, **{key: value}), key, "fixed by the config's name")
    # The admin's create page: the message, and no traceback.
    reply = create_with_admin_form(server, CONFIG, 2, participation_fee=-15)
    assert reply.get("error") == ("Failed to create session: Session config 'participation_fee' is -15.0; it must "
                                  "be 0 or more."), reply
    assert reply["traceback"] == TRACEBACK_NOTE, reply
