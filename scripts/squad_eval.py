#!/usr/bin/env python
"""Evaluate a SQuAD predictions file exactly as the official evaluation scripts do.

    python scripts/squad_eval.py DATA_FILE PRED_FILE [--na-prob-file null_odds.json]
        [--na-prob-thresh T] [--out-file eval.json] [--version {auto,1.1,2.0}]

Prints the JSON the official script prints: ``evaluate-v1.1.py`` for a version "1.1" data file
(``exact_match``, ``f1``), ``evaluate-v2.0.py`` otherwise (``exact``, ``f1``, ``total``,
``HasAns_*``, ``NoAns_*`` and, with ``--na-prob-file``, ``best_exact``/``best_f1`` and their
thresholds). The flags are the official scripts' own.
"""

from __future__ import annotations

import argparse
import json
import sys

from modeling.cli import UsageError, main_guard


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data_file", help="official SQuAD JSON (FILE[a:b] keeps articles a..b-1)")
    p.add_argument("pred_file", help="predictions JSON: {question id: answer text}")
    p.add_argument("--na-prob-file", "-n", help="no-answer scores per id (e.g. null_odds.json)")
    p.add_argument(
        "--na-prob-thresh",
        "-t",
        type=float,
        default=1.0,
        help='predict "" where the no-answer score exceeds this (official default 1.0)',
    )
    p.add_argument("--out-file", "-o", help="write the metrics here instead of stdout")
    p.add_argument(
        "--version",
        choices=["auto", "1.1", "2.0"],
        default="auto",
        help="which official script to follow (auto: by the data file's version)",
    )
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse(argv)
    from modeling import atomic
    from recipes.squad import metrics as squad_metrics
    from recipes.squad.data import load_squad_file, read_json_object

    data, version = load_squad_file(args.data_file)
    preds = read_json_object(args.pred_file, "predictions file")
    bad = [k for k, v in preds.items() if not isinstance(v, str)]
    if bad:
        raise UsageError(f"{args.pred_file}: answer for {bad[0]!r} is not a string")
    use_v1 = args.version == "1.1" or (args.version == "auto" and version == "1.1")
    try:
        if use_v1:
            if version != "1.1":
                print(
                    f"Evaluation expects v-1.1, but got dataset with v-{version}", file=sys.stderr
                )
            missing = sum(1 for qa in squad_metrics.iter_questions(data) if qa["id"] not in preds)
            if missing:
                print(f"{missing} unanswered questions will receive score 0.", file=sys.stderr)
            result = squad_metrics.evaluate_v1(data, preds)
        else:
            na_probs = (
                read_json_object(args.na_prob_file, "no-answer file") if args.na_prob_file else None
            )
            result = squad_metrics.evaluate_v2(data, preds, na_probs, args.na_prob_thresh)
    except ValueError as err:
        raise UsageError(f"{args.pred_file}: {err}") from None
    if args.out_file:
        atomic.write_json(args.out_file, result, indent=None)
    else:
        print(json.dumps(result) if use_v1 else json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main_guard(main)
