#!/usr/bin/env python
"""CoNLL-2003 NER: our model + loop vs stock ``AutoModelForTokenClassification`` + ``Trainer``.

Both train the same checkpoint on the same features (first-piece labels, no document context)
with the same hyper-parameters, then both are scored the same way (conlleval on the dev set).

    python benchmarks/compare_ner.py --model_name_or_path MODEL --max_train_samples 1000 \
        --learning_rate 1e-4 --per_device_train_batch_size 16 --num_train_epochs 1

Each side trains ``COMPARE_REPEATS`` times (default 2), the order alternating; the ratio is the
median of the paired ratios. Per-step forward+backward times are also measured interleaved.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modeling.cli import main_guard, parse_args  # noqa: E402
from recipes.arguments import ModelArguments, TrainingArguments  # noqa: E402
from recipes.ner import NerDataArguments  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "conll2003"
REPEATS = int(os.environ.get("COMPARE_REPEATS", "2"))  # trainings per side, order alternating


def main(argv=None):
    model_args, data_args, args = parse_args(
        [ModelArguments, NerDataArguments, TrainingArguments],
        argv,
        description=__doc__,
        overrides={
            "train_file": str(SHARED / "eng.train"),
            "validation_file": str(SHARED / "eng.testa"),
            "output_dir": "outputs/compare_ner",
            "save_model": False,
        },
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import statistics
    import time

    import torch
    from stock_trainer import stock_model, train_with_trainer

    from recipes.finetune import set_seed, train, write_results
    from recipes.ner import (
        _load_split,
        _truncate,
        build_features,
        build_model,
        evaluate,
        label_list,
    )

    train_sents = _truncate(_load_split(data_args, "train"), args.max_train_samples)
    dev_sents = _truncate(_load_split(data_args, "validation"), args.max_eval_samples)
    labels = label_list(train_sents)
    label2id = {t: i for i, t in enumerate(labels)}
    from recipes.finetune import load_tokenizer

    tokenizer = load_tokenizer(model_args)
    features = build_features(
        train_sents, tokenizer, label2id, data_args.max_seq_length, data_args.document_context
    )
    results = {
        "train_sentences": len(train_sents),
        "train_windows": len(features),
        "train_pieces": sum(len(f["input_ids"]) for f in features),
        "dev_sentences": len(dev_sents),
        "torch_threads": torch.get_num_threads(),
        "settings": {
            "learning_rate": args.learning_rate,
            "batch_size": args.per_device_train_batch_size,
            "epochs": args.num_train_epochs,
            "seed": args.seed,
            "max_seq_length": data_args.max_seq_length,
        },
    }

    def score(model, name):
        metrics, _ = evaluate(
            model,
            dev_sents,
            tokenizer,
            labels,
            data_args,
            args.per_device_eval_batch_size,
            data_args.document_context,
            args.disable_tqdm,
        )
        results[name]["dev_f1"] = metrics["f1"]
        results[name]["dev_per_type_f1"] = {t: r["f1"] for t, r in metrics["per_type"].items()}
        results[name]["eval_runtime"] = metrics["runtime"]

    runtimes: dict[str, list[float]] = {"ours": [], "stock": []}

    def ours():
        set_seed(args.seed)
        model = build_model(model_args, data_args, labels)
        trained = train(model, features, args)
        runtimes["ours"].append(trained.train_runtime)
        results["ours"] = {"train_runtime": trained.train_runtime, "train_loss": trained.train_loss}
        score(model, "ours")
        return model

    def stock():
        set_seed(args.seed)
        model = stock_model(
            "AutoModelForTokenClassification",
            model_args.model_name_or_path,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id=label2id,
        )
        start = time.perf_counter()
        out = train_with_trainer(model, features, args)
        runtimes["stock"].append(out["train_runtime"])
        results["stock"] = {**out, "wall": time.perf_counter() - start}
        score(model, "stock")
        return model

    # Whole trainings alternate (ours first, then stock first, ...): on a shared machine the
    # load drifts, and a fixed order would charge the drift to one side.
    models = {}
    for repeat in range(REPEATS):
        steps = [("ours", ours), ("stock", stock)]
        for name, step in steps if repeat % 2 == 0 else steps[::-1]:
            models[name] = step()
            print(json.dumps(results, indent=2, default=float), flush=True)
    results["train_runtimes"] = runtimes
    # The two trainings ran one after the other on a shared machine: their wall times drift
    # with the load. Interleaved steps on identical batches give the robust speed ratio.
    results["interleaved_step_seconds"] = interleaved_steps(models, features, args, rounds=12)
    results["step_time_ratio_stock_over_ours"] = (
        results["interleaved_step_seconds"]["stock"] / results["interleaved_step_seconds"]["ours"]
    )
    results["train_time_ratio_stock_over_ours"] = statistics.median(
        s / o for s, o in zip(runtimes["stock"], runtimes["ours"])
    )
    results["eval_time_ratio_stock_over_ours"] = (
        results["stock"]["eval_runtime"] / results["ours"]["eval_runtime"]
    )
    write_results(args.output_dir, "compare_ner.json", results)
    print(json.dumps(results, indent=2, default=float))


def interleaved_steps(models: dict, features, args, rounds: int) -> dict[str, float]:
    """Median seconds of one forward+backward per model, alternating models step by step on
    the same real batches (batch size and length grouping as in training)."""
    import statistics
    import time

    from recipes.finetune import MODEL_INPUTS, LengthGroupedSampler, pad_collate

    keys = [*MODEL_INPUTS, "labels"]
    size = args.per_device_train_batch_size
    lengths = [len(f["input_ids"]) for f in features]
    order = list(LengthGroupedSampler(lengths, size, args.seed))
    times: dict[str, list[float]] = {name: [] for name in models}
    for r in range(min(rounds, len(order) // size)):
        batch = pad_collate([features[i] for i in order[r * size : (r + 1) * size]], 0, keys)
        for name, model in models.items():
            model.train()
            start = time.perf_counter()
            model(**batch).loss.backward()
            times[name].append(time.perf_counter() - start)
            model.zero_grad(set_to_none=True)
    return {name: statistics.median(values) for name, values in times.items()}


if __name__ == "__main__":
    main_guard(main)
