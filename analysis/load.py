"""Reading the exports of docs/DATA.md: every CSV of the inputs (folders, data packages, files:
analysis/inputs.py), each table known by its columns.

Nothing here raises on bad input. A file that is not one of the tables, a table that lacks a
column the analysis needs, or values outside the contract become ``Problem``s naming the file
and the column; the usable rest is loaded, so the report can still be produced.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pandas as pd

import protocol
from analysis.inputs import CsvSource, collect
from analysis.labels import (FALSE_WORDS, TRUE_WORDS, UNREADABLE, parse_agreement, parse_motive,  # noqa: F401
                            parse_strategy)

SESSION_KEYS = ("session_code", "treatment", "associate_type", "label_setting", "game_order", "source")
TREATMENTS = tuple(protocol.TREATMENT_CODES.values()) + ("A-A",)  # A-A: agent-vs-agent simulation
MOTIVES = ("risk_aversion", "inequality_aversion", "strategic_defection", "unconditional_defection")
LABEL_COLUMNS = ("p1_preferred", "p2_preferred", "p1_wants_other", "p2_wants_other", "agreement")
BREACH_CHECKS = ("coherent", "error_free")  # SI Note 2's second task: binary ratings of the agent's output
PERCEPTION_COLUMNS = tuple(f"perception_{item}" for item in protocol.PERCEPTION_ITEMS)
SEVEN_C_COLUMNS = tuple(f"c7_{item}" for item in protocol.SEVEN_C_ITEMS)
LIKERT_COLUMNS = PERCEPTION_COLUMNS + SEVEN_C_COLUMNS + ("believed_human",)


@dataclass(frozen=True)
class TableSpec:
    name: str
    signature: tuple[str, ...]  # the columns that identify the table (DATA.md)
    required: tuple[str, ...]  # without these the table cannot be used at all
    # the other DATA.md columns the analysis reads (lab/record/data_dictionary.py's: a test holds them to it);
    # a missing one is filled with blanks
    contract: tuple[str, ...]


_MAIN_KEYS = ("session_code", "treatment", "associate_type", "label_setting")

# Checked in this order: the motives file also has an `annotator` column.
TABLE_SPECS = (
    # Annotation files name a conversation by `conversation_id` or, when filled from the blind
    # template, by its opaque `item` (annotation_key.csv maps one to the other).
    TableSpec("motives", ("annotator", "risk_aversion"), ("annotator",) + MOTIVES,
              ("conversation_id", "item") + BREACH_CHECKS),
    TableSpec("annotations", ("annotator",), ("annotator",) + LABEL_COLUMNS, ("conversation_id", "item")),
    TableSpec("annotation_key", ("item", "conversation_id"), ("item", "conversation_id"), ()),
    TableSpec(
        "decisions", ("choice", "game", "round"),
        _MAIN_KEYS + ("game", "round", "player_code", "player_kind", "associate_code", "associate_kind",
                      "conversation_id", "choice", "associate_choice"),
        ("game_order", "source", "game_index", "persona", "timed_out", "payoff", "associate_payoff",
         "decided_at"),
    ),
    TableSpec(
        "messages", ("text", "stage"),
        ("session_code", "game", "round", "conversation_id", "stage", "sender_code", "sender_kind", "text"),
        ("treatment", "associate_type", "label_setting", "game_order", "source", "receiver_code",
         "receiver_kind", "sent_in_time", "stage_started_at", "sent_at", "unsent_draft"),
    ),
    TableSpec(
        "participants", ("svo_angle",),
        _MAIN_KEYS + ("participant_code",),
        ("game_order", "source", "participant_label", "quiz_attempts", "norm_estimate_WC",
         "norm_estimate_WoC", "norm_true_WC", "norm_true_WoC", "norm_correct_WC", "norm_correct_WoC")
        + LIKERT_COLUMNS + ("llm_familiarity",) + tuple(f"svo_item_{i}" for i in range(1, 7))
        + ("svo_angle", "svo_category", "age", "gender", "major", "points_WC", "points_WoC", "payout"),
    ),
    TableSpec(
        "llm_calls", ("prompt_version",),
        ("session_code", "treatment", "agent_id", "status"),
        ("associate_type", "label_setting", "game_order", "source", "game", "participant_code", "call_id",
         "round_number", "turn", "attempt", "provider", "model", "parameters", "prompt_version", "messages",
         "raw_reply", "parsed", "error", "input_tokens", "output_tokens", "cost", "time_sent",
         "time_first_byte", "time_done", "retries", "simulated"),
    ),
)
SPEC_BY_NAME = {spec.name: spec for spec in TABLE_SPECS}

# Allowed values per column; rows with anything else are dropped (with a Problem).
ALLOWED_VALUES = {
    "treatment": set(TREATMENTS),
    "associate_type": set(protocol.ASSOCIATE_TYPES),
    "label_setting": set(protocol.LABEL_SETTINGS),
    "game": set(protocol.GAMES),
    "choice": set(protocol.CHOICES),
    "associate_choice": set(protocol.CHOICES),
    "player_kind": {"human", "agent"},
    "associate_kind": {"human", "agent"},
    "sender_kind": {"human", "agent"},
}


def allowed_values(experiment=None) -> dict:
    """ALLOWED_VALUES, with the treatment codes, associate types (its personas) and label settings of
    the sessions' ``experiment`` (experiment_design.Experiment; None: the paper's names only)."""
    if experiment is None:
        return ALLOWED_VALUES
    kinds = ("human", *experiment.design.personas)
    return {**ALLOWED_VALUES,
            "treatment": ALLOWED_VALUES["treatment"] | {experiment.treatment_code(kind) for kind in kinds},
            "associate_type": ALLOWED_VALUES["associate_type"] | set(kinds),
            "label_setting": ALLOWED_VALUES["label_setting"] | set(experiment.design.labels)}


VALUE_CHECKS = {
    "decisions": ("treatment", "associate_type", "label_setting", "game", "choice", "associate_choice",
                  "player_kind", "associate_kind"),
    "messages": ("game", "sender_kind"),
    "participants": ("treatment", "associate_type", "label_setting"),
    "llm_calls": ("treatment",),
}
# Columns a file may lack without a warning: annotation files name conversations by one of two
# columns, and the breach checks are the second task's, absent from motive-only files.
OPTIONAL_COLUMNS = {"conversation_id", "item", *BREACH_CHECKS}


def _row(index: int) -> str:
    return f"row {index + 2}"  # the header is row 1, as a spreadsheet numbers them


def _rows(indices: Iterable[int]) -> str:
    listed = [_row(i) for i in list(indices)[:5]]
    return ", ".join(listed) + (", …" if len(list(indices)) > 5 else "")


def _flag_repeated_annotators(name: str, frame: pd.DataFrame, problems: list) -> pd.DataFrame:
    """An annotator twice on one conversation would count as two annotators agreeing."""
    key = frame["item"].where(frame["item"].str.strip() != "", frame["conversation_id"])
    repeated = pd.Series(list(zip(key, frame["annotator"].str.strip())), index=frame.index).duplicated()
    if repeated.any():
        problems.append(Problem(name, "annotator", f"{repeated.sum()} rows repeat an annotator on a conversation "
                                "they already labelled (" + "; ".join(
                                    f"{_row(i)}: {frame.at[i, 'annotator']!r} on {key[i]!r}"
                                    for i in frame.index[repeated][:5]) + "): only the first row is used",
                                "warning"))
    return frame[~repeated]


# oTree's own exports, written beside the tables of DATA.md (`otree test --export`, the admin's
# data page): known, not analysed, and not worth a line in the problems list.
OTREE_EXPORT_SIGNATURES = {
    "oTree standard export (all apps wide / per app)": None,  # columns participant.*, session.*, player.*
    "quiz attempts (instructions app's custom export)": ("attempt", "passed", "answers", "submitted_at"),
    "page times": ("page_index", "page_name", "epoch_time_completed"),
    "chat": ("channel", "nickname", "body"),
    # Read by analysis/manifest.py, not by the tables' loader.
    "session manifest (payment app's custom export)": ("session_code", "key", "value"),
    # The experimenter's actions: context for a reader, not data the analysis reads.
    "interventions (payment app's custom export)": ("who", "action", "participant_code", "detail"),
}
PLATFORM_TABLES = ("decisions", "messages", "participants", "llm_calls")  # written by the platform


def otree_export_kind(columns: Iterable[str]) -> str | None:
    """The kind of oTree's own export these columns are, or None."""
    present = set(columns)
    for kind, signature in OTREE_EXPORT_SIGNATURES.items():
        if signature is None:
            if any(c.startswith(("participant.", "session.", "player.")) for c in present):
                return kind
        elif set(signature) <= present:
            return kind
    return None


