#!/usr/bin/env python
"""Peak memory (RSS) and time of featurising a SQuAD train file through the recipe's path.

    /usr/bin/time -v python benchmarks/featurise_squad_rss.py MODEL \
        ../shared/data/squad/train-v1.1.json --cache_dir /tmp/squad_cache

Runs what ``scripts/run_squad.py --do_train`` runs before training (rows -> ``datasets`` ->
windows through the runner's cached ``.map(batched=True)``) and prints questions, windows,
seconds and the peak RSS of this process. Run it twice with the same ``--cache_dir``: the
second launch reads the windows back instead of tokenising.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None):
    import argparse

    from recipes import runner
    from recipes.squad.recipe import SquadRecipe

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("train_file")
    p.add_argument("--cache_dir", required=True)
    p.add_argument("--max_seq_length", default="384")
    ns = p.parse_args(argv)
    task = SquadRecipe()
    args = runner.parse_args(
        task,
        ["--model_name_or_path", ns.model, "--train_file", ns.train_file, "--do_train",
         "--max_seq_length", ns.max_seq_length, "--cache_dir", ns.cache_dir,
         "--output_dir", str(Path(ns.cache_dir) / "unused")],
    )  # fmt: skip
    tokenizer = runner.load_tokenizer(args.model)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    data = runner.load_data(task, args, tokenizer, runner.read_raw(task, args))
    ((rows, windows),) = data.get("train").values()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"questions {len(rows)} windows {len(windows)} seconds {time.perf_counter() - start:.1f} "
        f"rss_before_MiB {base:.0f} peak_rss_MiB {peak:.0f}"
    )


if __name__ == "__main__":
    main()
