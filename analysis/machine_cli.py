"""``python -m analysis annotate REPORT_DIR --provider P [--model M] …``: machine annotation of
the blind template.

The model sees exactly what the human annotators see: the template's opaque item ids and the four
anonymised messages, in the template's order. The rows come back under ``annotator =
machine:<model>`` with the template's item ids; the next run of the analysis joins them through
the key, uses them only for conversations no human annotated, and reports Cohen's kappa of the
machine's labels against the resolved human labels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from analysis import annotation

EXIT_BAD_INPUT = 2


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis annotate", description=(
        "Label the conversations of a report's blind annotation template with an LLM (SI Note 2's "
        "columns). The API key is read from the environment variable named by --api-key-env (the "
        "provider's usual one by default)."))
    parser.add_argument("report", help="the report folder holding annotation_template.csv (or the template)")
    parser.add_argument("--provider", required=True,
                        help="openai | anthropic | gemini | openai_compatible | simulated")
    parser.add_argument("--model", default="", help="the model name as the provider spells it (default: the "
                        "provider's default in agents/config.py)")
    parser.add_argument("--base-url", default=None, help="openai_compatible: the server's URL (…/v1)")
    parser.add_argument("--api-key-env", default=None, help="NAME of the environment variable with the key")
    parser.add_argument("--temperature", type=float, default=0.0, help="default 0: labels should not vary")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per conversation (default 120)")
    parser.add_argument("--concurrency", type=int, default=4, help="conversations in flight (default 4)")
    parser.add_argument("--out", default=None, help="the CSV to write (default: REPORT/annotations_machine.csv)")
    args = parser.parse_args(argv)

    source = Path(args.report)
    template_path = source / annotation.TEMPLATE_NAME if source.is_dir() else source
    if not template_path.is_file():
        print(f"error: no annotation template at {template_path} — run `python -m analysis EXPORTS --out "
              f"{args.report}` first", file=sys.stderr)
        return EXIT_BAD_INPUT
    template = pd.read_csv(template_path, dtype=str, keep_default_na=False)
    if annotation.ITEM not in template:
        print(f"error: {template_path} has no `item` column: not a blind template", file=sys.stderr)
        return EXIT_BAD_INPUT

    from agents.config import ConfigError, ModelConfig  # lazy: the analysis works without agents
    from agents.models import build_model

    fields = {"provider": args.provider, "model": args.model, "temperature": args.temperature,
              "base_url": args.base_url, "api_key_env": args.api_key_env}
    try:
        config = ModelConfig.build(**{k: v for k, v in fields.items() if v not in (None, "")})
        model = build_model(config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    rows = annotation.machine_annotate(template, model=model, timeout_seconds=args.timeout,
                                       concurrency=args.concurrency)
    out = Path(args.out) if args.out else template_path.with_name(annotation.MACHINE_FILE_NAME)
    rows.to_csv(out, index=False, encoding="utf-8")
    unusable = int((rows["machine_note"] != "").sum())
    print(f"{len(rows)} conversations labelled by {rows['annotator'].iloc[0] if len(rows) else config.model}"
          f" ({unusable} replies without usable labels): {out}")
    print(f"next: python -m analysis EXPORTS {out} --out {template_path.parent}  "
          "(machine labels fill conversations no human annotated; the report gives their kappa against "
          "the human labels)")
    if len(rows) and unusable == len(rows):
        notes = ", ".join(sorted(set(rows["machine_note"])))
        print(f"error: no reply held usable labels ({notes}); the simulated provider plays the game and "
              "does not annotate", file=sys.stderr)
        return 1
    return 0