@dataclass(frozen=True)
class Problem:
    file: str
    column: str
    message: str
    level: str = "error"  # "error": data left out; "warning": data kept, check it; "info"

    def __str__(self) -> str:
        column = f" column `{self.column}`:" if self.column else ""
        return f"{self.file}:{column} {self.message}"


@dataclass
class Exports:
    """The tables of one or more sessions, concatenated, typed and checked."""

    tables: dict[str, pd.DataFrame]
    files: pd.DataFrame  # FILE_COLUMNS: what was read from where
    problems: list[Problem] = field(default_factory=list)

    def __getattr__(self, name: str) -> pd.DataFrame:
        tables = self.__dict__.get("tables", {})
        if name in SPEC_BY_NAME:
            return tables.get(name, _empty_table(SPEC_BY_NAME[name]))
        raise AttributeError(name)


def _empty_table(spec: TableSpec) -> pd.DataFrame:
    return _convert_types(spec.name, pd.DataFrame(columns=list(spec.required + spec.contract), dtype=object))


def to_bool(values: pd.Series) -> pd.Series:
    """'True'/'False' (and 1/0, yes/no) to a nullable boolean; anything else to <NA>."""
    words = values.astype(str).str.strip().str.lower()
    result = pd.Series(pd.NA, index=values.index, dtype="boolean")
    result[words.isin(TRUE_WORDS)] = True
    result[words.isin(FALSE_WORDS)] = False
    return result


