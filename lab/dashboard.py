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

import re
import statistics
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


def page_times(session, participant_code: str | None = None) -> dict[str, list[dict]]:
    """oTree's page-time records (its PageTimes export) of a session, per participant, in order:
    the rows already written to the database plus those still in this process's buffer."""
    from otree import common2
    from otree.database import dbq, values_flat
    from otree.models_concrete import PageTimeBatch

    texts = list(values_flat(dbq(PageTimeBatch).order_by("id"), PageTimeBatch.text))
    texts += list(common2.page_completion_buffer)
    columns = list(common2.TimeSpentRow.__annotations__)
    prefix = f"{session.code},"
    result: dict[str, list[dict]] = defaultdict(list)
    for text in texts:
        for line in text.splitlines():
            if not line.startswith(prefix):
                continue
            values = dict(zip(columns, line.split(",")))
            if participant_code and values.get("participant_code") != participant_code:
                continue
            try:
                result[values["participant_code"]].append(dict(
                    participant_code=values["participant_code"], page_index=int(values["page_index"]),
                    app_name=values["app_name"], page_name=values["page_name"],
                    completed_at=int(values["epoch_time_completed"]), round_number=int(values["round_number"]),
                    timeout_happened=values["timeout_happened"] in ("1", "True"),
                    is_wait_page=values["is_wait_page"] in ("1", "True"),
                ))
            except (KeyError, ValueError):
                continue  # a malformed line is skipped, never fatal for the page
    for rows in result.values():
        rows.sort(key=lambda r: (r["page_index"], r["completed_at"]))
    return result


def experiment(session) -> dict:
    """Per game and round: cooperation (humans, agents), agreements and breaches (WC), messages
    not sent in time, decisions timed out."""
    p = params(session)
    games = {}
    for game in protocol.GAME_ORDERS[p.game_order]:
        module = _game_tables(GAME_APPS[game])
        rounds = range(1, p.rounds_per_game + 1)
        human = {r: [0, 0] for r in rounds}  # cooperations, decisions
        agent = {r: [0, 0] for r in rounds}
        timed_out = {r: 0 for r in rounds}
        unsent = {r: 0 for r in rounds}
        players = [pl for pl in module.Player.objects_filter(session=session) if pl.round_number in human]
        choice_of: dict[tuple, str] = {}
        for pl in players:
            choice = pl.field_maybe_none("choice")
            if not choice:
                continue
            human[pl.round_number][0] += choice == protocol.COOPERATE
            human[pl.round_number][1] += 1
            timed_out[pl.round_number] += bool(pl.field_maybe_none("choice_timed_out"))
            choice_of[(pl.round_number, pl.participant.code)] = choice
        if p.with_agents:
            for turn in module.AgentTurn.objects_filter().join(module.Player).filter(
                    module.Player.session == session):
                if turn.kind != "decision" or turn.choice is None or turn.player.round_number not in agent:
                    continue
                agent[turn.player.round_number][0] += turn.choice == protocol.COOPERATE
                agent[turn.player.round_number][1] += 1
                timed_out[turn.player.round_number] += turn.status == "fallback"
                choice_of[(turn.player.round_number, turn.agent_id + "@" + turn.player.participant.code)] = turn.choice
        agreements = {r: [0, 0, 0] for r in rounds}  # pairs decided, agreements, breaches
        if getattr(module, "Message", None) is not None:
            proposes: dict[tuple, set] = defaultdict(set)  # (round, conversation) -> senders proposing A
            for message in module.Message.objects_filter().join(module.Player).filter(
                    module.Player.session == session):
                r = message.player.round_number
                if r not in unsent:
                    continue
                if not message.sent_in_time:
                    unsent[r] += 1
                    continue
                if PROPOSES_A.search(message.text or ""):
                    proposes[(r, _pair_key(message.sender_code, message.receiver_code))].add(message.sender_code)
            decided_pairs = set()
            for pl in players:
                if pl.field_maybe_none("choice") and pl.field_maybe_none("associate_choice"):
                    decided_pairs.add((pl.round_number, _pair_key(pl.participant.code, pl.associate_code),
                                       pl.choice, pl.associate_choice))
            for r, pair, own, other in decided_pairs:
                agreements[r][0] += 1
                if len(proposes.get((r, pair), ())) == 2:
                    agreements[r][1] += 1
                    agreements[r][2] += protocol.DEFECT in (own, other)
        games[game] = dict(
            rounds=list(rounds),
            human_cooperation=[_rate(*human[r]) for r in rounds],
            agent_cooperation=[_rate(*agent[r]) for r in rounds] if p.with_agents else None,
            decisions=[human[r][1] for r in rounds],
            timed_out=[timed_out[r] for r in rounds],
            unsent_messages=[unsent[r] for r in rounds] if getattr(module, "Message", None) is not None else None,
            agreement_rate=[_rate(agreements[r][1], agreements[r][0]) for r in rounds],
            breach_rate=[_rate(agreements[r][2], agreements[r][1]) for r in rounds],
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

    latencies, statuses, reasons = [], Counter(), Counter()
    calls = 0
    for app in GAME_APPS.values():
        module = _game_tables(app)
        for call in module.LlmCall.objects_filter(session_code=session.code):
            calls += 1
            statuses[call.status or "?"] += 1
            if call.time_done is not None and call.time_sent is not None:
                latencies.append(call.time_done - call.time_sent)
        for turn in module.AgentTurn.objects_filter().join(module.Player).filter(module.Player.session == session):
            if turn.status == "fallback":
                reasons[turn.fallback_reason or "unknown"] += 1
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
        spent=round(agents.session_spent(session), 6),
        budget=limit,
        model_check=model_check_status(session),
    )


def model_check_status(session) -> str:
    """The model check's outcome when one was recorded on the session, else "not run"."""
    for source in (session.vars or {}, session.config or {}):
        value = source.get("model_check") or source.get("model_check_status")
        if value:
            return value if isinstance(value, str) else str(value.get("status", value)) if isinstance(value, dict) else str(value)
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
