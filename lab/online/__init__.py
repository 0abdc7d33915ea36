"""Online sessions (Prolific): entry and exit, lobby, dropouts and stand-ins (docs/online.md)."""