def identify(columns: Iterable[str]) -> TableSpec | None:
    present = set(columns)
    for spec in TABLE_SPECS:
        if set(spec.signature) <= present:
            return spec
    return None


# The report's files table: every CSV read, the table it is (a DATA.md table, or which of oTree's
# own exports), its data rows as the file holds them, and of those the rows the analysis uses.
FILE_COLUMNS = ["file", "table", "rows", "rows_used"]


def load_exports(paths: str | Path | Iterable[str | Path], experiment=None) -> Exports:
    """Read every CSV of the given folders (recursively), data packages (zipped or not) and files;
    ``experiment``: the sessions' (its own personas' rows are kept, ``allowed_values``)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    inputs = collect(paths)
    problems = [Problem(path, "", reason) for path, reason in inputs.bad]

    parts: dict[str, list[pd.DataFrame]] = {}
    inventory = []
    for source in inputs.sources:
        frame, spec, file_problems, entry = _read_one(source, allowed_values(experiment))
        problems.extend(file_problems)
        inventory.append(entry)
        if frame is not None and spec is not None:
            parts.setdefault(spec.name, []).append(frame)

    tables = {}
    for name, frames in parts.items():
        table = pd.concat(frames, ignore_index=True)
        before = len(table)
        # The same session exported twice (e.g. per app and per session) must count once.
        table = table.drop_duplicates(subset=[c for c in table.columns if c != "_file"], ignore_index=True)
        if len(table) < before:
            problems.append(Problem(name, "", f"{before - len(table)} duplicate rows (the same data in "
                                    "two files) counted once", "info"))
        tables[name] = _convert_types(name, table)
    problems.extend(session_conflicts(tables))
    files = pd.DataFrame(inventory, columns=FILE_COLUMNS).astype({"rows": int, "rows_used": "Int64"})
    return Exports(tables, files, problems)


CONFLICT_KEYS = ("treatment", "associate_type", "label_setting")


def session_conflicts(tables: dict[str, pd.DataFrame]) -> list[Problem]:
    """A session whose treatment (associate type, label setting) differs between its decisions
    and another table: the files do not belong together, or one was edited. The analysis uses
    the decisions' values (a participant's answers are counted under them); the conflict is an
    error so that nobody reads the report without seeing it."""
    decisions = tables.get("decisions")
    if decisions is None or decisions.empty:
        return []
    problems = []
    for other_name in ("participants", "messages", "llm_calls"):
        other = tables.get(other_name)
        if other is None or other.empty:
            continue
        for key in CONFLICT_KEYS:
            if key not in other or key not in decisions:
                continue
            left = decisions.groupby("session_code")[key].agg(lambda v: ", ".join(sorted(set(v) - {""})))
            right = other[other[key] != ""].groupby("session_code")[key].agg(lambda v: ", ".join(sorted(set(v))))
            shared = left.index.intersection(right.index)
            for session in shared[(left[shared] != right[shared]).to_numpy()]:
                files = ", ".join(sorted(set(other.loc[other["session_code"] == session, "_file"])))
                problems.append(Problem(files, key, f"session {session}: {key} is {right[session]!r} in the "
                                        f"{other_name} but {left[session]!r} in the decisions — do the files "
                                        "belong to the same session? The decisions' value is used"))
    return problems


def from_otree_bot_export(folder: str | Path) -> Exports:
    """The exports ``otree test CONFIG N --export FOLDER`` wrote, plus any custom exports there.

    oTree writes its standard per-app and wide exports next to the custom ones; those are
    recognised and left out quietly. A folder without a decisions table is an error.
    """
    exports = load_exports(folder)
    if exports.decisions.empty:
        exports.problems.append(Problem(str(folder), "choice", "no decisions table among the bot "
                                        "exports: does the app define the custom export of DATA.md?"))
    return exports


def _parse_labels(name: str, frame: pd.DataFrame, column: str, parse, problems: list, what: str,
                  consequence: str) -> pd.Series:
    """``column`` read by ``parse``; each unreadable value (up to 10) named with its row in one warning."""
    parsed = frame[column].map(parse)
    unreadable = parsed == UNREADABLE
    if unreadable.any():
        problems.append(Problem(name, column, f"{unreadable.sum()} values {what}: "
                                + "; ".join(f"{_row(i)} {frame.at[i, column]!r}" for i in frame.index[unreadable][:10])
                                + (" …" if unreadable.sum() > 10 else "") + f" — {consequence}", "warning"))
    return parsed


def _read_one(source: CsvSource, allowed: dict = ALLOWED_VALUES
              ) -> tuple[pd.DataFrame | None, TableSpec | None, list[Problem], dict]:
    """The file's table (None: not analysed), its spec, its problems and its files-table entry."""
    name = source.name
    entry = {"file": name, "table": "", "rows": 0, "rows_used": None}
    try:
        data = source.read()
        text = data.decode("utf-8-sig")
        frame = pd.read_csv(io.StringIO(text, newline=""), dtype=str, keep_default_na=False)
        records = _records(text)
    except pd.errors.EmptyDataError:
        return None, None, [Problem(name, "", "empty file", "warning")], entry
    except (UnicodeDecodeError, pd.errors.ParserError, csv.Error) as error:
        return None, None, [Problem(name, "", f"not a readable UTF-8 CSV ({error})")], entry
    except OSError as error:
        return None, None, [Problem(name, "", f"cannot be read ({error})")], entry
    frame.columns = [str(c).strip() for c in frame.columns]
    entry["rows"] = len(records)
    spec = identify(frame.columns)
    if spec is None:
        kind = otree_export_kind(frame.columns)
        if kind:
            entry["table"] = kind
            return None, None, [], entry  # oTree's own export: recognised, listed in the files table only
        return None, None, [Problem(name, "", "not a table of DATA.md (no columns choice+game+round, "
                                    "text+stage, svo_angle, prompt_version or annotator): not used",
                                    "warning")], entry
    entry["table"] = spec.name
    missing_required = [c for c in spec.required if c not in frame.columns]
    if missing_required:
        entry["rows_used"] = 0
        return None, spec, [Problem(name, c, f"missing in the {spec.name} table: the file is not used")
                            for c in missing_required], entry
    problems = []
    positions, lines, last_is_short = _short_rows(records, len(frame.columns))
    if positions and len(positions) <= len(frame):
        where = ", ".join(f"line {line}" for line in lines[:5]) + (", …" if len(lines) > 5 else "")
        last = " — the file's end is cut off?" if last_is_short else ""
        problems.append(Problem(name, "", f"{len(positions)} rows have fewer fields than the header "
                                f"({where}){last}: rows not used"))
        frame = frame.drop(index=frame.index[positions])  # the index stays the row number for messages
    elif spec.name in PLATFORM_TABLES and not data.endswith((b"\n", b"\r")) and data:
        problems.append(Problem(name, "", "the file does not end with a line break: its last row may be cut "
                                "off (an interrupted download or copy?)", "warning"))
    missing_contract = [c for c in spec.contract if c not in frame.columns]
    for column in missing_contract:
        frame[column] = ""
    missing_contract = [c for c in missing_contract if c not in OPTIONAL_COLUMNS]
    if missing_contract:
        problems.append(Problem(name, ", ".join(missing_contract), f"missing in the {spec.name} table; "
                                "the parts of the report that need it have no data", "warning"))
    frame, value_problems = _check_values(name, spec, frame, allowed)
    frame["_file"] = name
    entry["rows_used"] = len(frame)
    return frame, spec, problems + value_problems, entry


