"""The shared Trainer runner: arguments, caching, output folders, resume, bf16, card, push,
trackers. Runs GLUE-format data made here (RTE layout) through a tiny BERT."""

import json
import sys
from pathlib import Path

import pytest

from modeling.cli import UsageError

REPO = Path(__file__).resolve().parents[1]


def write_rte(folder: Path, n_train: int = 40, n_dev: int = 13) -> Path:
    """An RTE-layout folder whose label is readable from the text (``yes`` = entailment)."""
    folder.mkdir(parents=True, exist_ok=True)
    header = "index\tsentence1\tsentence2\tlabel\n"
    for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):
        rows = []
        for i in range(n):
            yes = (i * 7) % 3 != 0
            label = "entailment" if yes else "not_entailment"
            words = " ".join(["cat", "dog", "sun", "tree"][(i + j) % 4] for j in range(i % 9 + 2))
            rows.append(f"{i}\tthe {words} sat here\t{'yes' if yes else 'no'} {words}\t{label}")
        (folder / name).write_text(header + "\n".join(rows) + "\n")
    return folder


def make_tiny_model(folder: Path, minilm_path: Path) -> Path:
    """A randomly initialised 2-layer, hidden-32 BERT with the real uncased vocabulary."""
    import torch
    from transformers import AutoTokenizer

    from modeling import BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, minilm_path):
    return make_tiny_model(tmp_path_factory.mktemp("tiny-bert"), minilm_path)


@pytest.fixture(scope="module")
def rte(tmp_path_factory):
    return write_rte(tmp_path_factory.mktemp("glue") / "RTE")


def glue_argv(tiny, rte, out, *extra, cache=None):
    argv = ["--model_name_or_path", tiny, "--task_name", "rte", "--data_dir", rte]
    argv += ["--output_dir", out, "--do_train", "--do_eval", "--disable_tqdm", "true"]
    argv += ["--per_device_train_batch_size", 4, "--learning_rate", 1e-3, "--report_to", "none"]
    argv += ["--cache_dir", cache or Path(out).parent / "cache", *extra]
    return [str(a) for a in argv]


def run_glue(argv, task=None):
    from recipes.glue import GlueRecipe
    from recipes.runner import run

    return run(task or GlueRecipe(), argv)


# ------------------------------------------------------------------------------- arguments


def test_bert_defaults_yaml_and_flags(tmp_path, tiny, rte):
    from recipes.glue import GlueRecipe
    from recipes.runner import parse_args

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("learning_rate: 1.0e-4\nnum_train_epochs: 2\nseeds: [1, 2]\nbf16: true\n")
    argv = ["--model_name_or_path", str(tiny), "--task_name", "rte", "--data_dir", str(rte)]
    argv += ["--output_dir", str(tmp_path / "o"), "--config", str(recipe)]
    args = parse_args(GlueRecipe(), [*argv, "--learning_rate", "3e-5"])
    t = args.training
    # the flag beats the YAML, which beats the defaults
    assert t.learning_rate == 3e-5 and t.num_train_epochs == 2 and args.run.seeds == [1, 2]
    assert t.bf16 is True and t.use_cpu is True  # no GPU here: bf16 on CPU is accepted
    # BERT's fine-tuning defaults
    assert (t.warmup_steps, t.weight_decay, t.max_grad_norm) == (0.1, 0.01, 1.0)
    assert t.optim == "adamw_torch_fused" and t.lr_scheduler_type == "linear"
    assert t.train_sampling_strategy == "random" and t.average_tokens_across_devices is False
    # every flag of the installed TrainingArguments, as a user of run_glue.py types them
    hf_flags = ["--eval_strategy", "steps", "--eval_steps", "7", "--save_strategy", "steps"]
    hf_flags += ["--save_steps", "7", "--lr_scheduler_type", "cosine", "--fp16", "false"]
    hf_flags += ["--gradient_checkpointing", "--torch_compile", "false", "--push_to_hub"]
    hf_flags += ["--hub_model_id", "me/x", "--train_sampling_strategy", "group_by_length"]
    hf_flags += ["--load_best_model_at_end", "--metric_for_best_model", "eval_accuracy"]
    args = parse_args(GlueRecipe(), [*argv, *hf_flags])
    assert args.training.save_steps == 7 and args.training.lr_scheduler_type == "cosine"
    assert args.training.push_to_hub and args.training.hub_model_id == "me/x"
    assert args.training.train_sampling_strategy == "group_by_length"
    bad = tmp_path / "bad.yaml"
    bad.write_text("warmup_ratio: 0.1\n")  # transformers 4's name
    with pytest.raises(UsageError, match=rf"{bad}: unknown field 'warmup_ratio'"):
        parse_args(GlueRecipe(), [*argv, "--config", str(bad)])
    bad.write_text("learning_rate: fast\n")
    with pytest.raises(UsageError, match=rf"{bad}: field 'learning_rate': expected float"):
        parse_args(GlueRecipe(), [*argv, "--config", str(bad)])


