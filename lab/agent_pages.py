"""The pages, exports and admin report that put agents into a game app.

``wait_page`` builds a game's wait for the associate (``WaitMessage1``, ``WaitMessage2``,
``WaitDecision``): one oTree WaitPage for either kind of associate, so that nothing a
participant sees (address, title, look, when it appears) tells an agent from a human
(label-uninformed sessions stay blind).

- Associate is a human: oTree's WaitPage, as is (the pair's group).
- Associate is an agent (a group of one): the turn is *settled on the way*: the page is not
  displayed when the agent's answer is already in (``is_displayed`` settles it during the
  request that submits the page before, as oTree's WaitPage redirects at once when everyone
  has arrived). While the turn runs, the participant waits on the same wait page, which
  listens on oTree's wait-page websocket; the agent engine pushes 'ready' to it when the turn
  ends, and the page's reload settles the turn under oTree's lock. At the turn's deadline (+
  grace) the page reloads by itself and oTree's timeout worker visits it for a closed tab; the
  turn is then settled by the fallback.

Every write happens in a page request under oTree's global lock, never in a websocket handler:
oTree runs ``async`` live methods outside that lock on the one database connection every
request shares, and their commits raced the page requests' (measured with 36 participants:
"cannot commit - no transaction is active", then a round's payoffs lost in the partial commit).
"""

from __future__ import annotations

import re
import time

import otree.common
import otree.tasks
from otree.api import WaitPage
from otree.channels import utils as channel_utils
from otree.models_concrete import CompletedGroupWaitPage

import protocol
from agents.types import TurnKind, TurnStatus
from lab import agent_runtime as agents
from lab import app_registry
from lab import data_dictionary as dd
from lab import game as lab_game
from lab import model_probe, pause
from lab.dashboard import model_check_details
from lab.pages import texts_for
from lab.session_settings import params, params_of

# An agent must never say it is a machine (SI Note 5); these betray it in either language.
AI_REVEAL = re.compile(
    r"\b(AI|A\.I\.|artificial intelligence|language model|LLM|chatbot|assistant|GPT|bot)\b"
    r"|人工智能|语言模型|聊天机器人|机器人|我是AI|作为AI|助手",
    re.IGNORECASE,
)
WORD = re.compile(r"[A-Za-z0-9'’-]+|[\u3400-\u9fff]{1,2}")  # Chinese: two characters ~ one word


def word_count(text: str) -> int:
    return len(WORD.findall(text or ""))


def message_warnings(text: str | None) -> list[str]:
    if not text:
        return []
    warnings = []
    if AI_REVEAL.search(text):
        warnings.append("reveals it is an AI")
    if word_count(text) > protocol.AGENT_MESSAGE_MAX_WORDS:
        warnings.append(f"over {protocol.AGENT_MESSAGE_MAX_WORDS} words ({word_count(text)})")
    return warnings


