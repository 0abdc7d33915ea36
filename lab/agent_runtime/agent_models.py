"""The database rows of agent seats, agent turns and model calls, for a game app.

Both game apps need the same three tables; oTree names a table after the module that defines
its class, so ``define(app_module, Subsession, Player)`` builds the classes *in* the calling
app (one definition, two apps' tables).
"""

from __future__ import annotations

from otree.api import ExtraModel, models

# CallRecord fields (agents/types.py) kept per call; JSON for the nested ones.
CALL_FIELDS = {
    "call_id": models.StringField, "agent_id": models.StringField, "round_number": models.IntegerField,
    "turn": models.StringField, "attempt": models.IntegerField, "provider": models.StringField,
    "model": models.StringField, "parameters": models.LongStringField, "prompt_version": models.StringField,
    "messages": models.LongStringField, "raw_reply": models.LongStringField, "parsed": models.LongStringField,
    "status": models.StringField, "error": models.LongStringField, "input_tokens": models.IntegerField,
    "output_tokens": models.IntegerField, "cost": models.FloatField, "time_sent": models.FloatField,
    "time_first_byte": models.FloatField, "time_done": models.FloatField, "retries": models.IntegerField,
    "simulated": models.BooleanField, "prompt_tokens": models.IntegerField, "trimmed": models.IntegerField,
    "reasoning": models.LongStringField, "flags": models.StringField,
}


def define(module_name: str, subsession_class, player_class):
    def make(name: str, doc: str, fields: dict):
        namespace = {"__module__": module_name, "__doc__": doc, **fields}
        return type(name, (ExtraModel,), namespace)

    seat = make("AgentSeat", "One agent of a game: persona and memory (PersonaAgent.to_state(), JSON).", dict(
        subsession=models.Link(subsession_class),  # the game's round-1 subsession
        seat=models.IntegerField(),
        agent_id=models.StringField(),
        persona=models.StringField(),
        state=models.LongStringField(),
        updated_at=models.FloatField(),
    ))
    turn = make("AgentTurn", "One turn of an agent against the human ``player``; final once settled.", dict(
        player=models.Link(player_class),
        agent_id=models.StringField(),
        kind=models.StringField(),  # message_1 | message_2 | decision
        status=models.StringField(),  # running | ok | reasked | fallback
        text=models.LongStringField(),
        choice=models.StringField(),
        fallback_reason=models.StringField(),
        started_at=models.FloatField(),
        deadline_at=models.FloatField(),
        finished_at=models.FloatField(),
        attempts=models.IntegerField(initial=1),  # >1 when redone after a server restart
    ))
    call = make("LlmCall", "One model call on the record (agents.types.CallRecord).", dict(
        player=models.Link(player_class),
        session_code=models.StringField(),
        **{name: field() for name, field in CALL_FIELDS.items()},
    ))
    return seat, turn, call