def _records(text: str) -> list[tuple[int, int]]:
    """The file's data records (the header and blank lines aside, as pandas reads them): per
    record its number of fields and the line it ends on."""
    reader = csv.reader(io.StringIO(text, newline=""))
    next(reader, None)
    return [(len(record), reader.line_num) for record in reader if record]


def _short_rows(records: list[tuple[int, int]], fields: int) -> tuple[list[int], list[int], bool]:
    """Records with fewer fields than the header — a row cut off, which pandas would pad with
    blanks and read as partial answers: their positions among the data rows, their line numbers
    in the file, and whether the last record is one of them."""
    short = [(position, line) for position, (length, line) in enumerate(records) if length < fields]
    last_is_short = bool(records) and records[-1][0] < fields
    return [p for p, _ in short], [line for _, line in short], last_is_short


def _check_values(name: str, spec: TableSpec, frame: pd.DataFrame,
                  allowed: dict = ALLOWED_VALUES) -> tuple[pd.DataFrame, list[Problem]]:
    problems = []
    received = len(frame)
    if spec.name in ("annotations", "motives"):
        filled = frame["annotator"].str.strip() != ""
        if not filled.all():
            problems.append(Problem(name, "annotator", f"{(~filled).sum()} rows without an annotator id "
                                    "(an unfilled template?) not used", "warning"))
            frame = frame[filled]
    if spec.name in ("annotations", "motives"):
        unnamed = (frame["conversation_id"].str.strip() == "") & (frame["item"].str.strip() == "")
        if unnamed.any():
            problems.append(Problem(name, "item", f"{unnamed.sum()} rows name no conversation (neither `item` "
                                    f"nor `conversation_id`; {_rows(frame.index[unnamed])}): not used"))
            frame = frame[~unnamed]
        frame = _flag_repeated_annotators(name, frame, problems)
    if spec.name == "annotations":
        for column in LABEL_COLUMNS:
            parse = parse_agreement if column == "agreement" else parse_strategy
            frame[column] = _parse_labels(name, frame, column, parse, problems, "are not labels",
                                          "read as missing (the resolver decides when no annotator's value "
                                          "can be read)")
    if spec.name == "motives":
        for column in BREACH_CHECKS + MOTIVES:
            parse, what = ((parse_agreement, "are not 1/0 (yes/no, 是/否)") if column in BREACH_CHECKS else
                           (parse_motive, "are not ratings (whole numbers from −3 to 3)"))
            frame[column] = _parse_labels(name, frame, column, parse, problems, what, "read as missing, left out "
                                          "of the tests").replace(UNREADABLE, "")
    for column in VALUE_CHECKS.get(spec.name, ()):
        values = frame[column].str.strip()
        bad = ~values.isin(allowed[column])
        if spec.name == "messages" and column == "sender_kind":
            bad &= values != ""
        if bad.any():
            hint = " (a session from another app?)" if bad.all() and column == "treatment" else ""
            problems.append(Problem(name, column, f"{bad.sum()} of {len(frame)} rows have values outside "
                                    f"DATA.md ({_examples(frame.loc[bad, column])}){hint}: rows not used"))
            frame = frame[~bad]
    if spec.name == "decisions":
        rounds = pd.to_numeric(frame["round"], errors="coerce")
        bad = rounds.isna() | (rounds < 1)
        if bad.any():
            problems.append(Problem(name, "round", f"{bad.sum()} rows without a round number ≥ 1: not used"))
            frame = frame[~bad]
    if spec.name == "participants":
        for column in LIKERT_COLUMNS:
            values = pd.to_numeric(frame[column], errors="coerce")
            outside = values.notna() & ~values.between(protocol.LIKERT_MIN, protocol.LIKERT_MAX)
            if outside.any():
                problems.append(Problem(name, column, f"{outside.sum()} ratings outside "
                                        f"{protocol.LIKERT_MIN}..{protocol.LIKERT_MAX} read as missing",
                                        "warning"))
                frame.loc[outside, column] = ""
    if frame.empty and received == 0:
        # A header only: e.g. the model-call export of an H-H session. Nothing wrong.
        problems.append(Problem(name, "", f"the {spec.name} table has no rows", "info"))
    elif frame.empty:
        problems.append(Problem(name, "", f"no usable rows in the {spec.name} table", "warning"))
    return frame.copy(), problems


