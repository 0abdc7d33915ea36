"""A participant made of plain HTTP requests: fast, no browser, survives a server restart.

It reads which page it is on from oTree's URL (/p/{code}/{app}/{Page}/{index}), answers it
with the form fields a person would submit and polls wait pages (the wait for a human
associate and for an agent are the same pages). Used by the restart test and
bench/lab_load.py (which listens on the wait pages' websocket, as a browser does).
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import requests

from tests.lab_server import QUIZ_ANSWERS

PAGE_RE = re.compile(r"/p/[^/]+/(?P<app>[^/]+)/(?P<page>[^/]+)/(?P<index>\d+)")
COMPLETION_CODE_RE = re.compile(r'id="completion-code">([^<]*)<')
LIVE_URL_RE = re.compile(r'id="otree-live" data-socket-url="([^"]+)"')
REMAINING_SECONDS_RE = re.compile(r"remainingTimeoutSeconds = ([0-9.]+|null);")
# The page's own socket (lab/server/notices.py), as its state block names it (JSON: "&" escaped).
PAGE_SOCKET_RE = re.compile(r'"socket": "(/lab_notices\?[^"]+)"')
WAIT_PAGES = {"RoundStart", "WaitMessage1", "WaitMessage2", "WaitDecision", "AllFinished"}
LIKERT_PAGES = {
    "Perception": ["agency", "experience", "trustworthiness", "intelligence", "likability", "cooperativeness", "fairness"],
    "CommunicationQuality": ["clarity", "conciseness", "concreteness", "coherence", "courteousness",
                             "correctness", "completeness"],
}


class PageSockets:
    """The participants' open tabs: each holds the socket its page opens (``/lab_notices``, what
    the server's closed-tab watcher counts, lab/online/presence.py), all on one event loop of
    their own. A tab that closes closes its socket."""

    def __init__(self, base_url: str) -> None:
        import asyncio

        self.base = base_url.replace("http://", "ws://")
        self.loop = asyncio.new_event_loop()
        self.sockets: dict[str, object] = {}
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def _run(self, coroutine):
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    def open(self, code: str, path: str) -> None:
        """``path``: the socket's path as the page names it."""
        import websockets

        async def connect():
            self.sockets[code] = await websockets.connect(self.base + path, max_size=None)
        self._run(connect())

    def open_for_page(self, code: str, page_html: str) -> bool:
        """The socket of the page ``page_html`` unless the tab holds one; False: the page has none."""
        if code in self.sockets:
            return True
        found = PAGE_SOCKET_RE.search(page_html)
        if not found:
            return False
        self.open(code, found[1].replace("\\u0026", "&"))
        return True

    def close(self, code: str) -> None:
        socket = self.sockets.pop(code, None)
        if socket is not None:
            self._run(socket.close())

    def close_all(self) -> None:
        for code in list(self.sockets):
            self.close(code)
        self.loop.call_soon_threadsafe(self.loop.stop)


@dataclass
class Timing:
    page: str
    seconds: float
    method: str
    changed_app: bool  # the request moved the participant into the next app


