"""Which experiments of experiments/ the lab's pages can run today, and why not the others.

The pages read a session's game from its experiment (lab/base/session_game.py: payoffs, choices, the
cooperative choice), its treatment (the personas' codes, the label settings: whether they are
informed and the words naming the associates), its matching (lab/base/matching.py), its chat
game's message exchanges (one or two), its texts' slots (lab/shared_pages/pages.py) and its
questionnaires (questionnaire/), and its agents' prompts come from it (agents/prompts.py: the
personas' role-play files, the [agents] files). A design that differs from experiments/paper.toml
only where the lab follows the session (the payoffs, the matching, the exchanges of a game with
chat beside one without, the personas and which of them the treatments name, the labels, the
agents' files, the agents' message length, the currency and the values a session config carries:
rounds, limits, message length, money, the title, its config names, demo sizes), or runs a part of
the paper's game orders, languages or questionnaires, runs; any other difference is named here,
and settings.py does not offer the file on the create page (the server's log says why).
"""

from __future__ import annotations

import logging

logger = logging.getLogger("lab.experiments")

# What the pages read from the session (or its config): a design may differ there.
FOLLOWED = {"title", "session_config_prefix", "stage_limits", "messages", "payment", "demo_participants",
            "matching", "labels", "personas", "agents"}
# A design may run a part of the paper's: some of its game orders, one of its languages; its
# treatments' associate types and label settings are its own (coherence checks they exist).
SUBSETS = {"treatments", "languages"}
OWN_TREATMENTS = {"associate_types", "label_settings"}
FOLLOWED_GAME = {"payoffs", "rounds_per_game"}
# Every payment value is the session's (the currency too: the lab's pages write the session's; only
# oTree's own admin "Payments" page writes settings.REAL_WORLD_CURRENCY_CODE, the paper's).
PAYMENT_NOT_FOLLOWED: set[str] = set()


def _shown_as_papers(choices: list[dict], papers: list[dict]) -> bool:
    """The choices have the paper's ids and show them as their labels (the pages write A and B)."""
    return ([choice["id"] for choice in choices] == [choice["id"] for choice in papers]
            and all(label == choice["id"] for choice in choices for label in choice["label"].values()))


def not_runnable(experiment, paper) -> list[str]:
    """What keeps the pages from running ``experiment`` (empty: it runs), compared with the paper's."""
    design, papers = experiment.design.model_dump(mode="json"), paper.design.model_dump(mode="json")
    found = [f"{field} differs from the paper's" for field in sorted(design)
             if field not in FOLLOWED | SUBSETS | {"game", "games", "schema_version", "questionnaires"}
             and design[field] != papers[field]]
    found += questionnaires_not_followed(design["questionnaires"], papers["questionnaires"])
    if sorted(game.game_id for game in experiment.design.games) != sorted(paper.game_ids):
        found.append("games differs from the paper's (the lab runs two games: one with chat, of one or two "
                     "message exchanges, and one without)")
    found += [f"languages: {language} is not one of the paper's" for language in design["languages"]
              if language not in papers["languages"]]
    for field, values in design["treatments"].items():
        found += [f"treatments.{field}: {value} is not one of the paper's" for value in values
                  if field not in OWN_TREATMENTS and value not in papers["treatments"][field]]
    found += [f"game.{field} differs from the paper's" for field in sorted(design["game"])
              if field not in FOLLOWED_GAME and design["game"][field] != papers["game"][field]
              and not (field == "choices" and _shown_as_papers(design["game"]["choices"], papers["game"]["choices"]))]
    found += [f"payment.{field} differs from the paper's" for field in sorted(PAYMENT_NOT_FOLLOWED)
              if design["payment"][field] != papers["payment"][field]]
    return found


def questionnaires_not_followed(questionnaires: dict, papers: dict) -> list[str]:
    """The questionnaire app shows the pages a file lists, in the app's (the paper's) order (the norm
    estimates on the file's intervals, paid when it has a bonus)."""
    pages, paper_pages = list(questionnaires["pages"]), list(papers["pages"])
    found = []
    if pages != [page for page in paper_pages if page in pages]:
        found.append(f"questionnaires.pages: the lab shows them in the paper's order ({', '.join(paper_pages)})")
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
