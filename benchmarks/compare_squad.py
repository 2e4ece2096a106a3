#!/usr/bin/env python
"""SQuAD fine-tuning, ours vs stock transformers, on the same features, side by side.

    python benchmarks/compare_squad.py --model_name_or_path PATH \
        --train_file ../shared/data/squad/train-v1.1.json --max_train_samples 300 \
        --validation_file '../shared/data/squad/dev-v1.1.json[1::24]' \
        --max_seq_length 256 --learning_rate 1e-4 --output_dir outputs/bench/squad

Both sides get the same windows (built once by ``recipes/squad.py``), the same hyper-parameters,
the same freshly initialised QA head (copied), the same prediction batches and the same
post-processing and official metric. Ours: ``modeling.BertForQuestionAnswering`` (unpadded
encoder) + ``recipes.finetune.train``. Stock: ``AutoModelForQuestionAnswering`` (sdpa) +
``transformers.Trainer`` (``benchmarks/stock_trainer.py``). Stock transformers ships no SQuAD
post-processing (it lives in its example scripts, ``utils_qa.py``), so both use ours. The runs are
sequential in one process; ``--rounds 2`` repeats them in the other order. Writes
``compare_squad.json`` with wall times, throughput, losses, EM/F1 and ours/stock ratios.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from modeling.cli import main_guard, parse_args  # noqa: E402
from recipes.arguments import ModelArguments, TrainingArguments  # noqa: E402
from recipes.squad import SquadArguments  # noqa: E402


@dataclass
class BenchArguments:
    rounds: int = field(default=1, metadata={"help": "1: ours then stock; 2: then stock, ours"})
    predict_rounds: int = field(
        default=3, metadata={"help": "extra alternating timings of prediction (min is reported)"}
    )


def _run_side(name, make_model, train_fn, train_features, eval_set, data_args, args):
    from recipes import squad

    eval_data, eval_examples, eval_features = eval_set
    model = make_model()
    start = time.perf_counter()
    loss = train_fn(model, train_features)
    train_wall = time.perf_counter() - start
    model = getattr(model, "module", model)
    preds, predict_wall = _timed_predict(model, eval_set, data_args, args)
    results = squad.evaluate_predictions(eval_data, preds, data_args.version_2_with_negative)
    tokens = sum(sum(f["attention_mask"]) for f in train_features)
    return model, {
        "side": name,
        "train_wall_s": train_wall,
        "train_tokens_per_s": tokens * max(1.0, args.num_train_epochs) / train_wall,
        "train_loss": loss,
        "predict_wall_s": predict_wall,
        **squad.flat_metrics(results),
    }


def _timed_predict(model, eval_set, data_args, args):
    from recipes import squad

    _, eval_examples, eval_features = eval_set
    start = time.perf_counter()
    preds = squad.predict_examples(
        model, None, eval_examples, data_args, args.per_device_eval_batch_size,
        features=eval_features, disable_tqdm=True,
    )  # fmt: skip
    return preds, time.perf_counter() - start


def main(argv=None) -> dict:
    model_args, data_args, args, bench = parse_args(
        [ModelArguments, SquadArguments, TrainingArguments, BenchArguments],
        argv,
        description=__doc__.split("\n\n")[0],
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="INFO")
    import torch
    from stock_trainer import stock_model, train_with_trainer

    from modeling import BertForQuestionAnswering, atomic
    from recipes import squad
    from recipes.finetune import load_model, load_tokenizer, set_seed, train

    tokenizer = load_tokenizer(model_args)
    window = (data_args.max_seq_length, data_args.doc_stride, data_args.max_query_length)
    start = time.perf_counter()
    train_examples = squad.load_train_examples(data_args, args.max_train_samples)
    train_features = squad.convert_examples_to_features(
        train_examples, tokenizer, *window, is_training=True
    )
    eval_data, eval_examples = squad.load_eval_set(data_args, args.max_eval_samples)
    eval_features = squad.convert_examples_to_features(
        eval_examples, tokenizer, *window, is_training=False
    )
    features_wall = time.perf_counter() - start
    eval_set = (eval_data, eval_examples, eval_features)

    set_seed(args.seed)
    head = load_model(BertForQuestionAnswering, model_args).qa_outputs.state_dict()

    def ours_model():
        model = load_model(BertForQuestionAnswering, model_args)
        model.qa_outputs.load_state_dict(head)
        return model

    def stock():
        model = stock_model("AutoModelForQuestionAnswering", model_args.model_name_or_path)
        model.qa_outputs.load_state_dict(head)
        return model

    def ours_train(model, feats):
        return train(model, feats, args, label_keys=squad.LABEL_KEYS).train_loss

    def stock_train(model, feats):
        return train_with_trainer(model, feats, args, label_keys=squad.LABEL_KEYS)["train_loss"]

    sides = {"ours": (ours_model, ours_train), "stock": (stock, stock_train)}
    order = ["ours", "stock", "stock", "ours"][: 2 * bench.rounds]
    runs, models = [], {}
    for name in order:
        torch.manual_seed(args.seed)
        make, fit = sides[name]
        models[name], run = _run_side(name, make, fit, train_features, eval_set, data_args, args)
        runs.append(run)
        logging.info("%s: %s", name, {k: round(v, 3) for k, v in run.items() if k != "side"})
    # prediction alone, alternating, on the trained models: less exposed to load changes
    predict_times = {"ours": [], "stock": []}
    for _ in range(bench.predict_rounds):
        for name in ("ours", "stock"):
            predict_times[name].append(_timed_predict(models[name], eval_set, data_args, args)[1])
    logging.info("prediction walls: %s", predict_times)

    def best(name, key):
        values = [r[key] for r in runs if r["side"] == name]
        return min(values + (predict_times[name] if key == "predict_wall_s" else []))

    summary = {
        "train_questions": len(train_examples),
        "train_windows": len(train_features),
        "eval_questions": len(eval_examples),
        "eval_windows": len(eval_features),
        "max_seq_length": data_args.max_seq_length,
        "doc_stride": data_args.doc_stride,
        "learning_rate": args.learning_rate,
        "batch_size": args.per_device_train_batch_size,
        "epochs": args.num_train_epochs,
        "features_wall_s": features_wall,
        "threads": torch.get_num_threads(),
        "runs": runs,
        "predict_walls_alternating_s": predict_times,
        "train_speedup_stock_over_ours": best("stock", "train_wall_s")
        / best("ours", "train_wall_s"),
        "predict_speedup_stock_over_ours": (
            best("stock", "predict_wall_s") / best("ours", "predict_wall_s")
        ),
    }
    atomic.write_json(Path(args.output_dir) / "compare_squad.json", summary)
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main_guard(main)
