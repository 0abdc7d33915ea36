"""The server's side of a bench run, request by request (bench/lab_load.py --trace).

Loaded into the measured server by the bench's settings when ``LAB_BENCH_SERVER_TRACE`` names a
file (never by the project itself): every request that takes oTree's global lock is written as
one CSV row (when it arrived, how long it waited for the lock, how long it held it, its path,
the SQL statements it sent, how much of the hold came before and after the page's own code; with
``LAB_BENCH_TRACE_SQL`` set, each statement's verb and table in order), every other hold of that
lock (a websocket's connect, disconnect or message, the closed-tab watcher: kind 'socket', the
holder in ``path``), every garbage collection of the oldest generation as a row of its own (its
pause), and every half second each thread's CPU time so far. Together with the client's trace
this tells a slow page load that queued behind others from one that was slow itself.
"""

from __future__ import annotations

import atexit
import contextvars
import gc
import os
import sys
import threading
import time

_file = None
_lock = threading.Lock()
_gc_started = [0.0]
_request: contextvars.ContextVar = contextvars.ContextVar("lab_bench_request")
# A hold of the lock by anything but a page request (a websocket's connect or disconnect, the
# closed-tab watcher): (who, acquired at), for a row of kind 'socket'.
_other_hold: contextvars.ContextVar = contextvars.ContextVar("lab_bench_other_hold")


def _write(*values) -> None:
    with _lock:
        _file.write(",".join(map(str, values)) + "\n")


def install(path: str) -> None:
    global _file
    if _file is not None:
        return
    _file = open(path, "a", buffering=1)
    atexit.register(_file.close)
    if _file.tell() == 0:
        _file.write("kind,pid,arrived,waited,held,method,path,inner,inner_cpu,commit,statements,before_page,after_page,sql\n")
    _trace_lock()
    gc.callbacks.append(_on_gc)
    threading.Thread(target=_sample_threads, name="bench-thread-sampler", daemon=True).start()


THREAD_SAMPLE_SECONDS = 0.5


def _sample_threads() -> None:
    """Each thread's CPU seconds so far (the kernel's per-thread accounting), every half second:
    rows of kind 'cpu' with the thread's name in ``method`` (the agent engine, oTree's loop, the
    request threads) and its CPU seconds in ``held``."""
    ticks = os.sysconf("SC_CLK_TCK")
    while True:
        now = time.time()
        for thread in threading.enumerate():
            try:
                fields = open(f"/proc/self/task/{thread.native_id}/stat").read().rsplit(")", 1)[1].split()
            except (OSError, TypeError):
                continue
            cpu = (int(fields[11]) + int(fields[12])) / ticks
            _write("cpu", os.getpid(), f"{now:.4f}", 0, f"{cpu:.2f}", thread.name.replace(",", " "), "", "", "", "", "")
        time.sleep(THREAD_SAMPLE_SECONDS)


def _on_gc(phase: str, info: dict) -> None:
    if info.get("generation") != 2:
        return
    if phase == "start":
        _gc_started[0] = time.time()
    else:
        _write("gc", os.getpid(), f"{_gc_started[0]:.4f}", 0, f"{time.time() - _gc_started[0]:.4f}", "", "", "", "", "",
               "")


def _trace_lock() -> None:
    """oTree's lock (``otree.middleware.lock2``, an asyncio.Lock every page request takes in
    ``CommitTransactionMiddleware``) timed through its own acquire and release; which request
    took it comes from a context variable set as the request enters that middleware. Installed
    from the project's settings, before oTree builds its app (and before ``otree.middleware``
    can be imported): the middleware's dispatch is wrapped as starlette makes it, or the project's
    own (lab/server/request_lock.py) where it replaces oTree's."""
    from starlette.middleware.base import BaseHTTPMiddleware

    original_init = BaseHTTPMiddleware.__init__

    def __init__(self, app, dispatch=None):
        original_init(self, app, dispatch)
        if type(self).__name__ == "CommitTransactionMiddleware":
            self.dispatch_func = _traced(self.dispatch_func)

    BaseHTTPMiddleware.__init__ = __init__

    try:  # the project's own middleware in its place (lab/server/request_lock.py)
        from lab.server.request_lock import CommitTransaction
    except ImportError:  # the plain oTree baseline
        return
    call = CommitTransaction.__call__

    async def traced_call(self, scope, receive, send):
        if scope["type"] != "http":
            return await call(self, scope, receive, send)
        _time_the_lock()
        token = _request.set(dict(arrived=time.time(), method=scope["method"], path=scope["path"]))
        try:
            return await call(self, scope, receive, send)
        finally:
            _request.reset(token)

    CommitTransaction.__call__ = traced_call


def _traced(dispatch):
    async def traced_dispatch(request, call_next):
        _time_the_lock()
        token = _request.set(dict(arrived=time.time(), method=request.method, path=request.url.path))
        try:
            return await dispatch(request, call_next)
        finally:
            _request.reset(token)

    return traced_dispatch


