"""oTree's per-request transaction as plain ASGI middleware (lab/server/request_lock.py): the server's
app uses it, a page's transaction is committed before the client sees its response, a 5xx or an
exception rolls back, the global lock is always released, the request's body is read before the
lock is taken, oTree's exports take it (they read the server's one connection: see
tests/test_exports_during_play.py), and only a path that never touches the database (static
files among them) goes without."""

import json

from tests import processes
from tests.lab_server import PYTHON, lab_env

SCRIPT = r"""
import asyncio, json
from otree.main import setup
setup()
import otree.asgi
from otree import middleware
from otree.database import db
from lab.server.request_lock import PATHS_WITHOUT_DATABASE, CommitTransaction
PATHS_WITHOUT_DATABASE.add("/no-database/")

result = {}
stack, layers = otree.asgi.app.middleware_stack, []
while stack is not None:
    layers.append(type(stack).__name__)
    stack = getattr(stack, "app", None)
result["layers"] = layers

events = []
db.commit = lambda: events.append(("commit", middleware.lock2.locked()))
db.rollback = lambda: events.append(("rollback", middleware.lock2.locked()))

def page(status=200, fail=False):
    async def app(scope, receive, send):
        events.append(("page", middleware.lock2.locked()))
        if fail:
            raise RuntimeError("page failed")
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
    return app

async def request(app, path):
    async def receive():
        events.append(("receive", middleware.lock2.locked()))
        return {"type": "http.request", "body": b"", "more_body": False}
    async def send(message):
        events.append((message["type"], middleware.lock2.locked()))
    try:
        await CommitTransaction(app)({"type": "http", "path": path, "method": "GET", "headers": []}, receive, send)
    except RuntimeError as exc:
        events.append(("raised", str(exc)))

export_path = sorted(middleware._get_paths_without_lock())[0]
for name, app, path in [("ok", page(), "/p/x/"), ("error", page(status=500), "/p/x/"),
                        ("exception", page(fail=True), "/p/x/"), ("export", page(), export_path),
                        ("no database", page(), "/no-database/x"),
                        ("static file", page(), "/static/otree/js/jquery-3.6.0.min.js")]:
    events.clear()
    asyncio.run(request(app, path))
    result[name] = events[:] + [("lock held after", middleware.lock2.locked())]
print("RESULT" + json.dumps(result))
"""


def test_commit_before_response_and_lock_always_released(project_copy, database_url):
    run = processes.run([PYTHON, "-c", SCRIPT], cwd=project_copy, env=lab_env(database_url), capture_output=True,
                        text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.split("RESULT", 1)[1])
    # oTree's two BaseHTTPMiddleware layers are gone from the server's stack; ours are first
    assert result["layers"][:2] == ["CommitTransaction", "OTreeServerErrorMiddleware"], result["layers"]
    assert "CommitTransactionMiddleware" not in result["layers"] and "PerfMiddleware" not in result["layers"]
    as_lists = {name: [list(e) for e in events] for name, events in result.items() if name != "layers"}
    # the request's body is read before the lock is taken; the page runs under the lock, commits
    # under it, and only then is anything sent
    assert as_lists["ok"] == [["receive", False], ["page", True], ["commit", True], ["http.response.start", False],
                              ["http.response.body", False], ["lock held after", False]]
    assert as_lists["error"] == [["receive", False], ["page", True], ["rollback", True],
                                 ["http.response.start", False], ["http.response.body", False],
                                 ["lock held after", False]]
    assert as_lists["exception"] == [["receive", False], ["page", True], ["rollback", True],
                                     ["raised", "page failed"], ["lock held after", False]]
    # oTree's exports (VIEWS_WITHOUT_LOCK) run under the lock as pages do
    assert as_lists["export"] == as_lists["ok"]
    # a path that never touches the database runs without it and still commits
    assert as_lists["no database"] == [["page", False], ["commit", False], ["http.response.start", False],
                                       ["http.response.body", False], ["lock held after", False]]
    # static files (several with every page a browser loads) never wait for the pages' lock
    assert as_lists["static file"] == as_lists["no database"]
