"""The live session dashboard's data: progress, the experiment so far, the agents' health.

One function, ``session_dashboard(session)``, returns a JSON-ready dictionary; the admin page
(lab/admin_views.py) renders it and the browser polls it every few seconds and draws the
plots itself (uPlot, served from _static/vendor). It reads each table once per request
(participants, each game's players, messages, agent turns, model calls) and aggregates in
Python, so its cost grows with the rows of one session only (bench/dashboard.py: 72
participants x 10 rounds).

Agreement and breach are a *live proxy*, not the paper's measure (SI Note 2: two annotators
and a resolver, analysis/annotation.py, after the session): a pair-round is an "agreement"
when both sides sent in time at least one message proposing option A (``PROPOSES_A``); a
"breach" is an agreement after which at least one side chose B.
"""

from __future__ import annotations

import json
import re
import statistics
import threading
import time
from collections import Counter, defaultdict

import protocol
from lab.session_settings import GAME_APPS, params

# "A", "option A", "choose A", "选A", "选择A", "合作" (cooperate) — the neutral label or the word.
PROPOSES_A = re.compile(r"(?<![A-Za-z])A(?![A-Za-z])|选\s*A|合作|cooperat", re.IGNORECASE)
# Past the longest stage limit plus this margin, a participant on a page counts as idle.
IDLE_MARGIN_SECONDS = 15
ROUND_START_PAGE = "RoundStart"


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (R's quantile type 7, numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _rate(numerator: int, denominator: int) -> float | None:
    return None if not denominator else round(numerator / denominator, 4)


def _game_tables(app: str):
    from otree.common import get_models_module

    return get_models_module(app)


def progress(session, now: float) -> dict:
    """Who is where (oTree's participant records), who is idle, whose tab is closed."""
    p = params(session)
    participants = sorted(session.get_participants(), key=lambda pp: pp.id_in_session)
    idle_after = max(p.stage_limits.values()) + IDLE_MARGIN_SECONDS
    stages: Counter = Counter()
    rows = []
    for pp in participants:
        app = pp._current_app_name or ""
        page = pp._current_page_name or ""
        finished = bool(pp._index_in_pages and pp._index_in_pages >= pp._max_page_index)
        stage = "not started" if not pp.visited else "finished" if finished else f"{app} r{pp._round_number} {page}"
        stages[stage] += 1
        since = pp._last_page_timestamp
        on_page = None if since is None or not pp.visited else max(0, now - since)
        tab = ""
        if pp.is_on_wait_page:  # oTree tracks a wait page's websocket: closed tab / hidden tab
            tab = "open" if pp._waitpage_is_connected and not pp._waitpage_tab_hidden else (
                "hidden" if pp._waitpage_is_connected else "closed")
        rows.append(dict(
            id=pp.id_in_session, code=pp.code, label=pp.label or "", app=app, round=pp._round_number,
            page=page, seconds_on_page=None if on_page is None else round(on_page),
            idle=bool(on_page is not None and not finished and not pp.is_on_wait_page and on_page > idle_after),
            on_wait_page=bool(pp.is_on_wait_page), tab=tab, finished=finished,
        ))
    holding = _round_start_hold(rows, now, participants)
    return dict(
        stages=[dict(stage=stage, participants=count) for stage, count in sorted(stages.items())],
        participants=rows,
        idle=[r["code"] for r in rows if r["idle"]],
        closed_tabs=[r["code"] for r in rows if r["tab"] == "closed"],
        idle_after_seconds=idle_after,
        round_start_hold=holding,
    )


def _round_start_hold(rows: list[dict], now: float, participants) -> dict | None:
    """While some wait at a round start: how long the first has waited, and who holds them."""
    waiting = [r for r in rows if r["page"] == ROUND_START_PAGE and r["on_wait_page"]]
    if not waiting:
        return None
    first = max(r["seconds_on_page"] or 0 for r in waiting)
    app, round_number = waiting[0]["app"], waiting[0]["round"]
    behind = [r["code"] for r in rows if not r["finished"] and not (
        r["app"] == app and r["round"] == round_number and r["page"] == ROUND_START_PAGE)]
    return dict(app=app, round=round_number, waiting=len(waiting), held_seconds=first, held_by=behind[:12],
                held_by_count=len(behind))


def round_start_waits(session) -> list[dict]:
    """Per round start already passed: the spread of arrivals (last minus first), from oTree's
    page-time records (the completion of the page before RoundStart is the arrival)."""
    arrivals: dict[tuple, list[tuple]] = defaultdict(list)
    for participant_rows in page_times(session).values():
        previous = None
        for row in participant_rows:
            if row["page_name"] == ROUND_START_PAGE and previous is not None:
                arrivals[(row["app_name"], row["round_number"])].append(
                    (previous["completed_at"], row["participant_code"]))
            previous = row
    waits = []
    for (app, round_number), times in sorted(arrivals.items()):
        first, last = min(times), max(times)
        waits.append(dict(app=app, round=round_number, spread_seconds=last[0] - first[0], slowest=last[1]))
    return waits


# oTree's page-time batches are append-only: each session's parsed lines are kept with the last
# batch id read, so a dashboard poll reads only the batches written since the previous poll.
_PAGE_TIME_CACHE: dict[str, tuple[int, list[dict]]] = {}
_PAGE_TIME_CACHE_LOCK = threading.Lock()


def _parse_page_time_lines(texts, session_code: str) -> list[dict]:
    from otree import common2

    columns = list(common2.TimeSpentRow.__annotations__)
    prefix = f"{session_code},"
    rows = []
    for text in texts:
        for line in (text or "").splitlines():
            if not line.startswith(prefix):
                continue
            values = dict(zip(columns, line.split(",")))
            try:
                rows.append(dict(
                    participant_code=values["participant_code"], page_index=int(values["page_index"]),
                    app_name=values["app_name"], page_name=values["page_name"],
                    completed_at=int(values["epoch_time_completed"]), round_number=int(values["round_number"]),
                    timeout_happened=values["timeout_happened"] in ("1", "True"),
                    is_wait_page=values["is_wait_page"] in ("1", "True"),
                ))
            except (KeyError, ValueError):
                continue  # a malformed line is skipped, never fatal for the page
    return rows


def page_times(session, participant_code: str | None = None) -> dict[str, list[dict]]:
    """oTree's page-time records (its PageTimes export) of a session, per participant, in order:
    the rows already written to the database plus those still in this process's buffer."""
    from otree import common2
    from otree.database import dbq
    from otree.models_concrete import PageTimeBatch

    with _PAGE_TIME_CACHE_LOCK:
        last_id, stored = _PAGE_TIME_CACHE.get(session.code, (0, []))
        new = dbq(PageTimeBatch).filter(PageTimeBatch.id > last_id).order_by(PageTimeBatch.id).with_entities(
            PageTimeBatch.id, PageTimeBatch.text).all()
        if new:
            stored = stored + _parse_page_time_lines((text for _, text in new), session.code)
            last_id = new[-1][0]
            _PAGE_TIME_CACHE[session.code] = (last_id, stored)
    rows = stored + _parse_page_time_lines(list(common2.page_completion_buffer), session.code)
    result: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if participant_code and row["participant_code"] != participant_code:
            continue
        result[row["participant_code"]].append(dict(row))
    for participant_rows in result.values():
        participant_rows.sort(key=lambda r: (r["page_index"], r["completed_at"]))
    return result


def _columns(module, session, Model, *columns):
    """Only the named columns of a game's rows of this session (no ORM objects: the dashboard is
    polled every few seconds under oTree's global lock, so it reads what it shows, nothing more).
    ``Model`` is the app's Player or a table linked to it; Player.round_number comes first."""
    from otree.database import dbq

    Player = module.Player
    query = dbq(Model)
    if Model is not Player:
        query = query.join(Player, Model.player_id == Player.id)
    return query.filter(Player.session_id == session.id).with_entities(Player.round_number, *columns).all()


def experiment(session) -> dict:
    """Per game and round: cooperation (humans, agents), agreements and breaches (WC), messages
    not sent in time, decisions timed out."""
    p = params(session)
    codes = {pp.id: pp.code for pp in session.get_participants()}
    games = {}
    for game in protocol.GAME_ORDERS[p.game_order]:
        module = _game_tables(GAME_APPS[game])
        Player = module.Player
        with_chat = getattr(module, "Message", None) is not None
        rounds = range(1, p.rounds_per_game + 1)
        human = {r: [0, 0] for r in rounds}  # cooperations, decisions
        agent = {r: [0, 0] for r in rounds}
        timed_out = {r: 0 for r in rounds}
        unsent = {r: 0 for r in rounds}
        decided_pairs = set()
        for r, choice, choice_timed_out, participant_id, associate_code, associate_choice in _columns(
                module, session, Player, Player.choice, Player.choice_timed_out, Player.participant_id,
                Player.associate_code, Player.associate_choice):
            if r not in human or not choice:
                continue
            human[r][0] += choice == protocol.COOPERATE
            human[r][1] += 1
            timed_out[r] += bool(choice_timed_out)
            if associate_choice:
                decided_pairs.add((r, _pair_key(codes.get(participant_id), associate_code), choice, associate_choice))
        if p.with_agents:
            Turn = module.AgentTurn
            for r, kind, status, choice in _columns(module, session, Turn, Turn.kind, Turn.status, Turn.choice):
                if kind != "decision" or choice is None or r not in agent:
                    continue
                agent[r][0] += choice == protocol.COOPERATE
                agent[r][1] += 1
                timed_out[r] += status == "fallback"
        agreements = {r: [0, 0, 0] for r in rounds}  # pairs decided, agreements, breaches
        if with_chat:
            Message = module.Message
            proposes: dict[tuple, set] = defaultdict(set)  # (round, pair) -> senders proposing A
            for r, sent_in_time, text, sender, receiver in _columns(
                    module, session, Message, Message.sent_in_time, Message.text, Message.sender_code,
                    Message.receiver_code):
                if r not in unsent:
                    continue
                if not sent_in_time:
                    unsent[r] += 1
                elif PROPOSES_A.search(text or ""):
                    proposes[(r, _pair_key(sender, receiver))].add(sender)
            for r, pair, own, other in decided_pairs:
                agreements[r][0] += 1
                if len(proposes.get((r, pair), ())) == 2:
                    agreements[r][1] += 1
                    agreements[r][2] += protocol.DEFECT in (own, other)
        # A round nobody has reached yet has no counts (a gap in the plots, not a zero).
        reached = {r for r in rounds if human[r][1] or agent[r][1] or unsent[r] or timed_out[r]}

        def counts(values: dict) -> list:
            return [values[r] if r in reached else None for r in rounds]

        games[game] = dict(
            rounds=list(rounds),
            human_cooperation=[_rate(*human[r]) for r in rounds],
            agent_cooperation=[_rate(*agent[r]) for r in rounds] if p.with_agents else None,
            decisions=[human[r][1] for r in rounds],
            timed_out=counts(timed_out),
            unsent_messages=counts(unsent) if with_chat else None,
            agreement_rate=[_rate(agreements[r][1], agreements[r][0]) for r in rounds] if with_chat else None,
            breach_rate=[_rate(agreements[r][2], agreements[r][1]) for r in rounds] if with_chat else None,
            agreements_total=sum(a[1] for a in agreements.values()),
            breaches_total=sum(a[2] for a in agreements.values()),
            pairs_total=sum(a[0] for a in agreements.values()),
        )
    return games


def _pair_key(a: str, b: str) -> str:
    return "|".join(sorted([a or "", b or ""]))


def agents_health(session) -> dict | None:
    """Model calls, latency, fallbacks by reason, spend against the budget, the model check."""
    p = params(session)
    if not p.with_agents:
        return None
    from lab import agent_runtime as agents

    from otree.database import dbq

    latencies, statuses, reasons = [], Counter(), Counter()
    calls = 0
    spent = 0.0  # the same sum as agent_runtime.session_spent, from the columns only
    for app in GAME_APPS.values():
        module = _game_tables(app)
        Call, Turn = module.LlmCall, module.AgentTurn
        for status, sent, done, cost in dbq(Call).filter(Call.session_code == session.code).with_entities(
                Call.status, Call.time_sent, Call.time_done, Call.cost):
            calls += 1
            statuses[status or "?"] += 1
            spent += cost or 0.0
            if done is not None and sent is not None:
                latencies.append(done - sent)
        for _, status, reason in _columns(module, session, Turn, Turn.status, Turn.fallback_reason):
            if status == "fallback":
                reasons[reason or "unknown"] += 1
    limit = agents.budget_limit(session)
    config = agents.model_config(session)
    return dict(
        model=f"{config.provider} / {config.model}",
        calls=calls,
        calls_by_status=dict(statuses),
        latency_p50=percentile(latencies, 0.5),
        latency_p95=percentile(latencies, 0.95),
        latency_mean=statistics.fmean(latencies) if latencies else None,
        fallbacks_by_reason=dict(reasons),
        spent=round(spent, 6),
        budget=limit,
        model_check=model_check_status(session),
    )


def model_check_status(session) -> str:
    """The model check's outcome when one was recorded on the session (``session.vars`` or the
    config, key ``model_check``: a text or a dict with a ``status``), else "not run"."""
    for source in (session.vars or {}, session.config or {}):
        value = source.get("model_check") or source.get("model_check_status")
        if isinstance(value, dict):
            value = value.get("status") or json.dumps(value, default=str)
        if value:
            return str(value)
    return "not run"


def session_dashboard(session) -> dict:
    now = time.time()
    p = params(session)
    return dict(
        session_code=session.code,
        treatment=p.treatment,
        label_setting=p.label_setting,
        game_order=p.game_order,
        rounds_per_game=p.rounds_per_game,
        generated_at=now,
        progress=progress(session, now),
        round_start_waits=round_start_waits(session),
        games=experiment(session),
        agents=agents_health(session),
    )
