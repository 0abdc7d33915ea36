"""oTree's machinery as the lab runs it: the request lock and guard, the timeout worker, the
channel layer, compiled lookups, the experimenter's pause, the notices socket, rooms, and oTree's
own texts in the session's language. lab/otree_patches/ puts these in place of oTree's.

Floors: docs/ARCHITECTURE.md."""
