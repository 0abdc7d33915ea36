"""The wait page that puts agents into a game app.

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

import time

import otree.common
import otree.tasks
from otree.api import WaitPage
from otree.channels import utils as channel_utils
from otree.models_concrete import CompletedGroupWaitPage

from lab import agent_runtime as agents
from lab.shared_pages import game as lab_game
from lab.server import pause
from lab.shared_pages.pages import texts_for
from lab.base.session_settings import params_of


def wait_page(tables: agents.GameTables, kind: str, *, then, name: str, after_humans=None, displayed=None):
    """The wait for the associate's ``kind`` stage (a message or the decision). For an agent,
    once its turn is settled, ``then`` starts its next turn (a turn kind) or is called (a
    function of the player); for a human pair, ``after_humans(group)`` runs when both are in.
    ``displayed(player)`` False: the round has no such stage (one message exchange, no message 2)."""

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
            if not lab_game.is_played(player) or displayed is not None and not displayed(player):
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