# --- The wait page -------------------------------------------------------------------------------
def wait_page(tables: agents.GameTables, kind: str, *, then, name: str, after_humans=None):
    """The wait for the associate's ``kind`` stage (a message or the decision). For an agent,
    once its turn is settled, ``then`` starts its next turn (a turn kind) or is called (a
    function of the player); for a human pair, ``after_humans(group)`` runs when both are in."""

    def settle_agent(player) -> None:
        agents.settle_or_fallback(player, tables, kind)
        if callable(then):
            then(player)
        else:
            agents.ensure_turn(player, tables, then)

    class AssociateWait(lab_game.TranslatedWait, WaitPage):
        template_name = "lab/Wait.html"

        @staticmethod
        def is_displayed(player):
            if not lab_game.is_played(player):
                return False
            if player.associate_kind != "agent":
                return True
            if agents.settle_if_finished(player, tables, kind):
                settle_agent(player)  # settled on the way: the page is skipped
                return False
            return True

        def _is_displayed(self):
            displayed = super()._is_displayed()
            if not displayed and self.player.field_maybe_none("associate_kind") == "agent":
                # Skipped on the way, in a group of one: oTree would commit mid-request (every
                # row read so far is then read again) to count who else is still to come, which
                # is nobody. Its arrival-time branch of that loop goes straight on instead; only
                # this instance, made for the skip, is changed.
                self.group_by_arrival_time = True
            return displayed

        @staticmethod
        def after_all_players_arrive(group):
            # A group of one against an agent, or an online pair whose dropped seat a stand-in
            # plays (lab/online/stand_in.py): only the partner's turn is settled.
            against_agents = [player for player in group.get_players() if player.associate_kind == "agent"]
            if against_agents:
                for player in against_agents:
                    settle_agent(player)
            elif after_humans is not None:
                after_humans(group)

        def inner_dispatch_group(self):
            player = self.player
            if not lab_game.is_played(player) or player.associate_kind != "agent":
                return super().inner_dispatch_group()
            if CompletedGroupWaitPage.objects_exists(page_index=self._index_in_pages, group_id=player.group_id,
                                                     session_id=self._session_pk):
                return self._response_when_ready()
            if pause.paused_since(self.participant._session_code) is not None:
                # Nothing is settled while the session is paused: a turn its old deadline cut off
                # during the pause is redone on resume (lab/agent_runtime/pausing.py).
                return self._get_wait_page()
            if agents.is_running(player, tables, kind) and not agents.wait_is_over(player, tables, kind):
                wait_ends = agents.turn_deadline(player, tables, kind) + agents.SETTLE_GRACE_SECONDS
                if self.participant._is_bot:
                    agents.wait_for_turn(player, tables, kind, timeout=wait_ends - time.time())
                else:
                    channel = channel_utils.group_wait_page_name(self._session_pk, self._index_in_pages,
                                                                 player.group_id)
                    agents.NOTIFIER.watch(player, tables, kind, channel, until=wait_ends)
                    if agents.is_running(player, tables, kind):  # the answer may have come in meanwhile
                        self._visit_if_tab_closed(wait_ends)
                        return self._get_wait_page()
            self._run_aapa_and_notify(self.group)
            return self._response_when_ready()

        def _visit_if_tab_closed(self, wait_ends: float) -> None:
            """oTree's timeout worker loads the page after the wait (as it does after an H-H
            wait page): a closed tab still moves on, the turn settled by its fallback."""
            if otree.common.USE_TIMEOUT_WORKER and not self.participant.is_browser_bot:
                otree.tasks.ensure_pages_visited(participant_pks=[self.participant.id], page_index=self._index_in_pages,
                                                 delay=max(1, round(wait_ends - time.time()) + 1))

        def get_context_data(self):
            context = super().get_context_data()
            deadline = self._associate_deadline()
            context.update(
                show_time_left=deadline is not None,
                seconds_left=max(0, int(deadline - time.time())) if deadline is not None else 0,
                time_left_label=texts_for(self.player)["common_waiting_time_left"],
            )
            return context

        def _associate_deadline(self):
            """When the associate's stage ends: the agent's turn deadline, or the human's page
            limit as oTree's timer has it (this page follows the stage's page)."""
            player = self.player
            if player.associate_kind == "agent":
                return agents.turn_deadline(player, tables, kind)
            other = lab_game.human_associate(player).participant
            stage_page = self._index_in_pages - 1
            limit = params_of(player).stage_limits[agents.TURN_STAGE[kind]]
            expires = other._timeout_expiration_time if other._timeout_page_index == other._index_in_pages else None
            if expires is None:
                return time.time() + limit if other._index_in_pages <= stage_page else None
            return expires if other._index_in_pages >= stage_page else expires + limit

    AssociateWait.__name__ = AssociateWait.__qualname__ = name
    AssociateWait.__module__ = tables.AgentSeat.__module__  # oTree finds a page's app by its module
    return AssociateWait


