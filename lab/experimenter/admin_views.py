"""The experimenter's admin pages: the live session dashboard and its actions on participants
(lab/experimenter/interventions.py), the replay of every pair, and the session's data package (a zip,
lab/record/data_package.py).

How they join oTree's admin (the least invasive way we found in oTree 6.0's source): oTree
builds its admin routes from the view classes *defined in* ``otree.views.admin``
(``urls.url_patterns_from_builtin_module``), and gives each the admin-login requirement of
``OTREE_AUTH_LEVEL`` (STUDY: login for everything not on its short public list; DEMO: the
same for views not on its demo list, which ours are not). Declaring our views with that
module as ``__module__`` lets oTree route them and guard them with its own login, exactly as
its Monitor tab: no patched oTree file, no second web app, no middleware.
lab/otree_patches/admin_views.py registers them when the apps are imported, before oTree builds
its routes.

Participants' and models' text is escaped here (html.escape) before it reaches a page.
"""

from __future__ import annotations

import datetime
import html
import json

from otree.views.cbv import AdminSessionPage
from starlette.responses import Response

from lab.experimenter import dashboard, interventions
from lab.record import replay
from lab.base.page_json import safe_json

DASHBOARD_REFRESH_SECONDS = 3


def _nav(session, current: str) -> str:
    code = html.escape(session.code)
    links = [("LabDashboard", f"/LabDashboard/{code}", "Dashboard"), ("LabReplay", f"/LabReplay/{code}", "Replay")]
    if session.config.get("online"):
        links.append(("LabOnlineBonus", f"/LabOnlineBonus/{code}", "Bonus file (Prolific)"))
    items = "".join(
        f'<a class="btn btn-sm {"btn-primary" if name == current else "btn-outline-primary"} me-1" '
        f'href="{href}">{label}</a>' for name, href, label in links)
    return f'<div class="lab-nav my-2">{items}</div>'


class LabAdminPage(AdminSessionPage):
    template_name = ""

    def get_template_name(self):
        return self.template_name


class LabDashboard(LabAdminPage):
    """Sessions -> a session -> Dashboard: progress, plots of the experiment, agents' health."""

    template_name = "lab/LabDashboard.html"

    def vars_for_template(self):
        return dict(
            lab_nav=_nav(self.session, "LabDashboard"),
            dashboard_json=safe_json(dashboard.session_dashboard(self.session)),
            data_url=f"/LabDashboardData/{self.session.code}",
            actions_url=f"/LabIntervene/{self.session.code}",
            refresh_ms=DASHBOARD_REFRESH_SECONDS * 1000,
        )


class LabDashboardData(LabAdminPage):
    """The dashboard's data as JSON, polled by the page. Without the admin login (an expired
    one, say) it answers 401 in JSON, not oTree's login page, so the page can say so."""

    def inner_dispatch(self, request):
        if self._is_unauthorized():
            return Response(json.dumps(dict(error="logged out", login_url="/login")), status_code=401,
                            media_type="application/json", headers={"Cache-Control": "no-store"})
        return super().inner_dispatch(request)

    def get(self, request, code):
        return Response(safe_json(dashboard.session_dashboard(self.session)), media_type="application/json",
                        headers={"Cache-Control": "no-store"})


def _json_response(data, status_code: int = 200) -> Response:
    return Response(safe_json(data), status_code=status_code, media_type="application/json",
                    headers={"Cache-Control": "no-store"})


class LabIntervene(LabAdminPage):
    """POST /LabIntervene/{code} (action, participant, text, page_index, oTree's csrftoken): one of the
    dashboard's actions (lab/experimenter/interventions.py), answered in JSON. Behind oTree's admin login:
    without it (OTREE_AUTH_LEVEL set, not logged in) a request does nothing and gets a 401."""

    def inner_dispatch(self, request):
        if self._is_unauthorized():
            return _json_response(dict(error="logged out: log in again", login_url="/login"), 401)
        return super().inner_dispatch(request)  # the session, then oTree's CSRF check, then post

    def get(self, request, code):
        return _json_response(dict(error="POST an action"), 405)

    def post(self, request, code):
        form = self.get_post_data()
        try:
            page_index = int(form["page_index"]) if form.get("page_index") else None
        except ValueError:
            return _json_response(dict(error="page_index must be a number"), 400)
        try:
            done = interventions.carry_out(self.session, form.get("action", ""), who=self._who(),
                                           participant_code=form.get("participant", ""), text=form.get("text", ""),
                                           page_index=page_index)
        except interventions.ActionRefused as refused:
            from otree.database import db

            db._db.rollback()  # nothing of a refused action stays, whatever it had begun
            return _json_response(dict(error=str(refused)), refused.status)
        return _json_response(dict(ok=True, intervention=done))

    def _who(self) -> str:
        """The admin user name; "anonymous" only on a server without oTree's admin login."""
        from otree import settings

        return str(getattr(settings, "ADMIN_USERNAME", "") or "admin") if self._is_logged_in() else "anonymous"


