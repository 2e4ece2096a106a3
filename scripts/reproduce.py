#!/usr/bin/env python
"""Run a reproduction suite end to end: stages (data, pretraining), then every task x init x
learning rate x seed through the fine-tuning scripts; write results.json, RESULTS.md, a PNG.

    python scripts/reproduce.py --suite recipes/reproduce/cpu-mini.yaml
    python scripts/reproduce.py --suite recipes/reproduce/bert-base-paper.yaml --dry_run \\
        --var checkpoint=path/to/our/model

Rerunning the same command resumes: finished steps are kept, a killed one restarts from its
last checkpoint. See recipes/reproduce/ for the suite format.
"""

from __future__ import annotations

import argparse
import logging

from modeling.cli import UsageError, main_guard


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", required=True, help="suite YAML (recipes/reproduce/*.yaml)")
    parser.add_argument("--output_dir", default=None, help="default: the suite's output_dir")
    parser.add_argument(
        "--var", action="append", default=[], metavar="KEY=VALUE", help="override a suite var"
    )
    parser.add_argument(
        "--dry_run", action="store_true", help="print every stage and cell with its command"
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="run nothing: write results.json, RESULTS.md and the PNG from the runs finished so "
        "far (safe beside a running study)",
    )
    parser.add_argument(
        "--in_process", action="store_true", help="run the scripts in this process (tests)"
    )
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.var:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--var {item!r}: expected KEY=VALUE")
        overrides[key] = value
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="INFO")
    from recipes.reproduce import RunnerError, SuiteError, load_suite, run_suite

    try:
        suite = load_suite(args.suite, overrides, args.output_dir)
        return run_suite(
            suite, dry_run=args.dry_run, in_process=args.in_process, report_only=args.report
        )
    except (SuiteError, RunnerError) as err:
        raise UsageError(str(err)) from None


if __name__ == "__main__":
    main_guard(main)
