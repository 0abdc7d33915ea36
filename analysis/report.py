"""Writing the report: tables as CSV, figures as PNG and SVG, one HTML page showing them all."""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

import protocol
from analysis import annotation, stand_ins, stats
from analysis.comparisons import PAPER_LAYOUT, Section, TreatmentLayout, treatment_layout
from analysis.load import Exports, load_exports
from analysis.results import Analysis, analyse

TEMPLATE_NAME = annotation.TEMPLATE_NAME
FIGURE_FORMATS = ("png", "svg", "pdf")
STATISTICS_NOTE = (
    "Two-tailed Mann–Whitney U tests report R's W (the U statistic of the group named first, W_of; "
    "W_reversed is R's W the other way round) and the z of the normal approximation; comparisons are "
    "named in the paper's order; proportions "
    "are compared with R's prop.test (χ² with Yates' continuity correction); Cohen's d uses the "
    "pooled standard deviation and Cohen's h the arcsine transform, both as group 1 minus group 2; "
    "one-sample Wilcoxon signed-rank tests report R's V (sum of the positive ranks). p-values are "
    "two-tailed and not adjusted for multiple comparisons, as in the paper; Tukey HSD is adjusted. "
    "A statistic of a degenerate sample (every value equal) is 'not defined', as R's NA/NaN. Error "
    "bars and bands are 95 % intervals (Wilson for rates, t for means).")


def run(export_dirs: str | Path | list[str | Path], out_dir: str | Path, *,
        glm_degree: dict[str, int] | int | None = None, include_stand_ins: bool = False,
        cooperative_choice: str | None = None, experiment=None) -> Analysis:
    """Load the exports, analyse them and write the report folder. Returns the analysis.
    Online stand-in pair-rounds are left out unless ``include_stand_ins`` (analysis/stand_ins.py).
    Cooperation is choosing ``cooperative_choice`` (None: ``experiment``'s, the paper's without one;
    ValueError when the experiment names none: the report is about cooperation); ``experiment``'s
    own personas, label settings and norm intervals are its sessions', its treatments the ones the
    sections compare (None: the paper's)."""
    if cooperative_choice is None:
        cooperative_choice = protocol.COOPERATE if experiment is None else experiment.cooperative_choice
    if cooperative_choice is None:
        raise ValueError(f"experiment {experiment.name} names no cooperative choice: there is no cooperation "
                         "rate to report")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exports = load_exports(export_dirs if isinstance(export_dirs, list) else [export_dirs], experiment)
    exports, _ = stand_ins.apply(exports, include=include_stand_ins)
    norm_intervals = protocol.NORM_INTERVALS if experiment is None else (
        experiment.design.questionnaires.norm_intervals or ())
    return write_report(exports, out, glm_degree=glm_degree, cooperative_choice=cooperative_choice,
                        norm_intervals=norm_intervals, layout=treatment_layout(experiment))


def write_report(exports: Exports, out: Path, *, glm_degree: dict[str, int] | int | None = None,
                 cooperative_choice: str = protocol.COOPERATE, norm_intervals=protocol.NORM_INTERVALS,
                 layout: TreatmentLayout = PAPER_LAYOUT) -> Analysis:
    out.mkdir(parents=True, exist_ok=True)
    template_path = out / TEMPLATE_NAME
    analysis = analyse(exports, template_path=template_path, glm_degree=glm_degree,
                       cooperative_choice=cooperative_choice, norm_intervals=norm_intervals, layout=layout)
    annotation.write_template(analysis.conversations, template_path, known=analysis.annotation_key)
    key = annotation.read_key(out / annotation.KEY_NAME)
    breaches = annotation.breach_template(analysis.conversations, key, exports.llm_calls)
    if not breaches.empty:
        breaches.to_csv(out / annotation.BREACH_TEMPLATE_NAME, index=False, encoding="utf-8")
    tables_dir, figures_dir = out / "tables", out / "figures"
    tables_dir.mkdir(exist_ok=True)
    figures_dir.mkdir(exist_ok=True)
    for name, table in analysis.tidy_tables().items():
        table.to_csv(tables_dir / f"tidy_{name}.csv", index=False)
    for section in analysis.sections:
        for name, table in section.tables.items():
            table.to_csv(tables_dir / f"{_stem(section)}{name}.csv", index=False)
        for name, draw in list(section.figures.items()):
            try:
                figure = draw()
            except Exception as error:  # a figure that fails must not cost the rest of the report
                section.notes.append(f"Figure {name} could not be drawn: {type(error).__name__}: {error}")
                del section.figures[name]
                continue
            for suffix in FIGURE_FORMATS:
                figure.savefig(figures_dir / f"{name}_{section.label_setting}.{suffix}", dpi=110)
            plt.close(figure)
    (out / "report.html").write_text(render_html(analysis, out), encoding="utf-8")
    return analysis


