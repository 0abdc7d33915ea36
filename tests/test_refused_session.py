"""A session refused at creation leaves nothing behind (issue 23), on SQLite and PostgreSQL:
through the REST API the refusal is a 400 with the message (not a 500 with a traceback), through
the admin's create-session form the message shows as before, and neither leaves a session,
participant, player, group, subsession or agent seat; the next session is created and starts."""

from __future__ import annotations

import asyncio
import json

import pytest
import requests

import settings

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


def post_session(server, config: str, participants: int, **fields) -> requests.Response:
    return requests.post(f"{server.base_url}/api/sessions", json=dict(
        session_config_name=config, num_participants=participants, modified_session_config_fields=fields), timeout=60)


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
    nothing_left(server)

    # The next session (SQLite may give it the refused one's id) is created and starts.
    created = post_session(server, CONFIG, 2, llm_provider="simulated", rounds_per_game=1)
    assert created.status_code == 200, created.text[:1000]
    participants = server.get_session(created.json()["code"])["participants"]
    first_page = requests.get(server.start_url(participants[0]["code"]), timeout=30)
    assert first_page.status_code == 200 and "/instructions/" in first_page.url, first_page.url