def _examples(values: pd.Series) -> str:
    distinct = [repr(v) for v in values.unique()[:3]]
    return ", ".join(distinct) + (", …" if values.nunique() > 3 else "")


def _convert_types(name: str, table: pd.DataFrame) -> pd.DataFrame:
    table = table.copy()
    numeric = {
        "decisions": ("round", "game_index", "payoff", "associate_payoff", "decided_at"),
        "messages": ("round", "stage", "stage_started_at", "sent_at"),
        "participants": ("quiz_attempts", "norm_estimate_WC", "norm_estimate_WoC", "norm_true_WC",
                         "norm_true_WoC", "llm_familiarity", "svo_angle", "age", "points_WC", "points_WoC",
                         "payout") + LIKERT_COLUMNS + tuple(f"svo_item_{i}" for i in range(1, 7)),
        "llm_calls": ("round_number", "attempt", "input_tokens", "output_tokens", "cost", "time_sent",
                      "time_first_byte", "time_done", "retries"),
        "motives": MOTIVES,
    }.get(name, ())
    booleans = {
        "decisions": ("timed_out",),
        "messages": ("sent_in_time",),
        "participants": ("norm_correct_WC", "norm_correct_WoC"),
        "annotations": ("agreement",),
        "motives": BREACH_CHECKS,
        "llm_calls": ("simulated",),
    }.get(name, ())
    for column in numeric:
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce")
    for column in booleans:
        if column in table:
            table[column] = to_bool(table[column])
    for column in table.columns:
        if column not in numeric and column not in booleans:
            table[column] = table[column].fillna("").astype(str).str.strip()
    return table
