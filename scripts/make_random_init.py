#!/usr/bin/env python
"""Write a randomly initialised checkpoint with the config and tokenizer of another one: the
'no pretraining' baseline, fine-tuned through the same scripts as the pretrained model.

    python scripts/make_random_init.py SOURCE_CHECKPOINT OUT_DIR [--seed 0]
"""

from __future__ import annotations

import argparse

from modeling.cli import UsageError, main_guard


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="checkpoint folder (config.json + tokenizer)")
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    args = parser.parse_args(argv)
    from pathlib import Path

    if not (Path(args.source) / "config.json").is_file():
        raise UsageError(f"{args.source}: no config.json (not a checkpoint folder)")
    from recipes.reproduce import write_random_init

    print(write_random_init(args.source, args.out_dir, args.seed))


if __name__ == "__main__":
    main_guard(main)