# --- Exports -----------------------------------------------------------------------------------
def decision_rows(player, tables: agents.GameTables):
    """The human's decision row, and the agent's when the associate was one (docs/DATA.md); the
    points are those stored with the human's row, never recomputed from today's protocol.py."""
    if not player.field_maybe_none("choice"):
        return
    yield lab_game.decision_row(player, tables.game)
    if player.associate_kind != "agent":
        return
    turn = agents.find_turn(player, tables, TurnKind.DECISION.value)
    if turn is None or getattr(turn, "choice") is None:
        return
    p = params(player.session)
    # The points stored when the round was settled (the human's row holds both sides'); empty, as
    # on the human's row, in an export taken before.
    settled = player.field_maybe_none("associate_choice") is not None
    agent_points, human_points = (player.associate_payoff, int(player.payoff)) if settled else (None, None)
    rule = lab_game.dropout_rule(player)
    stand_in = rule == "stand_in"  # an online stand-in playing a dropped participant's seat
    yield [
        *lab_game.session_keys(player.session), tables.game, p.game_index(tables.game), player.round_number,
        turn.agent_id, "agent", stand_in_persona(player.session) if stand_in else p.associate_type,
        player.participant.code, "human",
        lab_game.conversation_id(player, tables.game), turn.choice,
        lab_game.csv_bool(turn.status == TurnStatus.FALLBACK.value), player.choice, agent_points, human_points,
        turn.finished_at, lab_game.csv_bool(stand_in), "False", rule, lab_game.csv_bool(stand_in),
    ]


def stand_in_persona(session) -> str:
    """The persona column of a stand-in's rows (``imitate`` plays the fair persona)."""
    chosen = str(session.config.get("stand_in_persona") or "fair")
    return "fair" if chosen == "imitate" else chosen


LLM_CALL_COLUMNS = list(dd.LLM_CALLS)  # the session's keys, game, participant_code, then a call's fields


def llm_call_rows(players):
    """One row per model call of the sessions of ``players`` (docs/DATA.md 'llm_calls')."""
    from otree.database import db
    from otree.models import Participant

    yield LLM_CALL_COLUMNS
    sessions = {player.session.code: player.session for player in players}
    for code, session in sessions.items():
        for game, tables in app_registry.all_game_tables().items():
            # Each call's participant in one query, not through ``call.player.participant`` (two each).
            participant_codes = dict(db.query(tables.Player.id, Participant.code).join(
                Participant, tables.Player.participant_id == Participant.id).filter(
                tables.Player.session_id == session.id))
            for call in tables.LlmCall.objects_filter(session_code=code).order_by("id"):
                values = [getattr(call, column) for column in LLM_CALL_COLUMNS[8:]]
                values[-1] = lab_game.csv_bool(values[-1])
                yield [*lab_game.session_keys(session), game, participant_codes[call.player_id], *values]


# --- The experimenter's view -----------------------------------------------------------------
# The agents page warns when more than this share of the session's last turns fell back.
FALLBACK_WARNING_SHARE = 0.2
FALLBACK_WARNING_TURNS = 20


