#!/usr/bin/env python
"""Create BERT pretraining data (MLM + NSP/SOP/none) as Arrow shards.

Example (the Wikipedia sample, 128 tokens, dynamic masking, 2 processes):

    python scripts/create_pretraining_data.py \
        --input ../shared/data/wikipedia/wiki_* \
        --tokenizer path/to/tokenizer_folder --output data/wiki128 \
        --max_seq_length 128 --num_proc 2 --num_validation_docs 500

The logic lives in ``modeling.pretraining_data``; this file only parses arguments.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--input",
        nargs="+",
        required=True,
        help="input files or glob patterns (a Hub dataset name with --input_format hub)",
    )
    p.add_argument("--output", required=True, help="output folder (written atomically)")
    p.add_argument(
        "--tokenizer",
        required=True,
        help="tokenizer folder or name for AutoTokenizer.from_pretrained",
    )
    p.add_argument(
        "--input_format", default="auto", choices=["auto", "text", "wikiextractor", "jsonl", "hub"]
    )
    p.add_argument("--text_field", default="text", help="text field of jsonl/hub records")
    p.add_argument("--sentence_splitter", default="rules", choices=["rules", "line"])
    p.add_argument(
        "--on_decode_error",
        default="error",
        choices=["error", "skip"],
        help="non-UTF-8 lines: stop with an error, or skip and count them",
    )
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--short_seq_prob", type=float, default=0.1)
    p.add_argument("--sentence_task", default="nsp", choices=["nsp", "sop", "none"])
    p.add_argument("--masking", default="dynamic", choices=["dynamic", "static"])
    p.add_argument(
        "--masking_strategy",
        default="token",
        choices=["token", "whole_word", "span"],
        help="strategy for static masking",
    )
    p.add_argument("--mlm_probability", type=float, default=0.15, help="share of tokens masked")
    p.add_argument(  # Google's name, kept so that existing command lines still work
        "--masked_lm_prob", dest="mlm_probability", type=float, help=argparse.SUPPRESS
    )
    p.add_argument("--mask_replace_prob", type=float, default=0.8)
    p.add_argument("--random_replace_prob", type=float, default=0.1)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument(
        "--dupe_factor",
        type=int,
        default=None,
        help="copies of the data (default 10 for static masking, 1 for dynamic)",
    )
    p.add_argument(
        "--min_doc_sentences",
        type=int,
        default=1,
        help="skip documents with fewer sentences (1 = keep all, as Google)",
    )
    val = p.add_mutually_exclusive_group()
    val.add_argument("--validation_fraction", type=float, default=0.0)
    val.add_argument("--num_validation_docs", type=int, default=0)
    p.add_argument("--num_shards", type=int, default=None)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--num_proc", type=int, default=1)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--no_progress", action="store_true")
    args = p.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    if any(a.split("=")[0] == "--masked_lm_prob" for a in given):
        print("warning: --masked_lm_prob is deprecated, use --mlm_probability", file=sys.stderr)
    return args


def expand_inputs(patterns: list[str], input_format: str) -> list[str]:
    if input_format == "hub":
        return patterns
    files: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern))
        files.extend(matches or [pattern])
    return files


def main(argv=None) -> int:
    args = parse_args(argv)
    from modeling.corpus import CorpusError
    from modeling.pretraining_data import PretrainingDataError, create_pretraining_data

    settings = {
        k: v
        for k, v in vars(args).items()
        if k not in ("input", "output", "tokenizer", "num_proc", "overwrite", "no_progress")
    }
    try:
        meta = create_pretraining_data(
            expand_inputs(args.input, args.input_format),
            args.output,
            args.tokenizer,
            num_proc=args.num_proc,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            **settings,
        )
    except (CorpusError, PretrainingDataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(meta["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
