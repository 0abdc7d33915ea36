"""The experimenter's side: creating sessions (and the refusals), the live dashboard and its
actions on participants, the agents page, the admin views, and the proposals read in the chat.

Floors: docs/ARCHITECTURE.md."""