def test_help_lists_trainer_and_project_flags(capsys):
    from recipes.glue import GlueRecipe
    from recipes.runner import build_parser

    text = build_parser(GlueRecipe()).format_help()
    for flag in (
        "--bf16",
        "--fp16",
        "--eval_strategy",
        "--save_strategy",
        "--save_steps",
        "--resume_from_checkpoint",
        "--load_best_model_at_end",
        "--push_to_hub",
        "--deepspeed",
        "--torch_compile",
        "--lr_scheduler_type",
        "--gradient_checkpointing",
        "--cache_dir",
        "--overwrite_output_dir",
        "--config",
        "--learning_rate_grid",
        "--seeds",
        "--task_name",
        "--train_sampling_strategy",
    ):
        assert flag in text, flag


# ------------------------------------------------------------------------------- one run


def test_run_outputs_cache_overwrite_card_and_push(tmp_path, tiny, rte, monkeypatch):
    from recipes.glue import GlueRecipe

    calls = []

    class Counting(GlueRecipe):
        def featurise(self, batch, tokenizer, data_args, split):
            calls.append((split, len(batch["index"])))
            return super().featurise(batch, tokenizer, data_args, split)

    out = tmp_path / "out"
    metrics = run_glue(glue_argv(tiny, rte, out, "--num_train_epochs", 2), Counting())
    assert sorted(calls) == [("eval", 13), ("train", 40)]
    # HF-style outputs, the model in output_dir itself
    for name in ("train_results.json", "eval_results.json", "all_results.json"):
        assert (out / name).is_file(), name
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 20  # 40 examples / 4 x 2 epochs
    results = json.loads((out / "all_results.json").read_text())
    assert results["eval_samples"] == 13 and results["train_samples"] == 40
    assert results["train_final_learning_rate"] == 0.0
    assert results["eval_accuracy"] == pytest.approx(metrics["eval_accuracy"])
    from modeling import BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "entailment", 1: "not_entailment"}
    card = (out / "README.md").read_text()
    assert "model-index" in card and f"value: {round(metrics['eval_accuracy'], 4)}" in card
    assert "| learning_rate | 0.001 |" in card and "GLUE RTE" in card
    assert "| world_size | 1 |" in card

    # a second launch into the folder is refused, before any work
    with pytest.raises(UsageError, match=r"is not empty .* --overwrite_output_dir"):
        run_glue(glue_argv(tiny, rte, out), Counting())
    # evaluating another model into it with --overwrite_output_dir: the old model and its
    # training results go, so the folder's metrics describe its contents; nothing re-tokenised
    calls.clear()
    run_glue(glue_argv(tiny, rte, out, "--do_train", "false", "--overwrite_output_dir"), Counting())
    assert calls == []  # the features came from the cache
    assert not (out / "model.safetensors").exists() and not (out / "train_results.json").exists()
    assert not list(out.glob("checkpoint-*"))
    assert "train_loss" not in json.loads((out / "all_results.json").read_text())
    assert not (out / "README.md").exists()  # the old model's card went with the model

    # --push_to_hub: checked before any work, uploaded once at the end with the card and
    # without checkpoints (captured locally by tests/fake_hub.py)
    import fake_hub
    from huggingface_hub import constants

    pushed = tmp_path / "pushed"
    push = ["--push_to_hub", "--hub_model_id", "someone/tiny-rte", "--hub_private_repo", "true"]
    argv = glue_argv(tiny, rte, pushed, "--max_steps", 3, "--save_steps", 2) + push
    with pytest.raises(UsageError, match="HF_HUB_OFFLINE=1 is set"):
        run_glue(argv)
    assert not pushed.exists()  # refused before any work
    hub_root = fake_hub.install(tmp_path / "hub")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    run_glue(argv)
    calls = fake_hub.calls(hub_root)
    assert [c["method"] for c in calls] == ["create_repo", "upload_folder"]
    assert calls[0]["repo_id"] == "someone/tiny-rte" and calls[0]["private"] is True
    files = calls[1]["files"]
    for name in ("README.md", "config.json", "model.safetensors", "eval_results.json"):
        assert name in files, name
    assert not any(f.startswith(("checkpoint-", "runs/")) for f in files), files
    assert (pushed / "checkpoint-2").is_dir()  # written during training, not uploaded
    uploaded = (hub_root / "someone" / "tiny-rte" / "main" / "README.md").read_text()
    assert "model-index" in uploaded and "eval_accuracy" in uploaded