def _stem(section: Section) -> str:
    setting = f"{section.label_setting}_" if section.label_setting else ""
    return f"{section.key}_{setting}"


STATISTIC_COLUMNS = {"W", "W_reversed", "z", "V", "chi2", "cohens_d", "cohens_h", "rho", "cohens_kappa", "F"}


def _number(value: float) -> str:
    if pd.isna(value):
        return ""
    if value in (float("inf"), float("-inf")):
        return "Inf" if value > 0 else "-Inf"  # as R prints them (F of groups without variance, d)
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _format_table(table: pd.DataFrame, name: str = "") -> str:
    if table.empty:
        return "<p class='note'>(no rows)</p>"
    shown = table.copy()
    floor = stats.TUKEY_P_FLOOR if name.startswith("tukey") else stats.P_FLOOR
    for column in shown.columns:
        if column.endswith("p_value"):
            shown[column] = shown[column].map(lambda p: stats.format_p(p, floor))
        elif column in STATISTIC_COLUMNS and pd.api.types.is_float_dtype(shown[column]):
            # a statistic of a degenerate sample: R's NA/NaN, not an empty cell that reads as "no data"
            shown[column] = shown[column].map(lambda v: "not defined" if pd.isna(v) else _number(v))
        elif pd.api.types.is_float_dtype(shown[column]):
            shown[column] = shown[column].map(_number)
        elif isinstance(shown[column].dtype, pd.Int64Dtype):  # a count that does not apply: blank, as in the CSV
            shown[column] = shown[column].astype(object).where(shown[column].notna(), "")
    if "term" in shown and {"F", "p_value"} <= set(shown.columns):  # the ANOVA: residuals have no test
        shown.loc[shown["term"] == "Residuals", ["F", "p_value"]] = ""
    return shown.to_html(index=False, escape=True, border=0, classes="table")


def render_html(analysis: Analysis, out: Path) -> str:
    exports = analysis.exports
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<title>Machine penalty — analysis report</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
        "table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}"
        "td,th{border-bottom:1px solid #ddd;padding:2px 8px;text-align:right}"
        "th{background:#f3f3f3}.note{color:#555}.error{color:#a00}.warning{color:#a60}"
        "img{max-width:100%}h2{border-top:2px solid #333;padding-top:0.5em}</style></head><body>",
        "<h1>Analysis report</h1>",
        f"<p class='note'>Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from "
        f"{len(exports.files)} CSV files. {html.escape(STATISTICS_NOTE)}</p>",
        "<p class='note'>Cooperation rates are per participant over the rounds of the game with "
        "communication (WC), the paper's headline measure; label settings are reported separately "
        "(informed = main text, uninformed = SI Note 3).</p>",
    ]
    parts.append("<h2>Problems with the input</h2>")
    if exports.problems:
        parts.append("<ul>" + "".join(f"<li class='{p.level}'>[{p.level}] {html.escape(str(p))}</li>"
                                      for p in exports.problems) + "</ul>")
    else:
        parts.append("<p class='note'>None.</p>")
    for section in analysis.sections:
        parts.append(f"<h2 id='{_stem(section)}'>{html.escape(section.title)}</h2>")
        parts.append(f"<p class='note'>Reproduces: {html.escape(section.reproduces)}</p>")
        for note in section.notes:
            parts.append(f"<p>{html.escape(note)}</p>")
        for name in section.figures:
            image = f"figures/{name}_{section.label_setting}.png"
            parts.append(f"<p><img src='{image}' alt='{html.escape(name)}'></p>")
        for name, table in section.tables.items():
            if name == "curve":
                continue  # the fitted curve is drawn and written as CSV; 101 rows help nobody here
            csv_name = f"tables/{_stem(section)}{name}.csv"
            parts.append(f"<h3>{html.escape(name.replace('_', ' '))} "
                         f"<small>(<a href='{csv_name}'>CSV</a>)</small></h3>")
            parts.append(_format_table(table, name))
    parts.append("<h2>Tidy tables</h2><ul>" + "".join(
        f"<li><a href='tables/tidy_{name}.csv'>tidy_{name}.csv</a> — {len(table)} rows</li>"
        for name, table in analysis.tidy_tables().items()) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
