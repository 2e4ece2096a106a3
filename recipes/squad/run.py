"""The SQuAD recipe on ``transformers.Trainer`` (the shape of transformers' ``run_qa.py``).

Fine-tune and/or evaluate; writes into ``output_dir`` the model and tokenizer (with
``version_2_with_negative``, ``squad_window`` and, v2.0, the tuned ``null_score_diff_threshold``
in its config), ``predictions.json``, ``nbest_predictions.json``, ``null_odds.json`` (v2.0),
``train_results.json``, ``eval_results.json``, ``all_results.json``, ``trainer_state.json`` and a
``README.md`` model card.
"""

from __future__ import annotations

import logging
from typing import Any

from modeling.cli import UsageError

from . import data as squad_data
from .data import SquadArguments

logger = logging.getLogger(__name__)


def load_data(data_args: SquadArguments, training_args, tokenizer):
    """(train questions, train windows, dev questions, dev windows, official dev data);
    ``None`` where unused.
    Featurised under ``main_process_first``: rank 0 writes the cache, the others read it."""
    from .features import featurize

    window = data_args.window()
    examples = train = eval_examples = eval_features = eval_data = None
    with training_args.main_process_first(desc="SQuAD windows"):
        if training_args.do_train:
            examples = _questions(data_args, "train")
            if data_args.max_train_samples is not None:
                n = min(data_args.max_train_samples, len(examples))
                # Google shuffles the training questions with Random(12345); a subset is the head
                examples = examples.shuffle(seed=data_args.train_sample_seed).select(range(n))
            train = featurize(
                examples, tokenizer, window, True, data_args.preprocessing_num_workers
            )
            logger.info("train: %d questions -> %d windows", len(examples), len(train))
        if training_args.do_eval:
            eval_examples = _questions(data_args, "validation")
            if data_args.max_eval_samples is not None:
                n = min(data_args.max_eval_samples, len(eval_examples))
                eval_examples = eval_examples.select(range(n))
            eval_features = featurize(
                eval_examples, tokenizer, window, False, data_args.preprocessing_num_workers
            )
            eval_data = squad_data.official_data(eval_examples)
            logger.info("dev: %d questions -> %d windows", len(eval_examples), len(eval_features))
    return examples, train, eval_examples, eval_features, eval_data


def _questions(data_args: SquadArguments, split: str):
    v2 = data_args.version_2_with_negative
    if split == "train" and data_args.train_file:
        return squad_data.load_split(data_args.train_file, True, v2)
    if split == "validation" and data_args.validation_file:
        return squad_data.load_split([data_args.validation_file], False, v2)
    import datasets

    rows = datasets.load_dataset(data_args.dataset_name, split=split)
    if "is_impossible" not in rows.column_names:
        rows = rows.map(lambda r: {"is_impossible": not r["answers"]["text"]})
    return rows


def check_inputs(data_args: SquadArguments, training_args) -> None:
    """Everything that can be refused before any model or data is loaded, one line each."""
    if training_args.do_train and not (data_args.train_file or data_args.dataset_name):
        raise UsageError("--do_train needs --train_file or --dataset_name")
    if training_args.do_eval and not (data_args.validation_file or data_args.dataset_name):
        raise UsageError("--do_eval needs --validation_file or --dataset_name")
    specs = list(data_args.train_file) if training_args.do_train else []
    if training_args.do_eval and data_args.validation_file:
        specs.append(data_args.validation_file)
    for spec in specs:  # not UTF-8, not JSON, not the official schema: one line, now
        squad_data.load_squad_file(spec)


def run(model_args, data_args: SquadArguments, training_args) -> dict[str, Any]:
    """Fine-tune and/or evaluate on SQuAD; returns the metrics (``train_*``, ``eval_*``)."""
    from transformers import DataCollatorWithPadding, set_seed

    from modeling import BertForQuestionAnswering

    from .. import trainer_setup
    from .trainer import QuestionAnsweringTrainer

    trainer_setup.check_output_dir(training_args.output_dir)
    check_inputs(data_args, training_args)
    tokenizer = trainer_setup.load_tokenizer(model_args)
    loaded = load_data(data_args, training_args, tokenizer)
    train_examples, train, eval_examples, eval_features, eval_data = loaded

    set_seed(training_args.seed)  # the new QA head's initialisation
    model = trainer_setup.load_model(BertForQuestionAnswering, model_args)
    model.config.version_2_with_negative = data_args.version_2_with_negative
    model.config.squad_window = data_args.window()
    trainer = QuestionAnsweringTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=eval_features,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        eval_examples=eval_examples,
        eval_data=eval_data,
        squad_args=data_args,
    )
    metrics: dict[str, Any] = {}
    if training_args.do_train:
        result = trainer.train(resume_from_checkpoint=trainer_setup.resume_arg(training_args))
        trainer.save_model()
        train_metrics = {
            **result.metrics,
            "train_samples": len(train_examples),
            "train_windows": len(train),
        }
        trainer.log_metrics("train", train_metrics)
        trainer.save_metrics("train", train_metrics)
        trainer.save_state()
        metrics.update(train_metrics)
    if training_args.do_eval:
        eval_metrics = trainer.evaluate()
        if "eval_tuned_tau" in eval_metrics and training_args.do_train:
            # the tuned tau travels with the model: the pipeline applies it
            trainer.model.config.null_score_diff_threshold = eval_metrics["eval_tuned_tau"]
            trainer.save_model()
        trainer.log_metrics("eval", eval_metrics)
        trainer.save_metrics("eval", eval_metrics)
        metrics.update(eval_metrics)
    if training_args.do_train:
        trainer_setup.model_card(
            trainer, model_args, "question-answering", data_args.dataset_name or "squad"
        )
    return metrics
