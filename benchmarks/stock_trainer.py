"""Stock `transformers` side of the fine-tuning comparisons.

Each recipe comparison trains the same checkpoint on the same features with the same
hyper-parameters twice: once with our loop (:func:`recipes.finetune.train` on our model) and once
with stock ``transformers`` (``AutoModelFor*`` + ``Trainer``), then evaluates both the same way.
This module is the stock half, written once for every task.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch

from recipes.finetune import MODEL_INPUTS, TrainingArguments, pad_collate


def stock_model(auto_class_name: str, model_path: str, **config_overrides):
    """A stock transformers model (eager attention off: sdpa, its fastest CPU path)."""
    import transformers

    auto = getattr(transformers, auto_class_name)
    return auto.from_pretrained(model_path, attn_implementation="sdpa", **config_overrides)


def warmup_steps(args: TrainingArguments, num_examples: int) -> int:
    """Warmup steps as ``recipes.finetune.train`` counts them (``warmup_steps`` wins over
    ``int(warmup_ratio * total_steps)``)."""
    if args.warmup_steps:
        return args.warmup_steps
    batches = math.ceil(num_examples / args.per_device_train_batch_size)
    updates_per_epoch = math.ceil(batches / args.gradient_accumulation_steps)
    total = (
        args.max_steps
        if args.max_steps > 0
        else math.ceil(args.num_train_epochs * updates_per_epoch)
    )
    return int(args.warmup_ratio * total)


def train_with_trainer(
    model,
    train_features: Sequence[dict],
    args: TrainingArguments,
    label_keys: Sequence[str] = ("labels",),
) -> dict[str, float]:
    """Fine-tune ``model`` in place with ``transformers.Trainer`` using ``args``' settings.

    Same optimiser (AdamW, no decay on bias/LayerNorm), schedule (linear, warmup), clipping,
    seed, dynamic padding and length grouping as our loop. Returns wall time and loss.
    """
    from transformers import Trainer
    from transformers import TrainingArguments as HfArgs

    keys = [k for k in (*MODEL_INPUTS, *label_keys) if k in train_features[0]]
    hf_args = HfArgs(
        output_dir=args.output_dir,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.per_device_train_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        num_train_epochs=args.num_train_epochs,
        max_steps=args.max_steps,
        # transformers 5 has no warmup_ratio: give the step count our loop derives from it
        warmup_steps=warmup_steps(args, len(train_features)),
        weight_decay=args.weight_decay,
        adam_beta1=args.adam_beta1,
        adam_beta2=args.adam_beta2,
        adam_epsilon=args.adam_epsilon,
        max_grad_norm=args.max_grad_norm,
        seed=args.seed,
        train_sampling_strategy="group_by_length" if args.group_by_length else "random",
        logging_steps=args.logging_steps,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=args.dataloader_num_workers,
        disable_tqdm=args.disable_tqdm,
        remove_unused_columns=False,
    )
    features = [{k: f[k] for k in keys} for f in train_features]
    pad_id = model.config.pad_token_id or 0
    trainer = Trainer(
        model=model,
        args=hf_args,
        train_dataset=features,
        data_collator=lambda feats: pad_collate(feats, pad_id, keys),
    )
    start = time.perf_counter()
    output = trainer.train()
    return {"train_runtime": time.perf_counter() - start, "train_loss": output.training_loss}
