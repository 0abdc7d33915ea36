"""oTree's row lookups by field values, compiled once instead of on every call.

Every page request looks up its participant by code (``db.get_or_404``) and its player by
participant and round (``Player.objects_get``, in ``set_attributes``), again for each page oTree
steps over; wait pages look up their group and subsession the same way, and the lab's pages
read their messages, agent turns and seats with ``ExtraModel.filter``. oTree 6 pins SQLAlchemy
1.3, which builds and compiles every ORM query anew, and that, not the database, was most of a
lookup's time: a participant and a player lookup took 918 µs together, 176 µs through
SQLAlchemy's compiled-query cache (``sqlalchemy.ext.baked``; bench/lookups.py, SQLite on disk).
The cost grows with a model's columns, so the lab's players, with the chat and agent fields,
paid about twice what a plain oTree PD's do, on every request (bench/server_trace.py's profile).

Here these lookups take the cached path when every criterion is an equality on a column or on a
many-to-one link to a saved row, with no ``None`` (``IS NULL`` is not a bound value): the same
WHERE clause, the same rows in the same order and the same errors (``NoResultFound``,
``MultipleResultsFound``, the 404). Anything else goes through oTree's own code, unchanged. A
player looked up by participant and round is read once per request (``_player_key``), and a row
looked up by id alone that the request has already loaded is not read again
(``_loaded_by_id``): oTree reads the page's subsession and session that way on every render,
and a wait page twice.
"""

from __future__ import annotations

from sqlalchemy import bindparam
from sqlalchemy.ext import baked
from sqlalchemy.orm import exc as orm_exc
from sqlalchemy.orm.interfaces import MANYTOONE
from sqlalchemy.orm.properties import ColumnProperty, RelationshipProperty

# The lab's one compiled-query cache: one entry per (model, criteria names) shape here (oTree and
# the lab use a few dozen), and the lab's own queries (lab/shared_pages/pages.py, lab/shared_pages/wait_for_all.py).
bakery = baked.bakery(size=500)
_criteria_cache: dict = {}


def _criteria(model, names: tuple):
    """Per name: (column to compare, how to get its bound value from the given value), or None
    when a name is not a plain column or a many-to-one link with one column."""
    key = (model, names)
    if key not in _criteria_cache:
        criteria = []
        for name in names:
            prop = getattr(getattr(model, name, None), "property", None)
            if isinstance(prop, ColumnProperty) and len(prop.columns) == 1:
                criteria.append((getattr(model, name), None))
            elif isinstance(prop, RelationshipProperty) and prop.direction is MANYTOONE \
                    and len(prop.local_remote_pairs) == 1:
                local, remote = prop.local_remote_pairs[0]
                criteria.append((local, prop.mapper.get_property_by_column(remote).key))
            else:
                criteria = None
                break
        _criteria_cache[key] = criteria
    return _criteria_cache[key]


def _params(criteria, names: tuple, values: dict):
    """The bound values, or None when one of them cannot be bound (None, or an unsaved row)."""
    params = {}
    for (_, remote_key), name in zip(criteria, names):
        value = values[name]
        if remote_key is not None and value is not None:
            value = getattr(value, remote_key, None)
        if value is None:
            return None
        params[f"lab_{name}"] = value
    return params


def _cached_query(session, model, values: dict, ordered_by_id: bool = False):
    """``session.query(model).filter_by(**values)`` (ordered by id) through the compiled-query
    cache, or None when the criteria do not allow it."""
    names = tuple(sorted(values))
    criteria = _criteria(model, names) if names else None
    params = criteria and _params(criteria, names, values)
    if not params:
        return None
    query = bakery(lambda s: s.query(model), model, names)
    query += (lambda q: q.filter(*[column == bindparam(f"lab_{name}")
                                   for (column, _), name in zip(criteria, names)]), model, names)
    if ordered_by_id:
        query += (lambda q: q.order_by(model.id), model)
    return query(session).params(**params)


def cached_one(session, model, values: dict):
    """``session.query(model).filter_by(**values).one()``, cached, or ``NotImplemented``."""
    query = _cached_query(session, model, values)
    return NotImplemented if query is None else query.one()


def cached_all(session, model, values: dict):
    """``session.query(model).filter_by(**values).order_by(id)`` as a list, cached, or
    ``NotImplemented``."""
    query = _cached_query(session, model, values, ordered_by_id=True)
    return NotImplemented if query is None else query.all()


def _player_key(model, values: dict):
    """A player looked up by participant and round, as oTree does for every page of a request
    (the page requested, then each page it steps over as it moves the participant on): the same
    row every time (one player per participant and round, and neither ever changes), so within
    a request (one database session, ``info`` is its own) it is read once. None for any other
    lookup."""
    from otree.models import BasePlayer

    participant_id = getattr(values.get("participant"), "id", None)
    if values.keys() != {"participant", "round_number"} or participant_id is None \
            or not issubclass(model, BasePlayer):
        return None
    return model, participant_id, values["round_number"]


def _loaded_by_id(session, model, values: dict):
    """The row a lookup by id alone asks for, if this request's database session holds it
    loaded and current (what the query would return: a query does not reload a row it holds),
    else None. No autoflush: the row returned is the same object either way."""
    from sqlalchemy import inspect
    from sqlalchemy.orm.util import identity_key

    if values.keys() != {"id"} or not isinstance(values["id"], int):
        return None
    row = session.identity_map.get(identity_key(model, values["id"]))
    if row is None or not isinstance(row, model):
        return None
    state = inspect(row)
    if state.expired or state.deleted or state.was_deleted or state.detached:
        return None
    return row


def cached_lookups(original_objects_get, original_filter, original_get_or_404):
    """oTree's ``AnyModel.objects_get``, ``ExtraModel.filter`` (their functions, unbound) and
    ``DBWrapper.get_or_404``, taking the cached path where they can (lab/otree_patches/model_lookups.py
    puts them in)."""
    from otree import database

    def objects_get(cls, *args, **kwargs):
        if not args:
            session = database.db._db
            loaded = _loaded_by_id(session, cls, kwargs)
            if loaded is not None:
                return loaded
            key = _player_key(cls, kwargs)
            players = session.info.setdefault("lab_players", {}) if key is not None else None
            if key is not None and key in players and players[key] in session:
                return players[key]
            row = cached_one(session, cls, kwargs)
            if row is not NotImplemented:
                if key is not None:
                    players[key] = row
                return row
        return original_objects_get(cls, *args, **kwargs)

    def extra_model_filter(cls, **kwargs):
        # oTree's check first: at least one model instance among the criteria.
        if any(isinstance(v, database.AnyModel) for v in kwargs.values()):
            rows = cached_all(database.db._db, cls, kwargs)
            if rows is not NotImplemented:
                return rows
        return original_filter(cls, **kwargs)

    def get_or_404(self, Model, msg="Not found (maybe the session was deleted)", **kwargs):
        try:
            row = cached_one(self._db, Model, kwargs)
        except orm_exc.NoResultFound:
            row = NotImplemented  # oTree's own path raises its 404, with its message
        if row is not NotImplemented:
            return row
        return original_get_or_404(self, Model, msg, **kwargs)

    return objects_get, extra_model_filter, get_or_404
