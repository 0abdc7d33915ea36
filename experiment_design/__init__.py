"""An experiment as a file (experiments/*.toml): its schema, its check, and what sessions, agents and
the analysis read of it. Imports nothing of the project (pydantic and the standard library), so
every part of it may use it; it reads locale/ and prompts/ only as data, to check them.
docs/experiment-file.md is the file's reference."""

from experiment_design.check import check, check_all_or_exit, check_files
from experiment_design.configs import GAME_APPS, config_values, session_configs
from experiment_design.experiment import (EXPERIMENTS_DIR, PROJECT_DIR, TEST_EXPERIMENTS_DIR, Experiment, Treatment,
                                          experiment_files, load, load_text, test_experiments_enabled)
from experiment_design.problems import ExperimentError, Problem
from experiment_design.schema import HUMAN, MATCHING_RULES, QUESTIONNAIRE_PAGES, SCHEMA_VERSION, Design

__all__ = ["EXPERIMENTS_DIR", "GAME_APPS", "HUMAN", "MATCHING_RULES", "PROJECT_DIR", "QUESTIONNAIRE_PAGES",
           "SCHEMA_VERSION", "TEST_EXPERIMENTS_DIR", "Design", "Experiment", "ExperimentError", "Problem", "Treatment",
           "check", "check_all_or_exit", "check_files", "config_values", "experiment_files", "load", "load_text",
           "session_configs", "test_experiments_enabled"]