def test_resume_gives_the_uninterrupted_result(tmp_path, tiny, rte, monkeypatch):
    """Kill after checkpoint-3 (step 5), resume from the latest: same final dev metrics and
    training loss as the uninterrupted run."""
    import transformers

    extra = ["--max_steps", 8, "--save_strategy", "steps", "--save_steps", 3]
    extra += ["--logging_steps", 1, "--save_total_limit", 5]
    full = run_glue(glue_argv(tiny, rte, tmp_path / "full", *extra))

    original = transformers.Trainer.training_step
    steps = []

    def dying_step(self, *args, **kwargs):
        if len(steps) == 5:
            raise KeyboardInterrupt  # the process is killed during step 6
        steps.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(transformers.Trainer, "training_step", dying_step)
    killed = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        run_glue(glue_argv(tiny, rte, killed, *extra))
    monkeypatch.setattr(transformers.Trainer, "training_step", original)
    assert sorted(p.name for p in killed.glob("checkpoint-*")) == ["checkpoint-3"]
    assert not (killed / "eval_results.json").exists()
    resumed = run_glue(glue_argv(tiny, rte, killed, *extra, "--resume_from_checkpoint", "true"))
    for key in ("eval_accuracy", "eval_loss"):
        assert resumed[key] == pytest.approx(full[key], abs=1e-6), key
    history = {
        h["step"]: h["loss"]
        for h in json.loads((killed / "trainer_state.json").read_text())["log_history"]
        if "loss" in h
    }
    reference = {
        h["step"]: h["loss"]
        for h in json.loads((tmp_path / "full" / "trainer_state.json").read_text())["log_history"]
        if "loss" in h
    }
    assert sorted(history) == list(range(1, 9))
    for step in range(4, 9):  # the steps trained after the resume
        assert history[step] == pytest.approx(reference[step], abs=1e-5), step
    # an explicit checkpoint path works too; a missing one is a one-line error
    with pytest.raises(UsageError, match="no checkpoint-"):
        run_glue(glue_argv(tiny, rte, tmp_path / "empty", "--resume_from_checkpoint", "true"))


def test_bf16_on_cpu_trains_and_reports_to_tensorboard(tmp_path, tiny, rte):
    out = tmp_path / "bf16"
    metrics = run_glue(
        glue_argv(tiny, rte, out, "--bf16", "--max_steps", 4, "--logging_steps", 2)
        + ["--report_to", "tensorboard"]
    )
    import math

    assert math.isfinite(metrics["train_loss"]) and metrics["eval_samples"] == 13
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as handle:
        key = next(iter(handle.keys()))
        assert str(handle.get_tensor(key).dtype) == "torch.float32"  # master weights stay fp32
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = [EventAccumulator(str(p.parent)) for p in tmp_path.rglob("events.out.tfevents.*")]
    tags = set()
    for acc in events:
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    # the dev metrics reach the tracker, not only the training loss
    assert "eval/accuracy" in tags and "train/loss" in tags, tags