def _time_the_lock() -> None:
    from otree import middleware

    lock = middleware.lock2
    if getattr(lock, "_lab_bench_timed", False):
        return
    acquire, release = lock.acquire, lock.release

    async def timed_acquire():
        arrived = time.time()
        await acquire()
        request = _request.get(None)
        if request is not None:
            request["acquired"] = time.time()
        else:
            _other_hold.set((_holder(), arrived, time.time()))

    def timed_release():
        release()
        request = _request.get(None)
        if request is None:
            hold = _other_hold.get(None)
            if hold is not None:
                _other_hold.set(None)
                who, arrived, acquired = hold
                _write("socket", os.getpid(), f"{arrived:.4f}", f"{acquired - arrived:.4f}",
                       f"{time.time() - acquired:.4f}", "", who, "", "", "", "")
        elif "acquired" in request:
            _write("request", os.getpid(), f"{request['arrived']:.4f}",
                   f"{request['acquired'] - request['arrived']:.4f}", f"{time.time() - request['acquired']:.4f}",
                   request["method"], request["path"], f"{request.get('inner', 0):.4f}",
                   f"{request.get('inner_cpu', 0):.4f}", f"{request.get('commit', 0):.4f}",
                   request.get("statements", 0), *_around_the_page(request), "|".join(request.get("sql", ())))

    lock.acquire, lock.release = timed_acquire, timed_release
    lock._lab_bench_timed = True
    _time_the_page_code()


def _around_the_page(request: dict) -> tuple[str, str]:
    """The hold's time before the page's code started (the participant's rows loaded on the event
    loop, the form parsed, the hop to the worker thread) and after it ended until the commit began
    (the hop back, the response built): ``before_page``, ``after_page``; empty for a request that
    ran no page code (a redirect)."""
    if "inner_started" not in request or "commit_started" not in request:
        return "", ""
    return (f"{request['inner_started'] - request['acquired']:.4f}",
            f"{request['commit_started'] - request['inner_ended']:.4f}")


def _holder() -> str:
    """Who takes the lock outside a page request: the first caller past the lock's own frames
    (``Consumer.on_connect``, ``watch``)."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.endswith(("locks.py", "server_trace.py"))
                                 or frame.f_code.co_name in ("__aenter__", "timed_acquire")):
        frame = frame.f_back
    if frame is None:
        return "?"
    owner = frame.f_locals.get("self")
    return (f"{type(owner).__name__}." if owner is not None else "") + frame.f_code.co_name


def _time_the_page_code() -> None:
    """The part of a page request that runs the page's code (oTree's ``inner_dispatch``, in a
    worker thread): its wall time and that thread's CPU time. Wall minus CPU is time the thread
    could not run: waiting for the GIL or for the database."""
    from otree.views import abstract

    run_in_threadpool = abstract.run_in_threadpool

    def timed(func, *args, **kwargs):
        def run():
            request = _request.get(None)
            if request is not None:
                request.setdefault("inner_started", time.time())
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return func(*args, **kwargs)
            finally:
                request = _request.get(None)
                if request is not None:
                    request["inner"] = request.get("inner", 0) + time.perf_counter() - started
                    request["inner_cpu"] = request.get("inner_cpu", 0) + time.thread_time() - cpu
                    request["inner_ended"] = time.time()

        return run_in_threadpool(run)

    abstract.run_in_threadpool = timed

    from otree.database import DBWrapper

    commit = DBWrapper.commit

    def timed_commit(self):
        started = time.perf_counter()
        request = _request.get(None)
        if request is not None:
            request["commit_started"] = time.time()
        try:
            return commit(self)
        finally:
            request = _request.get(None)
            if request is not None:
                request["commit"] = request.get("commit", 0) + time.perf_counter() - started

    DBWrapper.commit = timed_commit
    _time_the_watcher()

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "before_cursor_execute")
    def count_statement(conn, cursor, statement, *args):
        request = _request.get(None)
        if request is not None:
            request["statements"] = request.get("statements", 0) + 1
            if os.environ.get("LAB_BENCH_TRACE_SQL"):
                request.setdefault("sql", []).append(_statement_summary(statement))


def _statement_summary(statement: str) -> str:
    """``SELECT game_with_chat_player`` from a statement: its verb and first table."""
    import re

    words = statement.split()
    verb = words[0].upper() if words else "?"
    table = re.search(r"\b(?:FROM|UPDATE|INTO)\s+\"?(\w+)", statement, re.IGNORECASE)
    return f"{verb} {table.group(1) if table else ''}".strip()


def _time_the_watcher() -> None:
    """The closed-tab watcher's rounds (lab/online/presence.py, under oTree's lock like a request):
    rows of kind 'watcher', its time holding the lock in ``held`` (a drop is made there)."""
    from lab.online import presence

    due = presence.due

    def traced_due(now=None):
        started = time.time()
        try:
            return due(now)
        finally:
            _write("watcher", os.getpid(), f"{started:.4f}", 0, f"{time.time() - started:.4f}", "", "", "", "", "", "")

    presence.due = traced_due
