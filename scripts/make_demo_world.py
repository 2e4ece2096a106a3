#!/usr/bin/env python
"""Generate the demo's corpus and downstream task: a made-up world of creatures (see
recipes/synthetic_world.py), deterministic for a seed.

    python scripts/make_demo_world.py OUT_DIR [--seed 0] [--num_entities 150]

Writes OUT_DIR/corpus.txt (one sentence per line, blank line between documents),
OUT_DIR/task/{train,dev}.tsv (SST-2 layout: is the creature named in the sentence dangerous (0)
or harmless (1)? train and dev name disjoint creatures) and OUT_DIR/world.tsv (the answers).
"""

from __future__ import annotations

import argparse
import json

from recipes.synthetic_world import write_world


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_entities", type=int, default=150)
    parser.add_argument("--docs_per_entity", type=int, default=6)
    parser.add_argument("--sentences_per_doc", type=int, default=9)
    parser.add_argument("--dev_fraction", type=float, default=0.3)
    args = parser.parse_args(argv)
    if args.num_entities < 4 or args.docs_per_entity < 1 or args.sentences_per_doc < 2:
        parser.error("need --num_entities >= 4, --docs_per_entity >= 1, --sentences_per_doc >= 2")
    if not 0 < args.dev_fraction < 1:
        parser.error(f"--dev_fraction must be in (0, 1), got {args.dev_fraction}")
    info = write_world(
        args.out_dir,
        seed=args.seed,
        num_entities=args.num_entities,
        docs_per_entity=args.docs_per_entity,
        sentences_per_doc=args.sentences_per_doc,
        dev_fraction=args.dev_fraction,
        task_sentences_per_entity=8,
    )
    print(json.dumps(info))
    return info


if __name__ == "__main__":
    main()