class LabReplay(LabAdminPage):
    """/LabReplay/{code}: the index (every participant and agent); ?participant=CODE or
    ?game=WC&agent=agent-3: one timeline."""

    template_name = "lab/LabReplay.html"

    def vars_for_template(self):
        query = self.request.query_params
        session = self.session
        if query.get("participant"):
            timeline = replay.participant_timeline(session, query["participant"])
            body = render_participant(session, timeline) if timeline else _missing("participant", query["participant"])
        elif query.get("agent"):
            timeline = replay.agent_timeline(session, query.get("game", ""), query["agent"])
            body = render_agent(session, timeline) if timeline else _missing("agent", query["agent"])
        else:
            body = render_index(session)
        return dict(lab_nav=_nav(session, "LabReplay"), replay_html=body)


class LabDataPackage(LabAdminPage):
    """/LabDataPackage/{code}: the session's data package as a zip download (the session's
    *Data package* tab). Behind oTree's admin login like every admin page; no REST key needed."""

    def get(self, request, code):
        from lab.record.data_package import session_zip, zip_name

        return Response(session_zip(self.session.code), media_type="application/zip", headers={
            "Content-Disposition": f'attachment; filename="{zip_name(self.session.code)}"',
            "Cache-Control": "no-store"})


class LabOnlineBonus(LabAdminPage):
    """/LabOnlineBonus/{code}: the bonus file for Prolific's bulk bonus (lab/online/bonus.py).

    GET shows the payouts recorded (each downloadable again as recorded, ``?payout=N``) and the
    file a new payout would hand out, recording nothing: a prefetch, a crawler or a reload pays
    nobody. POST (oTree's CSRF token, ``confirm=1``, ``difference=1`` for only what is still owed)
    records the payout and returns its CSV. A refusal is a page saying why (409), nothing
    recorded. Behind oTree's admin login like every admin page."""

    def get(self, request, code):
        from lab.online import bonus

        number = request.query_params.get("payout", "")
        if number:
            recorded = bonus.payouts(self.session.code)
            if not number.isdigit() or not 1 <= int(number) <= len(recorded):
                return _bonus_message("No such payout", f"Session {self.session.code} has no payout {number}.", 404)
            row = recorded[int(number) - 1]
            return _csv_download(row.lines, bonus.file_name(self.session.code, int(number)),
                                 f"Payout {number} as recorded: already paid. {bonus.NOT_IDEMPOTENT_WARNING}")
        from otree.common import CSRF_TOKEN_NAME

        return Response(_bonus_page(self.session, bonus, self.get_context_data()[CSRF_TOKEN_NAME]),
                        media_type="text/html", headers={"Cache-Control": "no-store"})

    def post(self, request, code):
        from otree.database import db

        from lab.online import bonus

        form = self.get_post_data()
        if form.get("confirm") != "1":
            return _bonus_message("Not confirmed", "Nothing was recorded: tick the confirmation to record the payout.",
                                  400)
        try:
            text, note = bonus.bonus_file(self.session, self._who(), difference=form.get("difference") == "1")
        except bonus.BonusRefused as refused:
            db._db.rollback()
            return _bonus_message("Bonus file refused", str(refused), 409)
        return _csv_download(text, bonus.file_name(self.session.code, len(bonus.payouts(self.session.code))), note)

    _who = LabIntervene._who


