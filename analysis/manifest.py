"""Session manifests in an export folder: read them, print them, refuse to pool protocols that differ.

Every export carries a manifest per session (docs/DATA.md 'manifest'): the CSV custom export
``manifest`` (columns session_code, key, value; the value is JSON; from manifest_version 2 a
fourth column value_at_export) and, in a data package, the same as ``manifest_<code>.json``.
Version 2 records are frozen at session creation; the analysis compares those frozen values
only, never what the code of the day of the export would record (value_at_export), and says
which sessions have no frozen record (version 1, or created before the freeze). Sessions are poolable when
their *protocols* agree: the participants' language, stage limits, rounds, message limit,
payoff table, payment, the prompts' hash and, between agent sessions, the model settings.
Treatment keys (associate type, label setting, game order) differ on purpose and are not
compared; nor are software versions, which are reported but do not block. Sessions of different
experiments (the manifest's ``experiment``: its design hash; a manifest without one ran the
paper's, experiments/paper.toml) are never pooled, not even with --allow-mixed-protocols.
"""

from __future__ import annotations

import csv
import functools
import io
import json
from pathlib import Path

import experiment_design as ed

from analysis.inputs import collect
from lab.record.manifest import FROZEN

# What makes two sessions the same experiment (manifest keys).
PROTOCOL_KEYS = ("stage_limits", "rounds_per_game", "message_max_chars", "payoff_table", "payment", "prompts_sha256")
AGENT_PROTOCOL_KEYS = ("model_settings",)
# ... and of the session config: in another language the participants read other instructions
# and chat in another language, and the agents get other prompts (the prompts' hash covers both
# languages' templates, so it cannot tell).
SESSION_CONFIG_PROTOCOL_KEYS = ("language",)
# Model settings that do not change what the agents do (throughput, retries, prices).
MODEL_KEYS_NOT_PROTOCOL = {"request_timeout", "max_retries", "retry_base_delay", "retry_max_delay", "concurrency",
                           "requests_per_minute", "price_input_per_mtok", "price_output_per_mtok", "api_key_env",
                           "base_url"}


MANIFEST_COLUMNS = ("session_code", "key", "value")
AT_EXPORT = "value_at_export"


class MixedProtocols(Exception):
    """Sessions whose protocols differ were asked to be pooled."""


class MixedExperiments(MixedProtocols):
    """Sessions of different experiments were asked to be pooled: never."""


PAPER = "paper"


@functools.lru_cache(maxsize=1)
def _paper_design_hash() -> str:
    return ed.load(ed.EXPERIMENTS_DIR / f"{PAPER}.toml").canonical_hash


def experiment_of(manifest: dict) -> tuple[str, str | None]:
    """(name, design hash) of the session's experiment: the manifest's record, or the paper's for a
    session recorded before experiment files (its design was the paper's). The hash is None when
    the record says the file could not be read."""
    record = manifest.get("experiment")
    if not isinstance(record, dict):
        return PAPER, _paper_design_hash()
    return str(record.get("name") or "?"), record.get("design_sha256")


def sessions_experiment(manifests: dict[str, dict]) -> ed.Experiment:
    """The one experiment the sessions ran (after ``check_poolable``): from the text its record
    keeps, or the paper's without a record (or without manifests). ValueError when the record
    keeps no text to read it from."""
    records = [m.get("experiment") for m in manifests.values() if isinstance(m.get("experiment"), dict)]
    if not records:
        return ed.load(ed.EXPERIMENTS_DIR / f"{PAPER}.toml")
    record = records[0]
    if not record.get("text"):
        raise ValueError(f"the record of experiment {record.get('name')!r} keeps no text to read its design from"
                         + (f" ({record['error']})" if record.get("error") else ""))
    return ed.load_text(record["text"], record["name"])


def experiment_differences(manifests: dict[str, dict]) -> list[str]:
    """One line naming which sessions ran which experiment when they ran more than one (by design
    hash: a comment or a file's name does not make another experiment); empty: one experiment."""
    if len(manifests) < 2:
        return []
    experiments = {code: experiment_of(m) for code, m in manifests.items()}
    designs = {design for _, design in experiments.values()}
    if len(designs) == 1 and None not in designs:
        return []
    return ["experiment: " + _sessions_by_value(
        {code: f"{name} (design {design[:12] if design else 'unreadable'})"
         for code, (name, design) in experiments.items()})]


def load_manifests(paths) -> dict[str, dict]:
    """Every session's manifest found in the inputs (folders, data packages, CSV files:
    analysis/inputs.py), by session code."""
    manifests: dict[str, dict] = {}
    for source in collect(paths).sources:
        try:
            reader = csv.DictReader(io.StringIO(source.read().decode("utf-8-sig"), newline=""))
            if set(reader.fieldnames or ()) not in (set(MANIFEST_COLUMNS), set(MANIFEST_COLUMNS) | {AT_EXPORT}):
                continue
            for row in reader:
                manifest = manifests.setdefault(row["session_code"], {})
                manifest[row["key"]] = _json_or_text(row["value"])
                if row.get(AT_EXPORT):  # version 2: what today's code would record instead
                    manifest.setdefault("differs_at_export", {})[row["key"]] = _json_or_text(row[AT_EXPORT])
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
    return manifests


