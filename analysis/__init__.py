"""The paper's results from the platform's exports (docs/DATA.md); see docs/analysis.md.

    from analysis import load_exports, analyse, run
    analysis = run("exports/", "report/")        # everything, written to report/
    exports = load_exports("exports/")            # or step by step
    result = analyse(exports)                     # tables, figures and notes, in memory
"""

from analysis.annotation import machine_annotate
from analysis.comparisons import Section
from analysis.load import Exports, Problem, from_otree_bot_export, load_exports
from analysis.report import run, write_report
from analysis.results import Analysis, analyse

__all__ = ["Analysis", "Exports", "Problem", "Section", "analyse", "from_otree_bot_export", "load_exports",
           "machine_annotate", "run", "write_report"]