def _csv_download(text: str, name: str, note: str) -> Response:
    return Response(text, media_type="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{name}"',
        "X-Lab-Bonus-Note": note.encode("ascii", "replace").decode(), "Cache-Control": "no-store"})


def _bonus_message(title: str, text: str, status: int) -> Response:
    return Response(f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{_e(title)}</title></head>'
                    f'<body><h2>{_e(title)}</h2><p id="bonus-refused">{_e(text)}</p>'
                    f'<p><a href="?">Back</a></p></body></html>', status_code=status, media_type="text/html")


def _bonus_page(session, bonus, csrf_input: str) -> str:
    owed, paid = bonus.owed(session), bonus.paid(session.code)
    recorded = bonus.payouts(session.code)
    rows = "".join(f"<tr><td>{number}</td><td>{_clock(row.created_at)}</td><td>{_e(row.who)}</td><td>{_e(row.kind)}</td>"
                   f"<td>{row.total:.2f}</td><td><code>{_e(row.sha256[:12])}</code></td>"
                   f'<td><a href="?payout={number}">download again</a></td></tr>'
                   for number, row in enumerate(recorded, start=1))
    still = {pid: round(amount - paid.get(pid, 0.0), 2) for pid, amount in owed.items()}
    still = {pid: amount for pid, amount in still.items() if amount > 0.005}
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Bonus file {_e(session.code)}</title>'
            f'<link href="/static/bootstrap5/css/bootstrap.min.css" rel="stylesheet"></head><body class="m-4">'
            f'<h2>Prolific bonus file: session {_e(session.code)}</h2>'
            f'<div class="alert alert-danger" id="bonus-warning"><b>{_e(bonus.NOT_IDEMPOTENT_WARNING)}</b></div>'
            f'<p>Owed by the payment table now: {len(owed)} participants, {sum(owed.values()):.2f}; '
            f'still unpaid: {len(still)} participants, {sum(still.values()):.2f}.</p>'
            f'<table class="table w-auto"><tr><th>payout</th><th>made</th><th>by</th><th>kind</th><th>total</th>'
            f'<th>SHA-256</th><th></th></tr>{rows}</table>'
            f'{_next_payout_form(session, bonus, csrf_input, bool(recorded))}</body></html>')


def _next_payout_form(session, bonus, csrf_input: str, any_recorded: bool) -> str:
    """The file a new payout would hand out (nothing recorded), and the confirmed POST that records it."""
    try:
        text, note, new = bonus.next_payout(session)
        difference = False
    except bonus.BonusRefused as refused:
        if not any_recorded:
            return f'<p id="bonus-next">{_e(refused)}</p>'
        try:  # the payment table changed since the last payout: what is still owed
            text, note, new = bonus.next_payout(session, difference=True)
            difference = True
        except bonus.BonusRefused as still_refused:
            return f'<p id="bonus-next">{_e(still_refused)}</p>'
    if not new:
        return f'<p id="bonus-next">{_e(note)}</p>'
    what = "a new payout of what is still owed" if difference else "the payout"
    return (f'<h4>Next payout (not recorded yet)</h4><p>{_e(note)}</p><pre id="bonus-next">{_e(text)}</pre>'
            f'<form method="post" class="my-2">{csrf_input}<input type="hidden" name="difference" '
            f'value="{int(difference)}"><div class="form-check mb-2"><input class="form-check-input" type="checkbox" '
            f'name="confirm" value="1" id="bonus-confirm" required><label class="form-check-label" for="bonus-confirm">'
            f'I will upload this file to Prolific once; record it as paid.</label></div>'
            f'<button class="btn btn-primary" id="bonus-record">Record {what} and download its file</button></form>')


def _missing(kind: str, value: str) -> str:
    return f'<div class="alert alert-warning">No {kind} {html.escape(value)} in this session.</div>'


# --- HTML ------------------------------------------------------------------------------------------
def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _clock(epoch) -> str:
    """Date, time and the server's time zone: "2026-12-01 14:03:07 CET (UTC+0100)"."""
    if epoch is None:
        return ""
    moment = datetime.datetime.fromtimestamp(float(epoch)).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z (UTC%z)")


def _participant_link(session, code: str) -> str:
    return f'<a href="/LabReplay/{_e(session.code)}?participant={_e(code)}">{_e(code)}</a>'


