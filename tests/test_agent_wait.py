"""Zero wait: an agent that has answered costs the participant nothing.

Against the production server: a participant slower than the model never lands on a wait page
(the turn is settled in the request that submits the stage); a participant faster than the
model waits on the same wait page as in H-H and is woken by a push on its websocket as soon as
the turn ends (not at the stage limit, not by polling). On SQLite and PostgreSQL.
"""

import asyncio
import json
import re
import time

import pytest
import websockets

from tests.http_participant import HttpParticipant

LIMITS = dict(rounds_per_game=2, language="en", message_1_seconds=30, read_1_seconds=20, message_2_seconds=30,
              read_2_seconds=20, decision_seconds=30, result_seconds=20)
WAIT_SOCKET = re.compile(r'makeReconnectingWebSocket\("([^"]+)"\)')


class PushedParticipant(HttpParticipant):
    """Waits on wait pages for the push on their websocket, as the browser does; records when."""

    def wait_on_wait_page(self, response):
        path = WAIT_SOCKET.search(response.text).group(1).replace("&amp;", "&")
        url = self.base_url.replace("http://", "ws://") + path

        async def wait():
            async with websockets.connect(url) as ws:
                return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))

        started = time.monotonic()
        message = asyncio.run(wait())
        assert message == {"status": "ready"}, message
        self.pushes = getattr(self, "pushes", []) + [time.monotonic() - started]


def _agent_waits(participant):
    return [page for page, _ in participant.pages if page.startswith("Wait")]


@pytest.mark.server
def test_no_wait_page_when_the_agent_has_answered(lab_server, database_url):
    server = lab_server(database_url)
    session = server.create_session("hf_uninformed_wc_first", 1, **LIMITS, llm_provider="simulated",
                                    llm_simulated_latency=0.3)
    participant = PushedParticipant(server.base_url, session["participants"][0]["code"],
                                    think_seconds=lambda page: 1.2 if page in ("Message1", "Message2", "Decision") else 0)
    participant.play(timeout=240)
    assert participant.done
    assert _agent_waits(participant) == [], participant.pages
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    assert len([d for d in decisions if d["player_kind"] == "agent"]) == 2 * 2
    assert not any(d["timed_out"] == "True" for d in decisions), "every turn answered in time"


@pytest.mark.server
def test_a_slow_agent_wakes_the_waiting_page_by_a_push(lab_server, database_url):
    latency = 2.0
    server = lab_server(database_url)
    session = server.create_session("hf_uninformed_woc_first", 1, **LIMITS, llm_provider="simulated",
                                    llm_simulated_latency=latency)
    participant = PushedParticipant(server.base_url, session["participants"][0]["code"])
    participant.play(timeout=240)
    assert participant.done
    waits = _agent_waits(participant)
    assert "WaitMessage1" in waits and "WaitDecision" in waits, participant.pages
    # Woken when the model answered (~2 s after the turn started), far before the 30 s limit.
    assert participant.pushes and max(participant.pushes) < latency + 5, participant.pushes
    decisions = server.export("payment", "custom_export_decisions", session["code"])
    assert not any(d["timed_out"] == "True" for d in decisions if d["player_kind"] == "agent")
