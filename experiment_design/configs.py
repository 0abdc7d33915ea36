"""oTree session configs from an experiment: one per treatment (associate type x label setting x game
order), named as the paper's (``hf_informed_wc_first``) after the experiment's prefix, carrying the
experiment's name and its text's hash (``experiment``, ``experiment_sha256``) and its values as the flat session-config keys the create page
shows and lets the experimenter change per session."""

from __future__ import annotations

from experiment_design.schema import HUMAN

# The oTree app of each game and the apps around them (an app appears once in a session).
GAME_APPS = {"WC": "game_with_chat", "WoC": "game_without_chat"}
FIRST_APP, QUESTIONNAIRE_APP, LAST_APP = "instructions", "questionnaire", "payment"


def _order_part(order: tuple[str, ...]) -> str:
    return f"{order[0].lower()}_first" if len(order) > 1 else f"{order[0].lower()}_only"


def config_values(experiment, *, server_language: str | None = None, max_rounds_per_game: int | None = None) -> dict:
    """The experiment's values under the session config's keys: the session's language (the server's
    when the experiment offers it, else the experiment's first), rounds (at most the server's
    ``max_rounds_per_game``, so a session is created unedited), stage limits, message length, money."""
    design = experiment.design
    rounds = design.game.rounds_per_game
    values = {
        "language": server_language if server_language in design.languages else design.languages[0],
        "rounds_per_game": rounds if max_rounds_per_game is None else min(rounds, max_rounds_per_game),
    }
    values.update({f"{stage}_seconds": seconds for stage, seconds in experiment.stage_limits().items()})
    if design.messages is not None:
        values["message_max_chars"] = design.messages.max_chars
    values.update(participation_fee=design.payment.show_up_fee,
                  real_world_currency_per_point=design.payment.currency_per_point,
                  norm_bonus=design.payment.norm_bonus)
    if design.personas and "fair" not in design.personas:
        # the online stand-ins' persona (the lab's default, fair, is the paper's): the design's first
        values["stand_in_persona"] = next(iter(design.personas))
    return values


def session_configs(experiment, *, server_language: str | None = None,
                    max_rounds_per_game: int | None = None) -> list[dict]:
    """Every session config of the experiment, in the paper's order (associate types, then label
    settings, then game orders, as the file lists them)."""
    design = experiment.design
    prefix = experiment.session_config_prefix
    values = config_values(experiment, server_language=server_language, max_rounds_per_game=max_rounds_per_game)
    questionnaire = [QUESTIONNAIRE_APP] if design.questionnaires.pages else []
    configs = []
    for associate_type in design.treatments.associate_types:
        code = experiment.treatment_code(associate_type)
        for label_setting in design.treatments.label_settings:
            for order_name, order in experiment.game_orders.items():
                shown = f"{code} · label-{label_setting} · {'→'.join(order)}"
                doc = (f"Treatment {code}, associates are {associate_type}; label-{label_setting}; game order "
                       f"{order_name}. Stage limits in seconds; money in {design.payment.currency}.")
                configs.append(dict(
                    name=f"{prefix}{code.replace('-', '').lower()}_{label_setting}_{_order_part(order)}",
                    display_name=shown if not prefix else f"{design.title} · {shown}",
                    app_sequence=[FIRST_APP, *(GAME_APPS[game] for game in order), *questionnaire, LAST_APP],
                    num_demo_participants=(design.demo_participants.human if associate_type == HUMAN
                                           else design.demo_participants.agents),
                    associate_type=associate_type,
                    label_setting=label_setting,
                    game_order=order_name,
                    doc=doc if not prefix else f"{design.title}. {doc}",
                    experiment=experiment.name,
                    experiment_sha256=experiment.text_sha256,
                    **values,
                ))
    return configs
