"""The live session dashboard's data: progress, the experiment so far, the agents' health.

One function, ``session_dashboard(session)``, returns a JSON-ready dictionary; the admin page
(lab/experimenter/admin_views.py) renders it and the browser polls it every few seconds and draws the
plots itself (uPlot, served from _static/vendor). It reads each table once per request
(participants, the quiz's, each game's and the payment's players, messages, agent turns, model
calls) and aggregates in Python, so its cost grows with the rows of one session only
(bench/dashboard.py: 72 participants x 10 rounds).

Every rate comes with its counts and a 95 % Wilson interval. A pair-round counts once, whether
its two sides are two humans or a human and an agent. Agreement and breach are a *live proxy*,
not the paper's measure (SI Note 2: two annotators and a resolver, analysis/annotation.py,
after the session): a pair-round is an "agreement" when each side's latest message sent in time
that names a choice proposes the session's cooperative choice (the paper's A; lab/experimenter/proposals.py
reads the messages); a "breach" is an agreement after which at least one side chose otherwise. A game
that names no cooperative choice has no cooperation rate, agreement or breach.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict

from agents.types import CallStatus, TurnStatus
from intervals import wilson_interval
from lab.base import app_registry
from lab.experimenter import interventions
from lab.server import pause
from lab.base.online_settings import is_online
from lab.online.exit import on_last_page
from lab.record.page_times import page_times
from lab.experimenter.proposals import proposed_choice, session_reading
from lab.base.session_game import pays_norm_bonus, session_game
from lab.base.session_settings import params

# Past the longest stage limit plus this margin, a participant on a page counts as idle.
IDLE_MARGIN_SECONDS = 15
ROUND_START_PAGE = "RoundStart"
# Stuck in the quiz: on its page, not passed, after this many failed attempts (each shows the
# rules again, the wrong answers marked) or this long on it (the page holds the whole payoff
# table and five questions: a few minutes to read and answer).
QUIZ_APP, QUIZ_PAGE = "instructions", "Quiz"
PAYMENT_APP = "payment"
QUIZ_STUCK_FAILED_ATTEMPTS = 3
QUIZ_STUCK_SECONDS = 300
ANSWERED = CallStatus.OK.value  # a model call whose reply came back and was read
FALLBACK = TurnStatus.FALLBACK.value


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


def progress(session, now: float, participants: list | None = None, pauses: list | None = None) -> dict:
    """Who is where (oTree's participant records), who is idle, whose tab is closed, who is stuck
    in the quiz. Time on a page leaves out the session's pauses (``pauses``: (paused at, resumed
    at or None), lab/experimenter/interventions.py), as the pages' deadlines do."""
    p = params(session)
    online = is_online(session)
    pauses = pauses or []
    participants = sorted(participants or session.get_participants(), key=lambda pp: pp.id_in_session)
    quiz = quiz_attempts(session)
    idle_after = max(p.stage_limits.values()) + IDLE_MARGIN_SECONDS
    stages: Counter = Counter()
    rows = []
    for pp in participants:
        app = pp._current_app_name or ""
        page = pp._current_page_name or ""
        finished = on_last_page(pp, online)
        stage = "not started" if not pp.visited else "finished" if finished else f"{app} r{pp._round_number} {page}"
        stages[stage] += 1
        since = pp._last_page_timestamp
        paused = pause.paused_seconds(pauses, since, now) if since is not None else 0
        on_page = None if since is None or not pp.visited else max(0, now - since - paused)
        tab = ""
        if pp.is_on_wait_page:  # oTree tracks a wait page's websocket: closed tab / hidden tab
            tab = "open" if pp._waitpage_is_connected and not pp._waitpage_tab_hidden else (
                "hidden" if pp._waitpage_is_connected else "closed")
        failed, passed = quiz.get(pp.id, (0, False))
        on_quiz = app == QUIZ_APP and page == QUIZ_PAGE and not passed and not finished
        rows.append(dict(
            id=pp.id_in_session, code=pp.code, label=pp.label or "", app=app, round=pp._round_number,
            page=page, page_index=pp._index_in_pages, seconds_on_page=None if on_page is None else round(on_page),
            idle=bool(on_page is not None and not finished and not pp.is_on_wait_page and on_page > idle_after),
            on_wait_page=bool(pp.is_on_wait_page), tab=tab, finished=finished, quiz_failed=failed,
            stuck_in_quiz=on_quiz and (failed >= QUIZ_STUCK_FAILED_ATTEMPTS or (on_page or 0) >= QUIZ_STUCK_SECONDS),
        ))
    holding = _round_start_hold(rows, now, participants)
    return dict(
        stages=[dict(stage=stage, participants=count) for stage, count in sorted(stages.items())],
        participants=rows,
        idle=[r["code"] for r in rows if r["idle"]],
        closed_tabs=[r["code"] for r in rows if r["tab"] == "closed"],
        stuck_in_quiz=[r["code"] for r in rows if r["stuck_in_quiz"]],
        quiz_stuck_failed_attempts=QUIZ_STUCK_FAILED_ATTEMPTS,
        quiz_stuck_seconds=QUIZ_STUCK_SECONDS,
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


def _columns(Player, session, Model, *columns):
    """Only the named columns of an app's rows of this session (no ORM objects: the dashboard is
    polled every few seconds under oTree's global lock, so it reads what it shows, nothing more).
    ``Model`` is the app's ``Player`` or a table linked to it; Player.round_number comes first."""
    from otree.database import dbq

    query = dbq(Model)
    if Model is not Player:
        query = query.join(Player, Model.player_id == Player.id)
    return query.filter(Player.session_id == session.id).with_entities(Player.round_number, *columns).all()


def rate_series(counts: dict, reached: set) -> dict:
    """Per round: successes, trials, the rate and its 95 % Wilson interval (None: no trials)."""
    rounds = sorted(counts)
    intervals = [wilson_interval(*counts[r]) if counts[r][1] else None for r in rounds]
    return dict(
        successes=[counts[r][0] if r in reached else None for r in rounds],
        trials=[counts[r][1] if r in reached else None for r in rounds],
        rate=[_rate(*counts[r]) for r in rounds],
        low=[None if i is None else round(i[0], 4) for i in intervals],
        high=[None if i is None else round(i[1], 4) for i in intervals],
    )


def count_series(counts: dict, reached: set) -> dict:
    """Per round: how many (count) of how many there were (of); a round not reached is a gap."""
    rounds = sorted(counts)
    return dict(count=[counts[r][0] if r in reached else None for r in rounds],
                of=[counts[r][1] if r in reached else None for r in rounds])


def experiment(session, codes: dict | None = None) -> dict:
    """Per game and round: cooperation (humans, agents), agreements and breaches (WC), humans'
    late messages and decisions, agents' fallbacks by reason; and each participant's points. A game
    that names no cooperative choice has no cooperation, agreement or breach series (None)."""
    p = params(session)
    game_played = session_game(session)
    cooperative = game_played.cooperative_choice
    codes = codes if codes is not None else {pp.id: pp.code for pp in session.get_participants()}
    games = {}
    points: Counter = Counter()
    for game in p.games:
        tables = app_registry.game_tables(game)
        Player = tables.Player
        rounds = range(1, p.rounds_per_game + 1)
        human = {r: [0, 0] for r in rounds}  # cooperations, decisions
        agent = {r: [0, 0] for r in rounds}
        timed_out = {r: [0, 0] for r in rounds}  # humans' random choices, humans' decisions
        unsent = {r: [0, 0] for r in rounds}  # humans' messages not sent in time, humans' messages
        choices_by_pair: dict[tuple, dict] = defaultdict(dict)  # (round, pair) -> {side: choice}
        for r, choice, choice_timed_out, participant_id, associate_code, associate_choice, payoff, seat_left in _columns(
                Player, session, Player, Player.choice, Player.choice_timed_out, Player.participant_id,
                Player.associate_code, Player.associate_choice, _payoff_text(Player), Player.after_drop):
            if r not in human or not choice:
                continue
            if not seat_left:  # a dropped participant's seat after the drop is no human's choice (lab/shared_pages/game.py)
                human[r][0] += choice == cooperative
                human[r][1] += 1
                timed_out[r][0] += bool(choice_timed_out)
                timed_out[r][1] += 1
            points[participant_id] += float(payoff or 0)
            if associate_choice:  # the pair-round is settled; an H-H pair is seen from both sides
                own = codes.get(participant_id)
                choices_by_pair[(r, _pair_key(own, associate_code))].update({own: choice, associate_code: associate_choice})
        fallbacks: dict[str, dict] = defaultdict(lambda: {r: [0, 0] for r in rounds})
        agent_turns = {r: 0 for r in rounds}
        if p.with_agents:
            from lab import agent_runtime

            Turn = tables.AgentTurn
            for r, kind, status, choice, reason in _columns(Player, session, Turn, Turn.kind, Turn.status,
                                                            Turn.choice, Turn.fallback_reason):
                if r not in agent or status == agent_runtime.RUNNING:
                    continue
                agent_turns[r] += 1
                if status == FALLBACK:
                    fallbacks[reason or "unknown"][r][0] += 1
                if kind == "decision" and choice is not None:
                    agent[r][0] += choice == cooperative
                    agent[r][1] += 1
        agreements = {r: [0, 0] for r in rounds}  # agreements, pair-rounds decided
        breaches = {r: [0, 0] for r in rounds}  # breaches, agreements
        if tables.with_chat:
            latest = _latest_proposals(tables, session, unsent)
            for (r, pair), choices in choices_by_pair.items():
                agreements[r][1] += 1
                proposals = latest.get((r, pair), {})
                if len(choices) == 2 and set(proposals) == set(choices) and set(proposals.values()) == {cooperative}:
                    agreements[r][0] += 1
                    breaches[r][1] += 1
                    breaches[r][0] += any(choice != cooperative for choice in choices.values())
        # A round nobody has reached yet has no counts (a gap in the plots, not a zero).
        reached = {r for r in rounds if human[r][1] or agent[r][1] or unsent[r][1] or agent_turns[r]}
        for counts in fallbacks.values():
            for r in rounds:
                counts[r][1] = agent_turns[r]
        counts_cooperation = cooperative is not None
        games[game] = dict(
            rounds=list(rounds),
            decisions=[human[r][1] for r in rounds],
            cooperative_choice=cooperative,
            other_choices=[choice for choice in game_played.choices if choice != cooperative],
            human_cooperation=rate_series(human, reached) if counts_cooperation else None,
            agent_cooperation=rate_series(agent, reached) if p.with_agents and counts_cooperation else None,
            agreement=rate_series(agreements, reached) if tables.with_chat and counts_cooperation else None,
            breach=rate_series(breaches, reached) if tables.with_chat and counts_cooperation else None,
            agreements_total=sum(a[0] for a in agreements.values()),
            breaches_total=sum(b[0] for b in breaches.values()),
            pairs_total=sum(a[1] for a in agreements.values()),
            humans_timed_out=count_series(timed_out, reached),
            humans_unsent_messages=count_series(unsent, reached) if tables.with_chat else None,
            agent_fallbacks={reason: count_series(counts, reached) for reason, counts in sorted(fallbacks.items())}
            if p.with_agents else None,
        )
    return dict(games=games, points=points)


def _payoff_text(Player):
    """A player's payoff column as its stored text: oTree's Currency type makes a Decimal and a
    Currency of each row (a third of the query's time here), the sum needs a number only."""
    from sqlalchemy import Text, type_coerce

    return type_coerce(Player._payoff, Text)


def _pair_key(a: str, b: str) -> str:
    return "|".join(sorted([a or "", b or ""]))


def _latest_proposals(tables, session, unsent: dict) -> dict:
    """(round, pair) -> {sender: the choice proposed by the sender's latest message sent in time
    that names one} (lab/experimenter/proposals.py); counts humans' messages not sent in time into ``unsent``."""
    Message = tables.Message
    latest: dict[tuple, dict] = defaultdict(dict)
    rows = _columns(tables.Player, session, Message, Message.stage, Message.sent_in_time, Message.text,
                    Message.sender_code, Message.sender_kind, Message.receiver_code)
    reading = session_reading(session)  # the session's choices, as its chat names them
    for r, stage, sent_in_time, text, sender, sender_kind, receiver in sorted(rows, key=lambda row: (row[0], row[1])):
        if r not in unsent:
            continue
        if sender_kind == "human":
            unsent[r][0] += not sent_in_time
            unsent[r][1] += 1
        choice = proposed_choice(text, reading) if sent_in_time else None
        if choice:
            latest[(r, _pair_key(sender, receiver))][sender] = choice
    return latest


def quiz_attempts(session) -> dict[int, tuple[int, bool]]:
    """participant id -> (failed quiz attempts, passed) from the instructions app's rows."""
    Player = app_registry.player_model(QUIZ_APP)
    found = {}
    for _, participant_id, attempts, passed_at in _columns(
            Player, session, Player, Player.participant_id, Player.quiz_attempts,
            Player.quiz_passed_at):
        passed = passed_at is not None
        found[participant_id] = (int(attempts or 0) - passed, passed)
    return found


def earnings(session, points: Counter, participants: list) -> dict:
    """Points and money so far per participant who opened their link (mean, min, max), and what
    the session costs: show-up fees + points so far x rate, plus at most one norm bonus per game
    and participant; the payouts the payment page has settled, once it has."""
    p = params(session)
    present = [pp for pp in participants if pp.visited]
    own_points = [points.get(pp.id, 0) for pp in present]
    money = [p.participation_fee + x * p.currency_per_point for x in own_points]
    so_far = len(present) * p.participation_fee + sum(own_points) * p.currency_per_point
    paid_estimates = len(p.games) if pays_norm_bonus(session, p.norm_bonus) else 0
    bonuses = len(present) * paid_estimates * p.norm_bonus
    Payment = app_registry.player_model(PAYMENT_APP)
    settled = [payout for _, payout in _columns(Payment, session, Payment, Payment.payout)
               if payout is not None]

    def spread(values, digits):
        return (dict(mean=round(statistics.fmean(values), digits), min=round(min(values), digits),
                     max=round(max(values), digits)) if values else None)

    return dict(
        participants=len(present), currency=p.currency, participation_fee=p.participation_fee,
        currency_per_point=p.currency_per_point, norm_bonus=p.norm_bonus, norm_estimates=paid_estimates,
        points=spread(own_points, 1), money=spread(money, 2), points_total=round(sum(own_points), 2),
        payout_so_far=round(so_far, 2), norm_bonuses_at_most=round(bonuses, 2),
        payout_at_most=round(so_far + bonuses, 2),
        settled_participants=len(settled), settled_payout=round(sum(settled), 2) if settled else None,
    )


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
    for tables in app_registry.all_game_tables().values():
        Call, Turn = tables.LlmCall, tables.AgentTurn
        for status, sent, done, cost in dbq(Call).filter(Call.session_code == session.code).with_entities(
                Call.status, Call.time_sent, Call.time_done, Call.cost):
            calls += 1
            statuses[status or "?"] += 1
            spent += cost or 0.0
            # Latency of answered calls only: a failure's duration (a timeout at the stage limit, a
            # refused connection at once) says nothing about how fast the model answers.
            if status == ANSWERED and done is not None and sent is not None:
                latencies.append(done - sent)
        for _, status, reason in _columns(tables.Player, session, Turn, Turn.status, Turn.fallback_reason):
            if status == FALLBACK:
                reasons[reason or "unknown"] += 1
    limit = agents.budget_limit(session)
    config = agents.model_config(session)
    from agents.models import serving_problem

    return dict(
        model=f"{config.provider} / {config.model}",
        # The session's model as frozen at its creation, which this server may be unable to call.
        model_problem=serving_problem(config),
        calls=calls,
        calls_by_status=dict(statuses),
        answered_calls=statuses[ANSWERED],
        failed_calls=calls - statuses[ANSWERED],
        latency_n=len(latencies),
        latency_p50=percentile(latencies, 0.5),
        latency_p95=percentile(latencies, 0.95),
        fallbacks_by_reason=dict(reasons),
        spent=round(spent, 6),
        budget=limit,
        **{f"model_{key}": value for key, value in model_check_details(session).items()},
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


def model_check_details(session) -> dict:
    """What the pages show of the model check: its status, whether the grammar is on and why, the
    server's capacity for the session (its verdict and sentence, agents/capacity.py), a warning."""
    check = (session.vars or {}).get("model_check")
    check = check if isinstance(check, dict) else {}
    capacity = check.get("capacity") or {}
    return dict(check=model_check_status(session), grammar=check.get("grammar"), capacity=capacity.get("summary"),
                capacity_verdict=capacity.get("verdict"), warning=check.get("warning"))


RECENT_INTERVENTIONS = 20


def control(session, record: list[dict]) -> dict:
    """The experimenter's actions: whether the session is paused, since when, the latest actions."""
    paused_at = pause.paused_since(session.code)
    online = bool(session.config.get("online")) and interventions.dropouts_available()
    found = dict(paused=paused_at is not None, paused_at=paused_at, mark_dropped_available=online,
                 interventions=record[-RECENT_INTERVENTIONS:][::-1], interventions_total=len(record))
    if online:
        from lab.online.stand_in import summary  # dropped participants, stand-in pair-rounds

        found["online"] = summary(session)
    return found


def session_dashboard(session) -> dict:
    now = time.time()
    p = params(session)
    participants = list(session.get_participants())
    so_far = experiment(session, {pp.id: pp.code for pp in participants})
    record = interventions.session_interventions(session.code)
    return dict(
        session_code=session.code,
        treatment=p.treatment,
        associate_type=p.associate_type,  # human or the persona of the session's experiment
        label_setting=p.label_setting,
        game_order=p.game_order,
        rounds_per_game=p.rounds_per_game,
        generated_at=now,
        progress=progress(session, now, participants, interventions.pauses(record)),
        control=control(session, record),
        round_start_waits=round_start_waits(session),
        games=so_far["games"],
        earnings=earnings(session, so_far["points"], participants),
        agents=agents_health(session),
    )
