#!/usr/bin/env python
"""SQuAD fine-tuning on identical features: our model + Trainer (the recipe) vs stock
``AutoModelForQuestionAnswering`` + Trainer.

    python benchmarks/compare_squad.py --model_name_or_path PATH \
        --train_file ../shared/data/squad/train-v1.1.json --max_train_samples 300 \
        --validation_file '../shared/data/squad/dev-v1.1.json[1::24]' \
        --max_seq_length 256 --learning_rate 1e-4 --seeds 42 43 --output_dir outputs/bench/squad

Windows come from the recipe (``recipes/squad``), built once; both sides get the same
hyper-parameters (the runner's BERT defaults), the same freshly initialised QA head (copied),
and the same evaluation (``QuestionAnsweringTrainer.evaluate``: post-processing and the official
metric; stock transformers ships no SQuAD post-processing). Per seed the sides alternate order.
Writes ``compare_squad.json`` with train/eval times, EM/F1 and the stock/ours time ratios.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modeling.cli import main_guard  # noqa: E402


def main(argv=None):
    import dataclasses

    import torch
    from transformers import AutoModelForQuestionAnswering, DataCollatorWithPadding, set_seed

    from recipes import runner
    from recipes.squad.recipe import SquadRecipe
    from recipes.squad.trainer import QuestionAnsweringTrainer

    argv = list(sys.argv[1:] if argv is None else argv)
    task = SquadRecipe()
    defaults = ["--do_train", "--do_eval", "--save_strategy", "no", "--disable_tqdm", "true"]
    args = runner.parse_args(task, defaults + argv)
    task.check(args)
    tokenizer = runner.load_tokenizer(args.model)
    data = runner.load_data(task, args, tokenizer, runner.read_raw(task, args))
    ((_, train),) = data.get("train").values()
    ((examples, dev),) = data.get("eval").values()
    out = Path(args.training.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    def trainer_for(model, seed):
        training = dataclasses.replace(args.training, seed=seed, output_dir=str(out / "run"))
        return QuestionAnsweringTrainer(
            model=model,
            args=training,
            train_dataset=train,
            eval_dataset=dev,
            processing_class=tokenizer,
            data_collator=DataCollatorWithPadding(tokenizer),
            eval_examples=examples,
            eval_data=task.eval_data,
            squad_args=args.data,
        )

    rows = []
    seeds = args.run.seeds or [args.training.seed]
    for i, seed in enumerate(seeds):
        set_seed(seed)
        head = task.load_model(args).qa_outputs.state_dict()

        def ours():
            return task.load_model(args)

        def stock():
            return AutoModelForQuestionAnswering.from_pretrained(
                args.model.model_name_or_path, attn_implementation="sdpa"
            )

        sides = [("ours", ours), ("stock", stock)]
        for name, make in sides if i % 2 == 0 else sides[::-1]:
            model = make()
            model.qa_outputs.load_state_dict(head)
            set_seed(seed)
            trainer = trainer_for(model, seed)
            start = time.perf_counter()
            train_metrics = trainer.train().metrics
            metrics = trainer.evaluate()
            row = {
                "side": name,
                "seed": seed,
                "train_runtime": train_metrics["train_runtime"],
                "train_loss": train_metrics["train_loss"],
                "eval_runtime": metrics["eval_runtime"],
                "eval_exact_match": metrics.get("eval_exact_match", metrics.get("eval_exact")),
                "eval_f1": metrics["eval_f1"],
                "wall": time.perf_counter() - start,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)

    def ratio(key):
        return statistics.median(
            s[key] / o[key]
            for s in rows
            for o in rows
            if s["side"] == "stock" and o["side"] == "ours" and s["seed"] == o["seed"]
        )

    summary = {
        "train_windows": len(train),
        "eval_questions": len(examples),
        "eval_windows": len(dev),
        "threads": torch.get_num_threads(),
        "runs": rows,
        "train_time_stock_over_ours": ratio("train_runtime"),
        "eval_time_stock_over_ours": ratio("eval_runtime"),
    }
    (out / "compare_squad.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main_guard(main)