def test_grid_cells_and_summary():
    from recipes.grid import summarise_grid

    rows = []
    scores = {(1e-4, 1): 50, (1e-4, 2): 90, (1e-4, 3): 50, (1e-3, 1): 70, (1e-3, 2): 60}
    scores[(1e-3, 3)] = 80
    for (lr, seed), score in scores.items():
        rows.append(
            {
                "learning_rate": lr,
                "per_device_train_batch_size": 16,
                "num_train_epochs": 3,
                "seed": seed,
                "eval_accuracy": score,
            }
        )
    summary = summarise_grid(rows, "eval_accuracy")
    best = summary["best_setting"]
    assert best["learning_rate"] == 1e-3  # median 70 beats 50 despite the single 90
    assert best["eval_accuracy_best"] == 80 and best["eval_accuracy_median"] == 70
    assert summary["chosen_run"]["seed"] == 3  # the best restart of the chosen setting
    low = next(s for s in summary["settings"] if s["learning_rate"] == 1e-4)
    import statistics

    assert low["eval_accuracy_std"] == pytest.approx(statistics.pstdev([50, 90, 50]))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_grid_cell_interrupted_then_resumed(tmp_path, tiny, rte, monkeypatch):
    """A grid killed inside its second cell: resuming reuses the first cell and continues the
    second from its checkpoint; grid_results.json equals the uninterrupted grid's."""
    import transformers

    extra = ["--learning_rate_grid", 1e-3, 3e-4, "--max_steps", 6, "--save_steps", 3]
    full = run_glue(glue_argv(tiny, rte, tmp_path / "full", *extra))

    original = transformers.Trainer.training_step
    steps = []

    def dying_step(self, *args, **kwargs):
        if len(steps) == 6 + 4:  # the first cell's 6 steps, then 4 of the second
            raise KeyboardInterrupt
        steps.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(transformers.Trainer, "training_step", dying_step)
    out = tmp_path / "grid"
    with pytest.raises(KeyboardInterrupt):
        run_glue(glue_argv(tiny, rte, out, *extra))
    monkeypatch.setattr(transformers.Trainer, "training_step", original)
    first, second = out / "lr0.001_bs4_ep3_seed42", out / "lr0.0003_bs4_ep3_seed42"
    assert (second / "checkpoint-3").is_dir() and not (second / "all_results.json").exists()
    stamp = (first / "all_results.json").stat().st_mtime_ns
    steps.clear()
    monkeypatch.setattr(
        transformers.Trainer,
        "training_step",
        lambda self, *a, **k: steps.append(1) or original(self, *a, **k),
    )
    resumed = run_glue(glue_argv(tiny, rte, out, *extra, "--resume_from_checkpoint", "true"))
    assert len(steps) == 3  # only the second cell's last 3 steps were trained again
    assert (first / "all_results.json").stat().st_mtime_ns == stamp
    for got, want in zip(resumed["runs"], full["runs"], strict=True):
        assert got["eval_accuracy"] == pytest.approx(want["eval_accuracy"])
        assert got["eval_loss"] == pytest.approx(want["eval_loss"], abs=1e-6)
    assert json.loads((out / "grid_results.json").read_text())["chosen_run"]["seed"] == 42


def test_evaluation_keeps_dataset_order_when_training_groups_by_length(tmp_path):
    """transformers 5 length-groups the *evaluation* batches too under ``--train_sampling_strategy
    group_by_length``, which scrambles every prediction mapped back by position (NER words, SQuAD
    answers, GLUE submission rows). Every recipe's trainer evaluates in dataset order."""
    from types import SimpleNamespace

    import transformers
    from datasets import Dataset

    from recipes.glue.recipe import GlueRecipe
    from recipes.ner.recipe import NerRecipe
    from recipes.squad.recipe import SquadRecipe
    from recipes.swag import SwagRecipe
    from recipes.trainer import Trainer

    lengths = [(i * 37) % 23 + 1 for i in range(200)]
    ds = Dataset.from_dict({"input_ids": [[1] * n for n in lengths]})
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        train_sampling_strategy="group_by_length",
        per_device_eval_batch_size=8,
        report_to=[],
    )
    fake = SimpleNamespace(args=args, processing_class=None)
    in_order = list(range(len(ds)))
    assert list(transformers.Trainer._get_eval_sampler(fake, ds)) != in_order  # the trap
    for recipe in (GlueRecipe, NerRecipe, SquadRecipe, SwagRecipe):
        cls = recipe().trainer_class()
        assert issubclass(cls, Trainer), recipe
        assert list(cls._get_eval_sampler(fake, ds)) == in_order, recipe
