"""What the apps hand to lab/, so that lab/ imports none of them.

lab/ is the floor below the apps (docs/ARCHITECTURE.md). Where it reads an app's tables (a
game's players, messages and agent records, the quiz's, the questionnaire's and the payment's
players, the frozen manifests) it finds them here: each app registers them at import, and oTree
imports every app of the session configs before it serves a request, runs a bot or exports
(``otree.database.init_orm``). tests/test_architecture.py keeps lab/ from importing an app.
"""

from __future__ import annotations

import protocol

_players: dict = {}  # app name -> the app's Player model
_games: dict = {}  # game code (WC, WoC) -> the game app's GameTables (lab/agent_runtime/tables.py)
_session_manifests: list = []  # the first app's table of frozen manifests (lab/record/manifest.py)
_interventions: list = []  # the payment app's table of the experimenter's actions (lab/experimenter/interventions.py)
_bonus_payouts: list = []  # the payment app's table of bonus files handed out (lab/online/bonus.py)
_page_presence: list = []  # the payment app's table of who last had a page open (lab/online/presence.py)
_page_orders: dict = {}  # app name -> its pages in a session's order (lab/otree_patches/page_order.py)


def register_app(app_name: str, Player, *, tables=None, session_manifest=None, interventions=None,
                 bonus_payouts=None, page_presence=None, page_order=None) -> None:
    """Called by every app at import with its Player; a game app adds its ``GameTables``, the
    first app its table of frozen manifests, the payment app its tables of interventions, bonus
    payouts and page presence; an app whose sessions order its pages adds ``page_order``
    (session code -> its page_sequence's pages in that session's order)."""
    _players[app_name] = Player
    if page_order is not None:
        _page_orders[app_name] = page_order
    if tables is not None:
        _games[tables.game] = tables
    if session_manifest is not None:
        _session_manifests[:] = [session_manifest]
    if interventions is not None:
        _interventions[:] = [interventions]
    if bonus_payouts is not None:
        _bonus_payouts[:] = [bonus_payouts]
    if page_presence is not None:
        _page_presence[:] = [page_presence]


def _not_registered(what: str) -> LookupError:
    return LookupError(f"{what} has not registered with lab/base/app_registry.py: the apps register when oTree "
                       "imports them (otree.main.setup), which a script must run first")


def player_model(app_name: str):
    """The Player model of the app named ``app_name``."""
    try:
        return _players[app_name]
    except KeyError:
        raise _not_registered(f"the app {app_name!r}") from None


def game_tables(game: str):
    """The ``GameTables`` of the game ``game`` (WC or WoC)."""
    try:
        return _games[game]
    except KeyError:
        raise _not_registered(f"the game app of {game!r}") from None


def all_game_tables() -> dict:
    """Every game's ``GameTables``, by game code, in protocol.GAMES's order."""
    return {game: game_tables(game) for game in protocol.GAMES}


def session_manifest_model():
    """The table where a session's manifest is frozen at its creation."""
    if not _session_manifests:
        raise _not_registered("the table of frozen manifests")
    return _session_manifests[0]


def interventions_model():
    """The table of the experimenter's actions on the dashboard."""
    if not _interventions:
        raise _not_registered("the table of interventions")
    return _interventions[0]


def bonus_payouts_model():
    """The table of bonus files handed out for Prolific (online sessions)."""
    if not _bonus_payouts:
        raise _not_registered("the table of bonus payouts")
    return _bonus_payouts[0]


def page_presence_model():
    """The table of when each online participant was last known to have a page open."""
    if not _page_presence:
        raise _not_registered("the table of page presence")
    return _page_presence[0]


def page_orders() -> dict:
    """app name -> the function giving that app's pages in a session's order (session code ->
    page classes), for the apps that registered one."""
    return _page_orders
