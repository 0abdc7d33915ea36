"""Which experiments of experiments/ the lab's pages can run today, and why not the others.

The pages read a session's game from its experiment (lab/base/session_game.py: payoffs, choices, the
cooperative choice), its treatment (the personas' codes, the label settings: whether they are
informed and the words naming the associates), its matching (lab/base/matching.py), its chat
game's message exchanges (one or two), its texts' slots (lab/shared_pages/pages.py) and its
questionnaires (questionnaire/), and its agents' prompts come from it (agents/prompts.py: the
personas' role-play files, the [agents] files). A design that differs from experiments/paper.toml
only where the lab follows the session (the payoffs, the matching, the exchanges of a game with
chat beside one without, one game alone, the personas and which of them the treatments name, the
labels, the choices' labels (their ids are the paper's, A and B: the decision as stored), the
cooperative choice (either of them, or none: then no cooperation rate is shown or asked), the
agents' files, the agents' message length, the currency, the languages (each is its locale file,
which the check reads) and the values a session config carries: rounds, limits, message length,
money, the title, its config names, demo sizes), or runs a part of the paper's questionnaires,
runs; any other difference is named here, and settings.py does not offer the file on the create
page (the server's log says why).
"""

from __future__ import annotations

import logging

logger = logging.getLogger("lab.experiments")

# What the pages read from the session (or its config): a design may differ there.
FOLLOWED = {"title", "session_config_prefix", "stage_limits", "messages", "payment", "demo_participants",
            "matching", "labels", "personas", "agents", "languages"}
# A design's treatments' associate types, label settings and game orders (of its games: one or both
# of the paper's) are its own (coherence checks they exist).
SUBSETS = {"treatments"}
OWN_TREATMENTS = {"associate_types", "label_settings", "game_orders"}
# The cooperative choice (either choice, or none): the pages, payment, dashboard and data package read
# the session's (lab/base/session_game.py).
FOLLOWED_GAME = {"payoffs", "rounds_per_game", "cooperative_choice"}
# Every payment value is the session's (the currency too: the lab's pages write the session's; only
# oTree's own admin "Payments" page writes settings.REAL_WORLD_CURRENCY_CODE, the paper's).
PAYMENT_NOT_FOLLOWED: set[str] = set()


def _papers_ids(choices: list[dict], papers: list[dict]) -> bool:
    """The choices have the paper's ids, in its order: the game apps store a decision as one of them and
    the quiz asks each pair of them; the labels shown are the file's (the pages, the agents' prompts)."""
    return [choice["id"] for choice in choices] == [choice["id"] for choice in papers]


def not_runnable(experiment, paper) -> list[str]:
    """What keeps the pages from running ``experiment`` (empty: it runs), compared with the paper's."""
    design, papers = experiment.design.model_dump(mode="json"), paper.design.model_dump(mode="json")
    found = [f"{field} differs from the paper's" for field in sorted(design)
             if field not in FOLLOWED | SUBSETS | {"game", "games", "schema_version", "questionnaires"}
             and design[field] != papers[field]]
    found += [f"games: {game} is not one of the paper's" for game in experiment.game_ids if game not in paper.game_ids]
    for field, values in design["treatments"].items():
        found += [f"treatments.{field}: {value} is not one of the paper's" for value in values
                  if field not in OWN_TREATMENTS and value not in papers["treatments"][field]]
    found += [f"game.{field} differs from the paper's" for field in sorted(design["game"])
              if field not in FOLLOWED_GAME and design["game"][field] != papers["game"][field]
              and not (field == "choices" and _papers_ids(design["game"]["choices"], papers["game"]["choices"]))]
    found += [f"payment.{field} differs from the paper's" for field in sorted(PAYMENT_NOT_FOLLOWED)
              if design["payment"][field] != papers["payment"][field]]
    return found


def offered(experiments: dict) -> tuple[str, ...]:
    """The names of ``experiments`` (name -> Experiment, the paper's among them) the pages can run,
    the paper's first; each other one's reasons go to the log."""
    paper = experiments["paper"]
    names = ["paper"]
    for name, experiment in sorted(experiments.items()):
        if name == "paper":
            continue
        reasons = not_runnable(experiment, paper)
        if reasons:
            logger.info("experiments/%s.toml is checked but not offered on the create page: %s", name,
                        "; ".join(reasons))
        else:
            names.append(name)
    return tuple(names)


def why_not_offered(config_name: str) -> str | None:
    """For a session config name no offered experiment has: the experiment file it belongs to and
    what keeps the lab from running it (None: no experiment file names it)."""
    import experiment_design

    try:
        paper = experiment_design.load(experiment_design.EXPERIMENTS_DIR / "paper.toml")
    except (OSError, experiment_design.ExperimentError):
        return None
    for path in experiment_design.experiment_files():
        try:
            experiment = experiment_design.load(path)
        except (OSError, experiment_design.ExperimentError):
            continue
        if any(config["name"] == config_name for config in experiment.session_configs()):
            reasons = not_runnable(experiment, paper)
            if reasons:
                return (f"it is a session config of experiments/{path.name}, which the lab's pages cannot run yet "
                        f"({'; '.join(reasons)}): docs/your-experiment.md says what runs in the lab")
    return None
