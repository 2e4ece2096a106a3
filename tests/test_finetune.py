"""The shared fine-tuning loop: padding, length grouping, schedule, grid search, learning."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from modeling import BertConfig, BertForSequenceClassification
from recipes.finetune import (
    LengthGroupedSampler,
    TrainingArguments,
    grid_search,
    linear_schedule,
    pad_collate,
    param_groups,
    predict,
    train,
)


def test_pad_collate_pads_each_field_with_its_own_value():
    feats = [
        {
            "input_ids": [5, 6, 7],
            "attention_mask": [1, 1, 1],
            "labels": [1, 2, 3],
            "label": 1,
            "id": "a",
        },
        {"input_ids": [5], "attention_mask": [1], "labels": [4], "label": 0, "id": "b"},
    ]
    batch = pad_collate(feats, pad_token_id=9)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [5, 9, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["labels"].tolist() == [[1, 2, 3], [4, -100, -100]]
    assert batch["label"].tolist() == [1, 0]
    assert "id" not in batch
    choices = [{"input_ids": [[1, 2], [1, 2, 3]]}, {"input_ids": [[4], [5]]}]
    assert pad_collate(choices)["input_ids"].shape == (2, 2, 3)


def test_length_grouped_sampler_is_a_permutation_with_similar_lengths():
    lengths = list(np.random.default_rng(0).integers(5, 120, size=1000))
    sampler = LengthGroupedSampler(lengths, batch_size=10, seed=3, mega=5)
    order = list(sampler)
    assert sorted(order) == list(range(1000))
    assert lengths[order[0]] == max(lengths)  # longest batch first
    spread = np.mean([np.ptp([lengths[i] for i in order[b : b + 10]]) for b in range(0, 1000, 10)])
    assert spread < 25  # random batches would spread ~95
    sampler.set_epoch(1)
    assert list(sampler) != order


def test_linear_schedule_warmup_then_decay():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = linear_schedule(opt, warmup_steps=4, total_steps=10)
    lrs = []
    for _ in range(10):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[:4] == [0.25, 0.5, 0.75, 1.0]
    assert lrs[4:] == pytest.approx([1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])


def test_no_weight_decay_on_bias_and_layernorm():
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    )
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(
        not names[id(p)].endswith("bias") and "LayerNorm" not in names[id(p)]
        for p in decay["params"]
    )
    assert any("LayerNorm" in names[id(p)] for p in no_decay["params"])
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0


def _toy_task(n, seed):
    """Label 1 when token 7 occurs in the sequence: learnable by a tiny model in seconds."""
    rng = np.random.default_rng(seed)
    feats = []
    for _ in range(n):
        length = int(rng.integers(4, 24))
        ids = rng.integers(8, 40, size=length).tolist()
        label = int(rng.random() < 0.5)
        if label:
            ids[int(rng.integers(1, length))] = 7
        feats.append(
            {
                "input_ids": [2] + ids,
                "attention_mask": [1] * (length + 1),
                "token_type_ids": [0] * (length + 1),
                "labels": label,
            }
        )
    return feats


def _tiny_classifier(unpad=True):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=40,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
        unpad_inputs=unpad,
    )
    return BertForSequenceClassification(config)


def test_train_learns_a_toy_task_and_predict_keeps_order(tmp_path):
    train_set, dev = _toy_task(600, 0), _toy_task(200, 1)
    model = _tiny_classifier()
    args = TrainingArguments(
        output_dir=str(tmp_path),
        learning_rate=1e-3,
        per_device_train_batch_size=16,
        num_train_epochs=4,
        logging_steps=10,
        disable_tqdm=True,
    )
    result = train(model, train_set, args)
    assert result.steps == 4 * 38
    assert result.log_history[-1]["loss"] < 0.3 < result.log_history[0]["loss"]
    logits = predict(model, dev, batch_size=32, disable_tqdm=True)["logits"]
    accuracy = np.mean([int(np.argmax(row)) == f["labels"] for row, f in zip(logits, dev)])
    assert accuracy > 0.9
    # order is the input order, not the length-sorted one
    single = predict(model, dev[5:6], disable_tqdm=True)["logits"][0]
    assert np.allclose(single, logits[5], atol=1e-5)


def test_grid_search_picks_best_median_and_writes_summary(tmp_path):
    args = TrainingArguments(
        output_dir=str(tmp_path), learning_rate_grid=[1e-4, 1e-3], seeds=[1, 2, 3]
    )
    scores = {
        (1e-4, 1): 0.5,
        (1e-4, 2): 0.9,
        (1e-4, 3): 0.5,
        (1e-3, 1): 0.7,
        (1e-3, 2): 0.6,
        (1e-3, 3): 0.8,
    }
    seen = []

    def run(run_args):
        seen.append(run_args)
        return {"accuracy": scores[(run_args.learning_rate, run_args.seed)]}

    summary = grid_search(args, run, "accuracy")
    assert len(seen) == 6 and len({a.output_dir for a in seen}) == 6
    assert summary["best_setting"]["learning_rate"] == 1e-3  # median 0.7 beats 0.5 despite best 0.9
    assert summary["best_setting"]["accuracy_best"] == 0.8
    saved = json.loads((tmp_path / "grid_results.json").read_text())
    assert len(saved["runs"]) == 6
    low = [s for s in saved["settings"] if s["learning_rate"] == 1e-4][0]
    assert low["accuracy_median"] == 0.5 and low["accuracy_best"] == 0.9
    assert low["accuracy_std"] == pytest.approx(np.std([0.5, 0.9, 0.5]))
    assert dataclasses.replace(args).seeds == [1, 2, 3]
