#!/usr/bin/env python
"""Train a WordPiece vocabulary (BERT normaliser and pre-tokeniser) with `tokenizers`.

    python scripts/train_tokenizer.py --input ../shared/data/wikipedia/wiki_* \
        --output tokenizers/wiki-wp8k --vocab_size 8000

The folder it writes is a stock ``BertTokenizer`` one: ``AutoTokenizer.from_pretrained(output)``
loads it in transformers 4 and 5, the slow tokenizer reads its ``vocab.txt``.
"""

from __future__ import annotations

import argparse
import glob
import sys


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", nargs="+", required=True, help="text files or glob patterns")
    p.add_argument("--output", required=True, help="output tokenizer folder")
    p.add_argument("--vocab_size", type=int, default=30522)
    p.add_argument("--min_frequency", type=int, default=2)
    p.add_argument("--cased", action="store_true", help="keep case and accents")
    p.add_argument(
        "--input_format", default="auto", choices=["auto", "text", "wikiextractor", "jsonl"]
    )
    p.add_argument("--text_field", default="text")
    p.add_argument("--model_max_length", type=int, default=512)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from modeling.corpus import CorpusError
    from modeling.tokenizer_training import train_wordpiece

    files = [f for pattern in args.input for f in (sorted(glob.glob(pattern)) or [pattern])]
    try:
        tok = train_wordpiece(
            files,
            args.output,
            vocab_size=args.vocab_size,
            min_frequency=args.min_frequency,
            lowercase=not args.cased,
            input_format=args.input_format,
            text_field=args.text_field,
            model_max_length=args.model_max_length,
        )
    except (CorpusError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"saved a WordPiece tokenizer with {len(tok)} tokens to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