def _agent_link(session, game: str, agent_id: str) -> str:
    return f'<a href="/LabReplay/{_e(session.code)}?game={_e(game)}&amp;agent={_e(agent_id)}">{_e(agent_id)}</a>'


def render_index(session) -> str:
    participants = sorted(session.get_participants(), key=lambda pp: pp.id_in_session)
    rows = "".join(f"<tr><td>{pp.id_in_session}</td><td>{_participant_link(session, pp.code)}</td>"
                   f"<td>{_e(pp.label)}</td></tr>" for pp in participants)
    html_parts = ['<h4>Participants</h4><table class="table table-sm" id="replay-participants">'
                  f'<tr><th>#</th><th>code</th><th>label</th></tr>{rows}</table>']
    agent_rows = "".join(f"<tr><td>{_e(game)}</td><td>{_agent_link(session, game, agent_id)}</td><td>{_e(persona)}</td></tr>"
                         for game, agent_id, persona in replay.agent_ids(session))
    if agent_rows:
        html_parts.append('<h4>Agents</h4><table class="table table-sm" id="replay-agents">'
                          f'<tr><th>game</th><th>agent</th><th>persona</th></tr>{agent_rows}</table>')
    return "".join(html_parts)


def _messages_html(messages: list[dict], own: str) -> str:
    lines = []
    for m in messages:  # in the order they were sent (replay._round)
        if m["sent_in_time"]:
            text = f'<span class="lab-text">{_e(m["text"])}</span>'
            when = f"sent {_clock(m['sent_at'])}"
        else:
            text = '<span class="badge bg-warning text-dark">not sent in time</span>'
            if m["unsent_draft"]:
                text += f' <span class="text-muted">unsent draft: <span class="lab-text">{_e(m["unsent_draft"])}</span></span>'
            when = f"taken at the limit {_clock(m['late_at'])}" if m["late_at"] else "not sent"
        lines.append(f'<div class="lab-message{" lab-own" if m["sender"] == own else ""}" data-at="{_e(m["at"])}">'
                     f'message {m["stage"]} · <b>{_e(m["sender"])}</b> → {_e(m["receiver"])} '
                     f'<small class="text-muted lab-when">{when}</small>: {text}</div>')
    return "".join(lines)


def _calls_html(calls: list[dict]) -> str:
    if not calls:
        return ""
    items = []
    for c in calls:
        prompt = c["prompt"]
        if isinstance(prompt, list):
            prompt_text = "\n\n".join(f"[{m.get('role', '')}]\n{m.get('content', '')}" if isinstance(m, dict) else str(m)
                                      for m in prompt)
        else:
            prompt_text = str(prompt)
        latency = "" if c["latency"] is None else f'{c["latency"]:.2f} s'
        items.append(
            f'<details class="lab-call"><summary>{_e(c["turn"])} · attempt {_e(c["attempt"])} · '
            f'<b>{_e(c["status"])}</b> · {latency} · tokens {_e(c["tokens"])} · {_e(c["model"])}</summary>'
            f'<div class="small">prompt version {_e(c["prompt_version"])}; sent {_clock(c["time_sent"])}'
            f'{"; error: " + _e(c["error"]) if c["error"] else ""}</div>'
            f'<div><b>prompt</b><pre class="lab-pre">{_e(prompt_text)}</pre></div>'
            f'<div><b>raw reply</b><pre class="lab-pre">{_e(c["raw_reply"])}</pre></div>'
            f'<div><b>parsed</b><pre class="lab-pre">{_e(c["parsed"])}</pre></div></details>')
    return f'<div class="lab-calls"><b>model calls ({len(calls)})</b>{"".join(items)}</div>'


RANDOM_CHOICE = ' <span class="badge bg-warning text-dark lab-random">timed out: random</span>'


