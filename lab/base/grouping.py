"""oTree's ``Subsession.set_group_matrix`` with one commit instead of one per group.

Creating a session regroups the players of every round of both games (a group of one per
participant online and in H-F, perfect-stranger pairs in H-H) and of the payment app. oTree's
version commits once per new group (``Group.set_players``), and every commit expires every row
the database session holds, so the next group loads its players again: creating a 300-person
online session held oTree's lock ~20 s, two thirds of it here (py-spy), and every page of every
other session on the server waits for that lock. This does the same steps, in the same order,
with one commit at the end: the players leave their groups, the old groups are deleted, the new
ones are numbered from 1, and each player gets its ``id_in_group`` and role as oTree gives them.
"""

from __future__ import annotations

from otree.constants import get_role, get_roles
from otree.database import db


def set_group_matrix(subsession, matrix: list[list]) -> None:
    """Group ``subsession``'s players as ``matrix`` (rows of its Player objects, each player once)."""
    players = subsession.get_players()
    placed = sorted(player.id for row in matrix for player in row)
    if placed != sorted(player.id for player in players):
        raise ValueError("The group matrix must hold each of the subsession's players exactly once.")
    Player, Group = subsession._PlayerClass(), subsession._GroupClass()
    subsession.player_set.update({Player.group_id: None})
    subsession.group_set.delete()
    roles = get_roles(subsession._Constants)
    for number, row in enumerate(matrix, start=1):
        group = Group.objects_create(subsession=subsession, id_in_subsession=number, session=subsession.session,
                                     round_number=subsession.round_number)
        for id_in_group, player in enumerate(row, start=1):
            player.group = group
            player.id_in_group = id_in_group
            player._role = get_role(roles, id_in_group)
    db.commit()