def admin_report(subsession, tables: agents.GameTables) -> dict:
    """Per agent: what it is doing, its latest message, its calls; the session's spending; the
    share of recent fallbacks; the "Test model" button and its last results."""
    session = subsession.session
    p = params(session)
    if not p.with_agents:
        return dict(with_agents=False)
    first_round = subsession.in_round(1)
    seats = sorted(tables.AgentSeat.filter(subsession=first_round), key=lambda s: s.seat)
    rounds = subsession.in_rounds(1, p.rounds_per_game)
    players = [player for round_subsession in rounds for player in round_subsession.get_players()]
    turns_by_agent: dict[str, list] = {}
    calls_by_agent: dict[str, list] = {}
    for player in players:
        for turn in tables.AgentTurn.filter(player=player):
            turns_by_agent.setdefault(turn.agent_id, []).append(turn)
        for call in tables.LlmCall.filter(player=player):
            calls_by_agent.setdefault(call.agent_id, []).append(call)
    agents_rows = []
    now = time.time()
    for seat in seats:
        turns = sorted(turns_by_agent.get(seat.agent_id, []), key=lambda t: t.started_at)
        calls = sorted(calls_by_agent.get(seat.agent_id, []), key=lambda c: c.time_sent or 0)
        latest = turns[-1] if turns else None
        messages = [t for t in turns if t.kind != TurnKind.DECISION.value and getattr(t, "text")]
        latest_message = messages[-1].text if messages else ""
        if latest is None:
            state = "idle"
        elif latest.status == agents.RUNNING:
            state = f"thinking ({latest.kind}, {max(0, latest.deadline_at - now):.0f} s left)"
        elif latest.status == TurnStatus.FALLBACK.value:
            state = f"fallback ({latest.kind}: {getattr(latest, 'fallback_reason')})"
        else:
            state = f"answered ({latest.kind})"
        agents_rows.append(dict(
            agent_id=seat.agent_id,
            state=state,
            latest_message=latest_message,
            warnings=", ".join(w for t in messages for w in message_warnings(t.text)),
            calls=[dict(
                round=c.round_number, turn=c.turn, status=c.status,
                latency="" if getattr(c, "time_done") is None or getattr(c, "time_sent") is None
                else f"{c.time_done - c.time_sent:.2f} s",
                tokens=f"{getattr(c, 'input_tokens') or 0}/{getattr(c, 'output_tokens') or 0}",
            ) for c in calls[-6:]],
            cost=sum(getattr(c, "cost") or 0.0 for c in calls),
            fallbacks=sum(t.status == TurnStatus.FALLBACK.value for t in turns),
        ))
    limit = agents.budget_limit(session)
    spent = agents.session_spent(session)
    config = agents.model_config(session)
    model_probe.TEST_TARGETS[session.code] = dict(config=config, language=agents.AGENT_LANGUAGE[p.language],
                                                  with_chat=tables.with_chat)
    settled = sorted((t for ts in turns_by_agent.values() for t in ts if t.status != agents.RUNNING),
                     key=lambda t: getattr(t, "finished_at") or 0)[-FALLBACK_WARNING_TURNS:]
    recent_fallbacks = [t for t in settled if t.status == TurnStatus.FALLBACK.value]
    share = len(recent_fallbacks) / len(settled) if settled else 0.0
    reasons: dict[str, int] = {}
    for t in recent_fallbacks:
        reason = getattr(t, "fallback_reason") or "unknown"
        reasons[reason] = reasons.get(reason, 0) + 1
    check = model_check_details(session)  # the grammar and the server's capacity, as the check found them
    return dict(
        fallback_warning=share > FALLBACK_WARNING_SHARE,
        fallback_share=f"{share:.0%}",
        fallback_recent=len(settled),
        fallback_reasons=", ".join(f"{reason} ({n})" for reason, n in sorted(reasons.items(), key=lambda x: -x[1])),
        fallback_threshold=f"{FALLBACK_WARNING_SHARE:.0%}",
        model_test=model_probe.MODEL_TESTS.get(session.code),
        test_model_url=model_probe.TEST_MODEL_PATH + session.code,
        simulated=config.provider == "simulated",
        memory=config.memory,
        context_window=config.resolved_context_window() or "unknown",
        with_agents=True,
        agents=agents_rows,
        model=f"{config.provider} / {config.model}",
        spent=f"{spent:.4f}",
        budget="none" if limit is None else f"{limit:.2f}",
        budget_exhausted=limit is not None and spent >= limit,
        warnings_total=sum(bool(row["warnings"]) for row in agents_rows),
        **{f"model_{key}": value for key, value in check.items()},
        model_capacity_class="text-muted" if check["capacity_verdict"] == "fits" else "text-danger",
    )