@dataclass
class HttpParticipant:
    base_url: str
    code: str
    messages: dict = field(default_factory=lambda: {1: "Let's both choose A", 2: "A it is"})
    choice: str = "A"
    think_seconds: Callable[[str], float] = lambda page: 0.0
    poll_seconds: float = 0.3
    timings: list = field(default_factory=list)
    pages: list = field(default_factory=list)
    waited: dict = field(default_factory=dict)  # page name -> seconds spent waiting there
    on_page: Optional[Callable[["HttpParticipant", str, int], None]] = None
    done: bool = False
    # Online sessions (lab/online/): the study link a participant arrives by (their participant code
    # is learnt from the page they land on); they wait in the lobby through its live socket, go on
    # past the payment page and end on the exit page, whose completion code is kept.
    entry_url: Optional[str] = None
    completion_code: Optional[str] = None
    # As a browser tab: the page's socket held open from the first page on (the closed-tab
    # watcher of online sessions drops a participant without one).
    page_sockets: Optional[PageSockets] = None

    def __post_init__(self):
        self.http = requests.Session()
        self.url = self.entry_url or f"{self.base_url}/InitializeParticipant/{self.code}"
        self.lock = threading.Lock()

    def _request(self, method: str, url: str, page: str, **kwargs) -> requests.Response:
        """One request, retried through connection errors (a restarting server)."""
        deadline = time.monotonic() + 120
        while True:
            started = time.monotonic()
            try:
                response = self.http.request(method, url, timeout=30, **kwargs)
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
                continue
            if response.status_code >= 500 and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            before, after = PAGE_RE.search(url), PAGE_RE.search(response.url)
            if after and not self.code:  # arrived by the study link: the page names the participant
                self.code = response.url.split("/p/", 1)[1].split("/", 1)[0]
            if after and self.page_sockets is not None:
                self.page_sockets.open_for_page(self.code, response.text)
            changed_app = bool(before and after and before["app"] != after["app"])
            self.timings.append(Timing(page, time.monotonic() - started, method, changed_app))
            return response

    def play(self, timeout: float = 600) -> "HttpParticipant":
        deadline = time.monotonic() + timeout
        response = self._request("GET", self.url, "start")
        while time.monotonic() < deadline:
            match = PAGE_RE.search(response.url)
            if not match:
                raise AssertionError(f"unexpected page {response.url}: {response.text[:300]}")
            page, index = match["page"], int(match["index"])
            if not self.pages or self.pages[-1] != (page, index):
                self.pages.append((page, index))
                if self.on_page:
                    self.on_page(self, page, index)
            if page == "Payment" and not self.entry_url:
                self.done = True
                return self
            if page == "OnlineExit":
                found = COMPLETION_CODE_RE.search(response.text)
                self.completion_code = found and found[1]
                self.done = True
                return self
            if page == "Lobby":
                started = time.monotonic()
                self.wait_in_lobby(response, deadline)
                self.waited[page] = self.waited.get(page, 0.0) + time.monotonic() - started
            if page in WAIT_PAGES:
                started = time.monotonic()
                self.wait_on_wait_page(response)
                self.waited[page] = self.waited.get(page, 0.0) + time.monotonic() - started
                response = self._request("GET", response.url, page)
                continue
            time.sleep(self.think_seconds(page))
            response = self._request("POST", response.url, page, data=self.answer(page))
        raise AssertionError(f"participant {self.code} did not finish; last pages {self.pages[-5:]}")

    def wait_in_lobby(self, response: requests.Response, deadline: float) -> None:
        """As the lobby page does in a browser: ask the page's live method every 2 s until a cohort
        has formed (then the form is submitted) or the lobby's limit sends the participant on (the
        page is submitted by the server: a GET finds the next page)."""
        import asyncio

        import websockets

        found = LIVE_URL_RE.search(response.text)
        if not found:
            return
        url = self.base_url.replace("http://", "ws://") + html.unescape(found[1])
        page_url = response.url
        # The page's own timer submits it at its limit; only then does a browser ask for the page.
        remaining = REMAINING_SECONDS_RE.search(response.text)
        limit_at = time.monotonic() + (float(remaining[1]) if remaining and remaining[1] != "null" else 0)

        async def ask() -> None:
            async with websockets.connect(url) as socket:
                while time.monotonic() < deadline:
                    await socket.send(json.dumps({}))
                    try:
                        reply = json.loads(await asyncio.wait_for(socket.recv(), timeout=2))
                    except asyncio.TimeoutError:
                        reply = {}
                    if (reply.get("live_method_payload") or reply).get("seated"):
                        return
                    if time.monotonic() >= limit_at and self.http.get(page_url, timeout=30).url != page_url:
                        return  # the lobby's limit sent the participant on
                    await asyncio.sleep(2)

        asyncio.run(ask())

    def wait_on_wait_page(self, response: requests.Response) -> None:
        """Until it is worth asking the wait page again (a browser listens on a websocket)."""
        time.sleep(self.poll_seconds)

    def answer(self, page: str) -> dict:
        if page in ("Message1", "Message2"):
            return {f"message_{page[-1]}": self.messages[int(page[-1])]}
        if page == "Decision":
            return {"choice": self.choice}
        if page == "Quiz":
            return dict(QUIZ_ANSWERS)
        if page == "NormEstimates":
            return {"norm_estimate_WC": "3", "norm_estimate_WoC": "2"}
        if page in LIKERT_PAGES:
            prefix = "perception" if page == "Perception" else "c7"
            return {f"{prefix}_{item}": "1" for item in LIKERT_PAGES[page]}
        if page == "BelievedHuman":
            return {"believed_human": "0"}
        if page == "Familiarity":
            return {"llm_familiarity": "3"}
        if page == "SocialValueOrientation":
            return {f"svo_item_{i}": "4" for i in range(1, 7)}
        if page == "Demographics":
            return {"age": "21", "gender": "female", "major": "Economics"}
        return {}
