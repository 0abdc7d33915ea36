"""docs/DATA.md's column tables, generated from lab/record/data_dictionary.py (the one place for column
descriptions): ``python -m lab.record.data_md`` rewrites them; tests/test_data_dictionary.py checks they
are current."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lab.record.data_dictionary import MANIFEST_KEYS, SESSION_KEYS, TABLES, Column
from lab.record.data_dictionary_otree import (APP_PLAYER_FIELDS, OTREE_BUILT_IN, OTREE_PARTICIPANT, OTREE_SESSION, PAGE_TIMES,
                                       config_columns)

DATA_MD = Path(__file__).resolve().parents[2] / "docs" / "DATA.md"
_BLOCK = re.compile(r"(<!-- generated: (\S+) .*?-->\n)(.*?)(<!-- end generated: \2 -->)", re.DOTALL)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _type_text(column: Column) -> str:
    parts = [column.type]
    if column.unit:
        parts.append(column.unit)
    return ", ".join(parts)


def markdown_columns(columns: dict, with_types: bool = True) -> str:
    lines = ["| column | type | meaning |", "|---|---|---|"]
    for name, column in columns.items():
        allowed = f" (values: {', '.join(f'`{v}`' for v in column.enum)})" if column.enum else ""
        lines.append(f"| `{name}` | {_type_text(column)} | {_cell(column.description)}{_cell(allowed)} |")
    return "\n".join(lines) + "\n"


def markdown_blocks() -> dict:
    """The generated parts of docs/DATA.md, by block name."""
    blocks = {name: markdown_columns({k: v for k, v in table.columns.items() if k not in SESSION_KEYS or
                                      name in ("quiz_attempts", "manifest", "interventions")})
              for name, table in TABLES.items()}
    blocks["session_keys"] = markdown_columns(SESSION_KEYS)
    blocks["manifest_keys"] = "| key | value |\n|---|---|\n" + "".join(
        f"| `{key}` | {_cell(text)} |\n" for key, text in MANIFEST_KEYS.items())
    blocks["page_times"] = markdown_columns(PAGE_TIMES)
    blocks["otree_participant"] = markdown_columns({f"participant.{k}": v for k, v in OTREE_PARTICIPANT.items()})
    blocks["otree_session"] = markdown_columns({f"session.{k}": v for k, v in OTREE_SESSION.items()})
    blocks["otree_config"] = markdown_columns({f"session.config.{k}": v for k, v in config_columns().items()})
    blocks["otree_built_in"] = markdown_columns({f"{model}.{k}": v for model, fields in OTREE_BUILT_IN.items()
                                                 for k, v in fields.items()})
    for app, fields in APP_PLAYER_FIELDS.items():
        blocks[f"app_{app}"] = markdown_columns({f"player.{k}": v for k, v in fields.items()})
    return blocks


def render_data_md(text: str) -> str:
    """docs/DATA.md's text with every generated block rewritten (unknown names left alone)."""
    blocks = markdown_blocks()

    def replace(match):
        body = blocks.get(match.group(2), match.group(3))
        return match.group(1) + body + match.group(4)

    return _BLOCK.sub(replace, text)


def main() -> int:
    old = DATA_MD.read_text(encoding="utf-8")
    new = render_data_md(old)
    if new != old:
        DATA_MD.write_text(new, encoding="utf-8")
        print(f"rewrote the generated tables of {DATA_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
