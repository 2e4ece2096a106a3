#!/usr/bin/env python
"""CoNLL-2003 NER, two ways on identical features: our model + Trainer (the recipe) and stock
``AutoModelForTokenClassification`` + Trainer. (A third side, the previous hand-written loop, was
measured once and removed with that loop: benchmarks/README.md keeps its figures.)

    python benchmarks/compare_ner.py --model_name_or_path MODEL --max_train_samples 1000 \
        --num_train_epochs 2 --per_device_train_batch_size 16 --learning_rate 1e-4 \
        --seeds 42 43 44 --output_dir outputs/compare_ner

Features come from the recipe (``recipes/ner``: first-piece labels, no document context), built
once. Every side gets the same hyper-parameters (BERT's defaults of ``recipes/runner.py``:
warmup 10%, weight decay 0.01, fused AdamW, clipping 1.0, random batches), the same seeds, and
is scored the same way (``NerTrainer.evaluate``: conlleval on the dev set). Per seed the
trainings run one after the other in a rotating order, so that the drifting load of a shared
machine is spread over the sides. Speed ratios are medians of per-seed ratios; they only count
when the dev F1 of the sides lies within the seed spread. Writes ``compare_ner.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modeling.cli import main_guard  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "conll2003"
SIDES = ("ours_trainer", "stock_trainer")


def main(argv=None):
    import dataclasses

    from recipes import runner
    from recipes.ner.recipe import NerRecipe

    argv = list(sys.argv[1:] if argv is None else argv)
    defaults = [
        "--train_file", str(SHARED / "eng.train"), "--validation_file", str(SHARED / "eng.testa"),
        "--do_train", "--do_eval", "--save_strategy", "no", "--disable_tqdm", "true",
    ]  # fmt: skip
    task = NerRecipe()
    args = runner.parse_args(task, defaults + argv)
    task.check(args)
    tokenizer = runner.load_tokenizer(args.model)
    data = runner.load_data(task, args, tokenizer, runner.read_raw(task, args))
    ((_, train),) = data.get("train").values()
    ((_, dev),) = data.get("eval").values()
    train = train.select_columns(["input_ids", "token_type_ids", "attention_mask", "labels"])
    seeds = args.run.seeds or [args.training.seed]
    out = Path(args.training.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    results: dict = {
        "train_sentences": len(task.sentences["train"]),
        "train_windows": len(train),
        "dev_sentences": len(task.sentences["eval"]),
        "torch_threads": torch.get_num_threads(),
        "settings": {
            k: getattr(args.training, k)
            for k in ("learning_rate", "per_device_train_batch_size", "num_train_epochs")
        },
        "runs": [],
    }

    def trainer_for(model, seed):
        from transformers import DataCollatorForTokenClassification

        from recipes.ner.trainer import NerTrainer

        training = dataclasses.replace(
            args.training, seed=seed, output_dir=str(out / f"seed{seed}")
        )
        return NerTrainer(
            model=model,
            args=training,
            train_dataset=train,
            eval_dataset=dev,
            processing_class=tokenizer,
            data_collator=DataCollatorForTokenClassification(tokenizer),
            labels=task.labels,
            eval_sentences=task.sentences["eval"],
        )

    def ours_trainer(seed):
        from transformers import set_seed

        set_seed(seed)
        trainer = trainer_for(task.load_model(args), seed)
        return trainer, trainer.train().metrics["train_runtime"]

    def stock_trainer(seed):
        from transformers import AutoModelForTokenClassification, set_seed

        set_seed(seed)
        model = AutoModelForTokenClassification.from_pretrained(
            args.model.model_name_or_path, attn_implementation="sdpa", **task.model_kwargs(None)
        )
        trainer = trainer_for(model, seed)
        return trainer, trainer.train().metrics["train_runtime"]

    sides = {"ours_trainer": ours_trainer, "stock_trainer": stock_trainer}
    for i, seed in enumerate(seeds):
        names = list(sides)
        names = names[i % len(names) :] + names[: i % len(names)]  # rotating order
        for name in names:
            start = time.perf_counter()
            trainer, runtime = sides[name](seed)
            metrics = trainer.evaluate()
            row = {
                "side": name,
                "seed": seed,
                "train_runtime": runtime,
                "wall": time.perf_counter() - start,
                "dev_f1": metrics["eval_f1"],
                "eval_runtime": metrics["eval_runtime"],
            }
            results["runs"].append(row)
            print(json.dumps(row), flush=True)
            (out / "compare_ner.json").write_text(json.dumps(results, indent=2))
    summary = {}
    for name in sides:
        rows = [r for r in results["runs"] if r["side"] == name]
        f1 = [r["dev_f1"] for r in rows]
        summary[name] = {
            "dev_f1": f1,
            "dev_f1_mean": statistics.mean(f1),
            "dev_f1_spread": max(f1) - min(f1),
            "train_runtime_median": statistics.median(r["train_runtime"] for r in rows),
        }
    for name in ("stock_trainer",):
        summary[f"train_time_{name}_over_ours_trainer"] = statistics.median(
            a["train_runtime"] / b["train_runtime"]
            for a in results["runs"]
            for b in results["runs"]
            if a["side"] == name and b["side"] == "ours_trainer" and a["seed"] == b["seed"]
        )
    results["summary"] = summary
    (out / "compare_ner.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main_guard(main)
