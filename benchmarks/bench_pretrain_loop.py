"""The whole pretraining loop in fp32 and in bf16, side by side: tokens/s and held-out loss.

    python benchmarks/bench_pretrain_loop.py --data outputs/data/wiki128 --output outputs/bench-loop

Two runs of ``scripts/pretrain.py`` with the same recipe, seed and data, differing only in
``--mixed_precision`` (``no`` vs ``bf16``). They alternate in chunks of ``--chunk`` steps
(``--stop_at_step`` then ``--resume_from_checkpoint auto``; resuming is exact), so load from
other processes on a shared machine hits both alike. Printed: median tokens/s of the
``logging_steps`` windows (from each run's ``log.jsonl``), their ratio, and the held-out MLM loss
and accuracy (first ``max_eval_samples`` held-out sequences, fixed masks) at every turn. Model: BERT-mini (L=4/H=256/A=4) unless overridden with
``--extra`` (any further ``scripts/pretrain.py`` flags).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

RECIPE = dict(
    hidden_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=1024,
    train_batch_size=[8],
    optim="adamw",
    learning_rate=1e-3,
    lr_scheduler_type="bert",
    warmup_steps=30,
    weight_decay=0.01,
    adam_epsilon=1e-6,
    max_grad_norm=1.0,
    seed=42,
    save_steps=0,
    save_total_limit=1,
    logging_steps=10,
    max_eval_samples=256,
    disable_tqdm=True,
)


def run_chunk(recipe: Path, out: Path, precision: str, stop: int, extra: list[str]) -> float:
    cmd = [sys.executable, str(REPO / "scripts" / "pretrain.py"), "--config", str(recipe),
           "--output_dir", str(out), "--mixed_precision", precision,
           "--resume_from_checkpoint", "auto", *extra]  # fmt: skip
    if stop is not None:
        cmd += ["--stop_at_step", str(stop)]
    start = time.perf_counter()
    with open(out.with_suffix(".log"), "a") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    return time.perf_counter() - start


def summary(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    train = [r for r in rows if "tokens_per_second" in r]
    evals = {r["step"]: (r["eval_mlm_loss"], r["eval_mlm_accuracy"]) for r in rows
             if "eval_mlm_loss" in r}  # fmt: skip
    return {
        "tokens_per_second": statistics.median(r["tokens_per_second"] for r in train),
        "mfu": statistics.median(r["mfu"] for r in train),
        "train_loss_last": train[-1]["loss"],
        "eval": evals,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="a create_pretraining_data.py folder")
    parser.add_argument("--output", default="outputs/bench-loop")
    parser.add_argument("--max_steps", type=int, default=300)
    parser.add_argument("--chunk", type=int, default=50, help="steps per turn")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more flags")
    args = parser.parse_args()

    root = Path(args.output).resolve()
    root.mkdir(parents=True, exist_ok=True)
    recipe = root / "recipe.yaml"
    settings = dict(RECIPE, train_data=[str(Path(args.data).resolve())], max_steps=args.max_steps)
    settings["eval_steps"] = args.chunk  # held-out loss at every turn: comparable at any stop
    recipe.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    runs = {"fp32": root / "fp32", "bf16": root / "bf16"}
    precision = {"fp32": "no", "bf16": "bf16"}
    wall = {name: 0.0 for name in runs}
    stops = list(range(args.chunk, args.max_steps, args.chunk)) + [None]
    for stop in stops:
        for name, out in runs.items():
            wall[name] += run_chunk(recipe, out, precision[name], stop, args.extra)
            print(f"{name}: up to step {stop or args.max_steps} ({wall[name]:.0f} s)", flush=True)
    results = {name: summary(out) for name, out in runs.items()}
    for name, r in results.items():
        print(f"{name}: {r['tokens_per_second']:8.0f} tokens/s (median of logs), MFU {r['mfu']:.2f}, "
              f"wall {wall[name]:.0f} s")  # fmt: skip
    ratio = results["bf16"]["tokens_per_second"] / results["fp32"]["tokens_per_second"]
    print(f"bf16 / fp32 tokens/s: {ratio:.2f}x")
    print("held-out MLM loss / accuracy, fp32 vs bf16:")
    for step in sorted(set(results["fp32"]["eval"]) & set(results["bf16"]["eval"])):
        (lf, af), (lb, ab) = results["fp32"]["eval"][step], results["bf16"]["eval"][step]
        print(f"  step {step:4d}: {lf:.4f} / {af:.4f} vs {lb:.4f} / {ab:.4f} (diff {lb - lf:+.4f})")
    (root / "results.json").write_text(json.dumps({"runs": results, "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()
