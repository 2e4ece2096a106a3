"""Write a small sentence-pair task in GLUE's MRPC format from a corpus in Google's format.

    python scripts/make_demo_pairs.py CORPUS OUT_DIR [--seed 0] [--dev_fraction 0.25]

Label 1: sentence B follows sentence A in the same document; label 0: B is a sentence from
another document. The demo fine-tunes the freshly pretrained checkpoint on it with
``scripts/run_glue.py --task_name mrpc --data_dir OUT_DIR``, so the whole path (pretraining ->
``save_pretrained`` -> recipe) runs without any external data.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


def read_documents(path: Path) -> list[list[str]]:
    docs, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            docs.append(current)
            current = []
    if current:
        docs.append(current)
    return docs


def make_pairs(docs: list[list[str]], rng: random.Random) -> list[tuple[int, str, str]]:
    pairs = []
    for d, doc in enumerate(docs):
        others = [s for o, other in enumerate(docs) if o != d for s in other]
        for a, b in zip(doc, doc[1:]):
            pairs.append((1, a, b))
            pairs.append((0, a, rng.choice(others)))
    rng.shuffle(pairs)
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dev_fraction", type=float, default=0.25)
    args = parser.parse_args()
    if not args.corpus.is_file():
        parser.error(f"corpus {args.corpus} not found")
    docs = read_documents(args.corpus)
    if len(docs) < 2:
        parser.error(f"{args.corpus}: need at least two documents (blank-line separated)")
    pairs = make_pairs(docs, random.Random(args.seed))
    n_dev = max(1, int(len(pairs) * args.dev_fraction))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("dev.tsv", pairs[:n_dev]), ("train.tsv", pairs[n_dev:])):
        lines = [f"{label}\t{i}\t{i + 1}\t{a}\t{b}\n" for i, (label, a, b) in enumerate(rows)]
        (args.out_dir / name).write_text(HEADER + "".join(lines), encoding="utf-8")
    print(f"{len(pairs) - n_dev} train / {n_dev} dev pairs in {args.out_dir}")


if __name__ == "__main__":
    main()
