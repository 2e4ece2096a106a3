#!/usr/bin/env python
"""Build pretraining data on the fly from raw text several times, each in a fresh process, with
identical arguments, and print what each build gave (train sequences, vocabulary digest).

    python benchmarks/data_determinism.py [--runs 3] [--corpus recipes/bert-tiny/corpus.txt]

Equal lines mean the same arguments build the same data.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_once(corpus: str, vocab_size: int, out: str) -> dict:
    code = f"""
import hashlib, json
try:
    from modeling.phases import resolve_data
    from modeling.pretraining_args import PretrainingArguments
except ImportError:  # the layout before modeling/pretraining.py was split
    from modeling.pretraining import PretrainingArguments, resolve_data
from modeling.pretraining_data import load_pretraining_dataset
args = PretrainingArguments(train_data=[{corpus!r}], max_seq_length=[64], num_validation_docs=2,
                            tokenizer_vocab_size={vocab_size}, output_dir={out!r}, max_steps=2)
(folder,) = resolve_data(args)
ds = load_pretraining_dataset(folder, "train")
vocab = json.loads((folder / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
print(json.dumps({{"sequences": len(ds),
                  "data": hashlib.sha256(json.dumps(list(ds["input_ids"])).encode()).hexdigest()[:12],
                  "vocab": hashlib.sha256(json.dumps(sorted(vocab.items())).encode()).hexdigest()[:12]}}))
"""
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=out
    )  # cwd: the code under test comes from PYTHONPATH, not from the current folder
    if proc.returncode:
        sys.exit(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--corpus", default=str(REPO / "recipes" / "bert-tiny" / "corpus.txt"))
    p.add_argument("--vocab_size", type=int, default=300)
    args = p.parse_args()
    results = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(build_once(args.corpus, args.vocab_size, tmp))
        print(f"run {i}: {results[-1]}", flush=True)
    same = len({json.dumps(r, sort_keys=True) for r in results}) == 1
    digest = hashlib.sha256(json.dumps(results).encode()).hexdigest()[:8]
    print(f"identical: {same} ({args.runs} runs, {digest})")


if __name__ == "__main__":
    main()
