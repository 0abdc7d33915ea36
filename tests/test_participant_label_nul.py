"""Addresses with a NUL or a participant label with a control character get a clean 400 with a
message, on SQLite and PostgreSQL: PostgreSQL rejects NUL in text, so
``/InitializeParticipant/CODE?participant_label=lab%00el`` answered 500 there (SQLite stored the
NUL). Nothing of such a request reaches the database; ordinary labels (any language) still work.
(What participants type in forms is cleaned instead: tests/test_typed_text_and_deadlines.py.)"""

from __future__ import annotations

import asyncio

import pytest
import requests

from lab.base import i18n
from lab.server.request_guard import NUL_REFUSED

LABEL_REFUSED = i18n.text("en", "room_label_invalid")
REDIRECTS = (302, 303, 307)


def get(server, path: str) -> requests.Response:
    """The address exactly as written (requests would leave %00 alone too; no redirects followed)."""
    return requests.get(server.base_url + path, allow_redirects=False, timeout=30)


def labels(server, session_code: str) -> list:
    return [p["label"] for p in server.get_session(session_code)["participants"]]


@pytest.mark.server
def test_control_characters_in_labels_and_nul_in_addresses_are_refused(lab_server, database_url):
    server = lab_server(database_url, OTREE_LANGUAGE_CODE="en")
    created = requests.post(f"{server.base_url}/api/sessions", json=dict(
        session_config_name="hh_uninformed_wc_first", num_participants=4,
        modified_session_config_fields=dict(rounds_per_game=1)), timeout=60)
    assert created.ok, created.text
    session_code, join_path = created.json()["code"], "/join/" + created.json()["session_wide_url"].rsplit("/", 1)[1]
    first, second = [p["code"] for p in server.get_session(session_code)["participants"]][:2]

    for label in ("lab%00el", "lab%1Bel", "lab%0Ael", "lab%C2%85el"):  # NUL, ESC, LF, C1 NEL
        for path in (f"/InitializeParticipant/{first}?participant_label={label}", f"{join_path}?participant_label={label}",
                     f"/room/lab?participant_label={label}&welcome_page_ok=1"):
            refused = get(server, path)
            assert refused.status_code == 400 and refused.text == LABEL_REFUSED, (path, refused.status_code,
                                                                                   refused.text[:500])
            assert refused.headers["content-type"].startswith("text/plain")
    assert labels(server, session_code) == [None] * 4  # nothing stored

    # A NUL anywhere else in an address: a participant's code, an export's session code.
    for path in (f"/InitializeParticipant/{first}%00", f"/p/{first}%00/instructions/Welcome/1",
                 f"/api/export_app_custom?app=payment&function_name=custom_export&session_code={session_code}%00"):
        refused = get(server, path)
        assert refused.status_code == 400 and refused.text == NUL_REFUSED, (path, refused.status_code, refused.text[:500])

    # A wait page's socket with a NUL in its participant code is refused before it opens.
    import websockets
    import websockets.exceptions

    async def open_socket():
        async with websockets.connect(f"ws://127.0.0.1:{server.port}/auto_advance?participant_code={first}%00"
                                      f"&page_index=1"):
            pass

    with pytest.raises(websockets.exceptions.InvalidStatusCode):
        asyncio.run(open_socket())

    # Ordinary labels are taken as before, in any script.
    assert get(server, f"/InitializeParticipant/{first}?participant_label=cubicle-07").status_code in REDIRECTS
    entered = get(server, f"{join_path}?participant_label=%E5%BC%A0%E4%B8%89")  # 张三
    assert entered.status_code in REDIRECTS, entered.text[:500]
    assert sorted(filter(None, labels(server, session_code))) == sorted(["cubicle-07", "张三"])
    assert requests.get(server.start_url(second), timeout=30).status_code == 200
    assert "Traceback" not in server.log() and "NUL" not in server.log()


def test_what_the_guard_refuses():
    """The rule itself, without a server: labels with control characters, NUL anywhere in an
    address; everything else goes on to oTree."""
    from lab.server.request_guard import refusal

    def scope(path: str, query: bytes = b"") -> dict:
        return {"type": "http", "path": path, "query_string": query}

    assert refusal(scope("/p/abc\x00/instructions/Welcome/1")) == NUL_REFUSED
    assert refusal(scope("/api/export_wide", b"session_code=ab%00c")) == NUL_REFUSED
    assert refusal(scope("/room/lab", b"participant_label=a%09b")) is not None  # TAB: a control character
    assert refusal(scope("/room/lab", b"participant_label=%E5%BC%A0+%E4%B8%89%20x&welcome_page_ok=1")) is None
    assert refusal(scope("/p/abc/instructions/Welcome/1")) is None
    assert refusal(scope("/api/export_wide", b"session_code=abc")) is None


@pytest.mark.server
def test_rest_participant_vars_refuses_a_label_with_control_characters(lab_server, database_url):
    """oTree's ``POST /api/participant_vars`` (room and label in a JSON body: a recruiting
    script's data for a participant before they arrive) looked the label up and answered 500 on
    PostgreSQL for a NUL in it. A label with a control character is refused as in an address
    (400, the same message), and nothing is stored; an ordinary label's data is kept."""
    server = lab_server(database_url, OTREE_LANGUAGE_CODE="en")
    url = f"{server.base_url}/api/participant_vars"
    for label in ("lab\x00el", "lab\x1bel", "lab\nel", "lab\x85el"):
        refused = requests.post(url, json=dict(room_name="lab", participant_label=label, vars=dict(age=30)), timeout=30)
        assert refused.status_code == 400 and refused.text == LABEL_REFUSED, (label, refused.status_code,
                                                                              refused.text[:500])
    # A body that is not JSON: a 400 saying so (oTree answered 500), on every REST call.
    for path in ("/api/participant_vars", "/api/sessions", "/api/participant_vars/abc"):
        for body in (b"\x00{", b"room_name=lab", "{'a': 1}".encode(), b"\xff\xfe"):
            refused = requests.post(server.base_url + path, data=body, timeout=30)
            assert refused.status_code == 400 and refused.text.startswith("The request's body is not JSON"), (
                path, body, refused.status_code, refused.text[:300])
    # A body that is JSON but not an object, a label or room that is not text, vars that are not an
    # object: a 400 saying which (oTree answered the label and the vars with a 500).
    for path, body, message in (
            ("/api/participant_vars", [1, 2], "The request's body is not a JSON object"),
            ("/api/participant_vars", dict(room_name="lab", participant_label=7, vars={}), "'participant_label' must be text"),
            ("/api/participant_vars", dict(room_name=["lab"], participant_label="a", vars={}), "'room_name' must be text"),
            ("/api/participant_vars", dict(room_name="lab", participant_label="a", vars=[1]), "'vars' must be a JSON object"),
            ("/api/participant_vars/abc", dict(vars="x"), "'vars' must be a JSON object")):
        refused = requests.post(server.base_url + path, json=body, timeout=30)
        assert refused.status_code == 400 and refused.text.startswith(message), (path, body, refused.status_code,
                                                                                 refused.text[:300])
    kept = requests.post(url, json=dict(room_name="lab", participant_label="cubicle-07",
                                        vars=dict(note="张三 \x00 kept as sent")), timeout=30)
    assert kept.status_code == 200, kept.text[:500]  # oTree had the whole body (else a 403: missing arguments)
    assert "Traceback" not in server.log()