def _round_html(session, r: dict, own: str, side: str) -> str:
    if r["associate_kind"] == "agent":
        associate = f'{_agent_link(session, r["game"], r["associate"])} (agent, {_e(r["persona"])})'
    else:
        associate = f'{_participant_link(session, r["associate"])} (human)'
    if side == "agent":
        header = f'round {r["round"]} · human {_participant_link(session, r["human"])}'
    else:
        header = f'round {r["round"]} · associate {associate}'
    fallbacks = [t for t in r["turns"] if t["status"] == "fallback"]
    own_random = RANDOM_CHOICE if r["timed_out"] else ""
    associate_random = RANDOM_CHOICE.replace("lab-random", "lab-random lab-associate-random") \
        if r["associate_timed_out"] else ""
    if side == "agent":
        decision = (f'agent chose <b>{_e(r["associate_choice"])}</b>{associate_random} '
                    f'({_e(r["associate_payoff"])} points) · human chose <b>{_e(r["choice"])}</b>{own_random}'
                    f' at {_clock(r["decided_at"])}')
    else:
        decision = (f'chose <b>{_e(r["choice"])}</b>{own_random}'
                    f' at {_clock(r["decided_at"])} · associate chose <b>{_e(r["associate_choice"])}</b>'
                    f'{associate_random} · payoffs {_e(r["payoff"])} / {_e(r["associate_payoff"])}')
    turn_notes = "".join(f'<div class="text-danger small">agent {_e(t["kind"])}: fallback ({_e(t["fallback_reason"])})</div>'
                         for t in fallbacks)
    own_code = own if side != "agent" else r["human"]
    return (f'<div class="card mb-2 lab-round" data-game="{_e(r["game"])}" data-round="{r["round"]}">'
            f'<div class="card-header">{header}</div><div class="card-body py-2">'
            f'{_messages_html(r["messages"], own_code)}<div>{decision}</div>{turn_notes}'
            f'{_calls_html(r["calls"])}</div></div>')


def render_participant(session, t: dict) -> str:
    pages = "".join(
        f'<tr><td>{_clock(p["completed_at"])}</td><td>{_e(p["app_name"])}</td><td>{p["round_number"]}</td>'
        f'<td>{_e(p["page_name"])}</td><td>{"" if p["seconds"] is None else p["seconds"]}</td>'
        f'<td>{"timeout" if p["timeout_happened"] else ""}</td></tr>' for p in t["pages"])
    parts = [f'<h4>Participant {_e(t["code"])} <small class="text-muted">#{t["id_in_session"]} {_e(t["label"])}</small></h4>']
    for game in t["games"]:
        parts.append(f'<h5>Game {_e(game["game"])}</h5>')
        parts += [_round_html(session, r, t["code"], "participant") for r in game["rounds"]]
    parts.append('<details id="replay-pages"><summary><b>Pages</b> (completion times from oTree\'s page-time records; '
                 f'{len(t["pages"])} pages)</summary><table class="table table-sm"><tr><th>completed</th><th>app</th>'
                 f'<th>round</th><th>page</th><th>seconds</th><th></th></tr>{pages}</table></details>')
    return "".join(parts)


def render_agent(session, t: dict) -> str:
    parts = [f'<h4>Agent {_e(t["agent_id"])} <small class="text-muted">game {_e(t["game"])} · persona {_e(t["persona"])}</small></h4>']
    parts += [_round_html(session, r, t["agent_id"], "agent") for r in t["rounds"]]
    return "".join(parts)


def model_check_banner(session) -> str:
    """The session pages' line on an agent session's model (``{{ session|lab_model_check }}`` in
    _templates/otree/Session.html, above every tab, the page a created session opens on
    included): a warning when the server serves the session's agents narrowly, the capacity and
    whether the grammar is on. A filter, registered in oTree's filter table, because the admin
    pages' context is oTree's own; empty for a session without a model check."""
    details = dashboard.model_check_details(session)
    if not (details["capacity"] or details["grammar"]):
        return ""
    warning = details["capacity_verdict"] not in (None, "fits")
    lines = [f'<b>Agents\' model:</b> {html.escape(details["capacity"] or "capacity not measured")}',
             f'grammar: {html.escape(details["grammar"] or "not recorded")}']
    return (f'<div class="alert {"alert-warning" if warning else "alert-light"} small py-2" id="lab-model-check">'
            + "<br>".join(lines) + "</div>")


# The views oTree's admin serves (lab/otree_patches/admin_views.py registers them).
ADMIN_VIEWS = (LabDashboard, LabDashboardData, LabIntervene, LabReplay, LabDataPackage, LabOnlineBonus)