def _json_or_text(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def is_frozen(manifest: dict) -> bool:
    """The manifest is the record frozen at session creation (version 2), not computed at export."""
    return manifest.get("provenance") == FROZEN


def protocol_of(manifest: dict) -> dict:
    protocol = {key: manifest.get(key) for key in PROTOCOL_KEYS}
    config = manifest.get("session_config") or {}
    protocol.update({key: config.get(key) for key in SESSION_CONFIG_PROTOCOL_KEYS})
    model = manifest.get("model_settings")
    if model:
        protocol["model_settings"] = {k: v for k, v in model.items() if k not in MODEL_KEYS_NOT_PROTOCOL}
    return protocol


def _text(value) -> str:
    return "(none)" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _sessions_by_value(values: dict[str, object]) -> str:
    """'"en" in s1, s2; "zh_hans" in s3'."""
    by_value: dict[str, list[str]] = {}
    for code, value in values.items():
        by_value.setdefault(_text(value), []).append(code)
    return "; ".join(f"{value} in {', '.join(sorted(codes))}" for value, codes in sorted(by_value.items()))


def protocol_differences(manifests: dict[str, dict]) -> list[str]:
    """What differs between the sessions' protocols, one line per protocol key, naming which
    sessions have which value (of a table such as the stage limits, only its entries that differ);
    empty: poolable."""
    if len(manifests) < 2:
        return []
    protocols = {code: protocol_of(m) for code, m in manifests.items()}
    differences = []
    for key in SESSION_CONFIG_PROTOCOL_KEYS + PROTOCOL_KEYS + AGENT_PROTOCOL_KEYS:
        values = {code: p.get(key) for code, p in protocols.items() if key in p}
        if len({_text(v) for v in values.values()}) < 2:
            continue
        if all(isinstance(v, dict) for v in values.values()):
            entries = sorted({entry for v in values.values() for entry in v})
            differences.append(" | ".join(
                f"{key}.{entry}: {_sessions_by_value({code: v.get(entry) for code, v in values.items()})}"
                for entry in entries if len({_text(v.get(entry)) for v in values.values()}) > 1))
        else:
            differences.append(f"{key}: {_sessions_by_value(values)}")
    return differences


def check_poolable(manifests: dict[str, dict], *, allow_mixed: bool = False) -> list[str]:
    """Raise MixedProtocols (one line) when the protocols differ, unless ``allow_mixed``; return
    the differences. Raise MixedExperiments when the sessions ran different experiments, always."""
    mixed_experiments = experiment_differences(manifests)
    if mixed_experiments:
        raise MixedExperiments(
            "the sessions ran different experiments, which are never pooled (" + " | ".join(mixed_experiments)
            + "): analyse each experiment's sessions on their own")
    differences = protocol_differences(manifests)
    if differences and not allow_mixed:
        raise MixedProtocols(
            "the sessions' protocols differ, so pooling them would mix experiments (" + " | ".join(differences)
            + "): analyse each protocol's sessions on their own, or pass --allow-mixed-protocols to pool them")
    return differences


def summary_lines(manifests: dict[str, dict]) -> list[str]:
    """One line per session: code, treatment, software, rounds, prompts, model, times, and whether
    the record is frozen (and what today's code would record differently)."""
    lines = []
    for code, m in sorted(manifests.items()):
        if is_frozen(m):
            differs = sorted(m.get("differs_at_export") or {})
            provenance = "frozen at creation" + (f"; today's code differs in {', '.join(differs)}" if differs else "")
        else:
            provenance = "NOT FROZEN: computed at export (the session predates the freeze)"
        packages = m.get("packages") or {}
        model = m.get("model_settings") or {}
        model_text = f"{model.get('provider', '')}/{model.get('model', '')}" if model else "no agents"
        lines.append(
            f"{code}: {m.get('treatment', '?')}, {m.get('num_participants', '?')} participants, "
            f"{m.get('rounds_per_game', '?')} rounds, project {str(m.get('project_version', '?'))[:12]}, "
            f"oTree {packages.get('otree', '?')}, prompts {str(m.get('prompts_sha256', '?'))[:12]}, "
            f"model {model_text}, {_time(m.get('started_at'))} – {_time(m.get('ended_at'))}; {provenance}")
    return lines


def _time(epoch) -> str:
    if not epoch:
        return "?"
    from datetime import datetime, timezone

    return datetime.fromtimestamp(float(epoch), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def report_html(manifests: dict[str, dict], differences: list[str]) -> str:
    """The manifest section of report.html."""
    import html

    if not manifests:
        return ("<h2 id='manifest'>Manifest</h2><p class='warning'>No manifest in the exports (exports made "
                "before manifests existed, or the 'manifest' custom export was not downloaded).</p>")
    parts = ["<h2 id='manifest'>Manifest</h2><ul>"]
    parts += [f"<li>{html.escape(line)}</li>" for line in summary_lines(manifests)]
    parts.append("</ul>")
    unfrozen = sorted(code for code, m in manifests.items() if not is_frozen(m))
    if unfrozen:
        parts.append("<p class='warning'>Not frozen at creation (computed when exported, so software, prompts and "
                     f"model settings are those of the export's day): {html.escape(', '.join(unfrozen))}</p>")
    if differences:
        parts.append("<p class='warning'>Pooled although the protocols differ (--allow-mixed-protocols):</p><ul>"
                     + "".join(f"<li class='warning'>{html.escape(d)}</li>" for d in differences) + "</ul>")
    else:
        parts.append("<p class='note'>All sessions share one protocol.</p>")
    for code, m in sorted(manifests.items()):
        parts.append(f"<details><summary>{html.escape(code)}: the full manifest</summary><pre>"
                     f"{html.escape(json.dumps(m, indent=2, sort_keys=True, ensure_ascii=False))}</pre></details>")
    return "".join(parts)


def add_to_report(report_path: Path, manifests: dict[str, dict], differences: list[str]) -> None:
    """Insert the manifest section into report.html, after its title."""
    path = Path(report_path)
    text = path.read_text(encoding="utf-8")
    section = report_html(manifests, differences)
    marker = "</h1>"
    text = text.replace(marker, marker + section, 1) if marker in text else text.replace("</body>", section + "</body>")
    path.write_text(text, encoding="utf-8")
