"""Agents in the lab: their turns run beside the humans' pages and never block the server.

Design (docs/lab-agents.md):
- Turns run on a dedicated thread with its own asyncio loop (``AgentEngine``). oTree's event
  loop and its global lock never wait for a model; page hooks only *start* a turn (a
  thread-safe submit) and *settle* a finished one (a dictionary lookup and a few rows).
- The database is the source of truth. An ``AgentTurn`` row is written (status ``running``,
  its deadline) in the same transaction as the page submission that makes its inputs exist;
  the agent's memory (``AgentSeat.state``) changes only when a turn is settled. So a reload
  finds the running turn instead of starting another, and after a server restart (kill -9)
  a turn whose result was lost is redone from the last settled memory if time remains, or
  resolved by the fallback (no message / random choice, flagged) if not.
- A turn starts as soon as its inputs exist: message 1 at the round's start, message 2 once
  the human's message 1 is in (or timed out), the decision once both second messages are in
  (both first messages where the session's experiment has one exchange).
  The agent has the human's stage limits; the human waits on the game's wait page
  (lab/agent_runtime/wait_pages.py) only while a turn is running and never past its deadline.
- At server start (``resume_at_startup``, before the first request) every turn still
  ``running`` is redone if its deadline has not passed (else resolved by the fallback), so a
  human who stays on a page after a kill -9 still gets the agent's answer.
- Every model call is journaled (``CallJournalFile``: a small SQLite file of its own, written
  from the agent thread) before it is sent and again when it returns; settling a turn moves its
  calls into ``LlmCall`` (the journal's rows go once that is committed). At start, calls
  journaled by a killed server are moved too, those still in flight as status ``interrupted``
  with an estimated cost, so cost and the budget count every call the provider may bill.
- A page that settles a turn by the fallback while it still runs (``settle_or_fallback``) puts
  its calls on record at once, those in flight as ``abandoned`` with the same estimate (prompt +
  ``max_tokens``), charged to the session's budget before the turn is cancelled: no call is sent
  on money already spent. One row per call: the engine writes nothing more for an abandoned call
  (a reply that still arrives has its real cost taken back from the budget), and the journal
  keeps it as ``abandoned`` so that a restart adds no second row.

Layout, one module per concern; each imports only those above it:
- ``tables``: ``GameTables``, what a game app hands in;
- ``engine``: the thread and its event loop (``ENGINE``), models and budgets per session;
- ``journal``: the call journal file, and forgetting a call once its record is committed;
- ``page_bursts``: the gate that lets a round start's page loads go before its first turns;
- ``seats``: a session's model config, budget and spending; its agents' seats; the request memo;
- ``turns``: turns in the database: started, resumed, settled (by the fallback if need be); a round's start
  and end (uses engine, journal, page_bursts, seats);
- ``waiting``: a page waiting for a turn: its deadline, the push when it ends (``NOTIFIER``);
- ``startup``: the recovery at server start (lab/otree_patches/router_startup.py runs it);
- ``pausing``: a session resumed after a pause (lab/server/pause.py): its running turns' deadlines moved,
  those the pause cut off redone (uses engine, turns).
This face hands on what the game apps, the wait page (``wait_pages``) and the exports call; importing the package
installs nothing.
"""

from __future__ import annotations

from lab.agent_runtime.seats import agent_language, budget_limit, create_seats, model_config, session_spent
from lab.agent_runtime.tables import GameTables
from lab.agent_runtime.turns import (FINAL_STATUSES, RUNNING, TURN_STAGE, ensure_turn, find_turn, finish_round,
                                     remember_turns_of_session, settle_or_fallback, start_round)
from lab.agent_runtime.waiting import (NOTIFIER, SETTLE_GRACE_SECONDS, is_running, settle_if_finished,
                                       turn_deadline, wait_for_turn, wait_is_over)
