"""The pretraining loop: schedule, optimizers, sample-indexed data order, exact resume, the
saved folder in stock transformers, two CPU processes through `accelerate launch`, and
one-line errors for bad configurations. Data: a small corpus shipped in recipes/bert-tiny."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_port
from tiny_pretrain import TINY_MODEL_RUN

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "recipes" / "bert-tiny" / "corpus.txt"
PY = sys.executable

TINY = dict(
    TINY_MODEL_RUN,
    learning_rate=2e-3,
    warmup_steps=2,
)


def _args(tiny_data, out, **kw):
    from modeling.pretraining_args import PretrainingArguments

    base = dict(
        TINY,
        train_data=[str(tiny_data / "d64"), str(tiny_data / "d128")],
        phase_fractions=[0.5, 0.5],
        max_steps=8,
        train_batch_size=[8, 4],
        gradient_accumulation_steps=[2, 1],
        output_dir=str(out),
        seed=3,
    )
    base.update(kw)
    return PretrainingArguments(**base)


def _losses(out):
    rows = [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


# ------------------------------------------------------------------------------------ pure parts
def test_bert_schedule_matches_reference_formula():
    from modeling.optim import lr_factor

    # Google optimization.py: warmup step/warmup, then polynomial decay 1 - step/total
    assert lr_factor(0, "bert", 10, 100) == 0.0
    assert lr_factor(5, "bert", 10, 100) == 0.5
    assert lr_factor(10, "bert", 10, 100) == pytest.approx(0.9)
    assert lr_factor(50, "bert", 10, 100) == pytest.approx(0.5)
    assert lr_factor(100, "bert", 10, 100) == 0.0
    # transformers' linear: the decay starts from the peak after warmup
    assert lr_factor(10, "linear", 10, 100) == 1.0
    assert lr_factor(55, "linear", 10, 100) == pytest.approx(0.5)


def test_phase_steps_and_validation(tiny_data, tmp_path):
    from modeling.pretraining_args import PretrainingArguments, parse_duration

    args = _args(tiny_data, tmp_path, max_steps=1_000_000, phase_fractions=[0.9, 0.1])
    assert args.phase_steps() == [900_000, 100_000]
    assert _args(tiny_data, tmp_path, max_steps=7).phase_steps() == [4, 3]
    assert parse_duration("30m") == 1800 and parse_duration("1.5h") == 5400
    assert parse_duration(90) == 90
    with pytest.raises(ValueError, match="sum to 1"):
        _args(tiny_data, tmp_path, phase_fractions=[0.5, 0.4])
    with pytest.raises(ValueError, match="train_batch_size: 3 values for 2 phases"):
        _args(tiny_data, tmp_path, train_batch_size=[8, 8, 8])
    with pytest.raises(ValueError, match="train_data"):
        PretrainingArguments()


def test_sample_order_is_indexed_by_position():
    from modeling.phases import SampleOrder

    order = SampleOrder(10, seed=5)
    stream = order.indices(0, 35)
    for epoch in range(3):  # every epoch is a permutation, different ones
        assert sorted(stream[epoch * 10 : epoch * 10 + 10]) == list(range(10))
    assert stream[:10] != stream[10:20]
    # any stretch computed directly from its start equals the stretch of the full stream
    fresh = SampleOrder(10, seed=5)
    assert fresh.indices(17, 13) == stream[17:30]
    assert SampleOrder(10, seed=6).indices(0, 10) != stream[:10]


def test_micro_batches_partition_each_global_batch(tiny_data):
    from modeling.phases import PhaseBatches, SampleOrder
    from modeling.pretraining_data import load_pretraining_dataset

    ds = load_pretraining_dataset(tiny_data / "d64")
    order = SampleOrder(len(ds), 1)
    got = {}
    for rank in range(2):
        pb = PhaseBatches(ds, None, order, 0, 3, 6, 8, 2, 2, rank, 1)  # resume at step 3
        assert len(pb) == 6  # 3 steps x 2 micro-batches
        for k in range(len(pb)):
            got[(k // 2, k % 2, rank)] = pb.sample_indices(k)
    for s in range(3):  # steps 3, 4, 5 of the stream, 8 samples each
        parts = [got[(s, m, r)] for m in range(2) for r in range(2)]
        assert all(len(p) == 2 for p in parts)
        assert sum(parts, []) == order.indices((3 + s) * 8, 8)


def test_lamb_and_google_adam_one_step_by_hand():
    import torch

    from modeling.optim import Lamb as lamb_cls

    p0 = torch.tensor([3.0, -4.0])
    g = torch.tensor([0.5, 1.0])
    lr, wd, eps, b1, b2 = 0.1, 0.01, 1e-6, 0.9, 0.999

    # LAMB, step 1: m_hat = g, v_hat = g^2, u = g/(|g|+eps) + wd p, p -= lr ||p||/||u|| u
    p = p0.clone().requires_grad_()
    opt = lamb_cls([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    p.grad = g.clone()
    opt.step()
    u = g / (g.abs() + eps) + wd * p0
    expected = p0 - lr * (p0.norm() / u.norm()) * u
    assert torch.allclose(p.detach(), expected, atol=1e-6)

    # Google's AdamWeightDecay (no bias correction): m = 0.1 g, v = 0.001 g^2
    p = p0.clone().requires_grad_()
    opt = lamb_cls(
        [p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, bias_correction=False,
        trust_ratio=False,
    )  # fmt: skip
    p.grad = g.clone()
    opt.step()
    m, v = (1 - b1) * g, (1 - b2) * g * g
    expected = p0 - lr * (m / (v.sqrt() + eps) + wd * p0)
    assert torch.allclose(p.detach(), expected, atol=1e-6)


def test_optimizer_groups_skip_decay_on_bias_and_layernorm(tiny_data, tmp_path):
    from modeling.optim import build_optimizer
    from modeling.pretraining import build_model

    args = _args(tiny_data, tmp_path, optim="lamb", weight_decay=0.01)
    model = build_model(args, 600, 0)
    opt = build_optimizer(model, args)
    assert type(opt).__name__ == "Lamb"
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    names = {id(p): n for n, p in model.named_parameters()}
    assert decayed and all(
        "LayerNorm" not in names[i] and not names[i].endswith("bias") for i in decayed
    )
    assert "bert.encoder.layer.0.attention.self.query.weight" in {names[i] for i in decayed}
    assert [g["trust_ratio"] for g in opt.param_groups] == [True, False]
    assert [g["bias_correction"] for g in opt.param_groups] == [True, True]


def test_param_groups_decay_weights_only_and_cover_every_trainable_parameter():
    import torch

    from modeling import BertConfig, BertForSequenceClassification
    from modeling.optim import param_groups

    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = [names[id(p)] for p in decay["params"]]
    kept = [names[id(p)] for p in no_decay["params"]]
    assert all(not n.endswith("bias") and "LayerNorm" not in n for n in decayed)
    assert "classifier.weight" in decayed and "classifier.bias" in kept
    assert any("LayerNorm" in n for n in kept)
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert sorted(decayed + kept) == sorted(trainable)  # each once, frozen ones left out
    assert "bert.embeddings.word_embeddings.weight" not in trainable
    assert isinstance(torch.optim.AdamW([decay, no_decay]), torch.optim.Optimizer)


# ------------------------------------------------------------------------------- training runs
@pytest.fixture(scope="module")
def full_run(tiny_data, tmp_path_factory):
    from modeling.pretraining import pretrain

    out = tmp_path_factory.mktemp("full")
    result = pretrain(_args(tiny_data, out))
    return out, result


@pytest.mark.slow
def test_interrupt_and_resume_equals_uninterrupted(tiny_data, full_run, tmp_path):
    """Stop at step 3 (phase 1, mid-accumulation schedule) and at step 5 (phase 2), resume
    with 'latest' each time: losses and final weights equal the uninterrupted run."""
    from modeling.checkpointing import list_checkpoints
    from modeling.pretraining import pretrain

    full_out, full_result = full_run
    assert full_result["step"] == 8 and full_result["stop_reason"] == "max_steps"
    r1 = pretrain(_args(tiny_data, tmp_path, stop_at_step=3))
    assert r1["stop_reason"] == "stop_at_step" and r1["step"] == 3
    state = json.loads((tmp_path / "checkpoint-0000003" / "trainer_state.json").read_text())
    assert (state["phase"], state["phase_step"], state["data_position"]) == (0, 3, 24)
    r2 = pretrain(_args(tiny_data, tmp_path, stop_at_step=5, resume_from_checkpoint="latest"))
    assert r2["step"] == 5
    r3 = pretrain(_args(tiny_data, tmp_path, resume_from_checkpoint="latest"))
    assert r3["step"] == 8 and r3["stop_reason"] == "max_steps"

    full, resumed = _losses(full_out), _losses(tmp_path)
    assert sorted(full) == sorted(resumed) == list(range(1, 9))
    for step in full:
        assert resumed[step] == pytest.approx(full[step], abs=1e-6), step
    a, b = _weights(full_out / "model"), _weights(tmp_path / "model")
    assert a.keys() == b.keys()
    for name in a:
        assert (a[name] - b[name]).abs().max().item() <= 1e-6, name
    # save_total_limit keeps the newest two
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-0000005",
        "checkpoint-0000008",
    ]


def test_dropout_rng_matters_for_resume(tiny_data, full_run, tmp_path):
    """Guard that the resume test can fail: another seed gives other losses at once."""
    full_out, _ = full_run
    from modeling.pretraining import pretrain

    pretrain(_args(tiny_data, tmp_path, seed=4, max_steps=8, stop_at_step=2))
    assert _losses(tmp_path)[1] != pytest.approx(_losses(full_out)[1], abs=1e-6)


def test_saved_folder_loads_in_stock_transformers(tiny_data, full_run):
    import torch
    import transformers

    from modeling import BertForPreTraining
    from modeling.collators import build_collator
    from modeling.pretraining_data import load_pretraining_dataset

    out, _ = full_run
    folder = out / "model"
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert len(tokenizer) == 600
    stock = transformers.BertForPreTraining.from_pretrained(str(folder)).eval()
    ours = BertForPreTraining.from_pretrained(str(folder)).eval()
    ds = load_pretraining_dataset(tiny_data / "d128", "validation")
    examples = [ds[i] for i in range(min(4, len(ds)))]
    batch = build_collator("token", tokenizer, seed=0)(examples)
    batch.pop("labels"), batch.pop("next_sentence_label")
    with torch.no_grad():
        a, b = stock(**batch), ours(**batch)
    real = batch["attention_mask"].bool()
    assert torch.allclose(a.prediction_logits[real], b.prediction_logits[real], atol=1e-5)
    assert torch.allclose(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-5)
    # the weights are the trained ones, not a fresh initialisation
    fresh = transformers.BertForPreTraining(stock.config)
    assert not torch.allclose(
        fresh.bert.encoder.layer[0].attention.self.query.weight,
        stock.bert.encoder.layer[0].attention.self.query.weight,
    )


def test_full_run_logs_metrics(full_run):
    out, result = full_run
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    train = [r for r in log if "loss" in r]
    assert [r["phase"] for r in train] == [0] * 4 + [1] * 4
    for key in ("mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy", "learning_rate",
                "grad_norm", "tokens_per_second", "mfu"):  # fmt: skip
        assert all(math.isfinite(r[key]) for r in train), key
    assert train[0]["loss"] == pytest.approx(train[0]["mlm_loss"] + train[0]["nsp_loss"], rel=1e-6)
    assert train[0]["learning_rate"] == 0.0  # bert schedule: step 0 of the warmup
    assert result["last_eval"]["eval_mlm_accuracy"] >= 0
    assert result["ranks_identical"] and result["num_processes"] == 1
    assert 0 < result["unigram_baseline"]["accuracy"] < 0.5


def test_max_time_saves_a_checkpoint_and_stops(tiny_data, tmp_path):
    from modeling.pretraining import pretrain

    result = pretrain(
        _args(tiny_data, tmp_path, max_time="0s", report_to=["tensorboard"], run_name="tb")
    )
    assert result["stop_reason"] == "max_time" and result["step"] == 1
    assert (tmp_path / "checkpoint-0000001" / "state").is_dir()
    assert not (tmp_path / "model").exists()  # only a finished run writes output_dir/model
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))  # the tensorboard tracker


def test_batch_not_divisible_fails_at_start(tiny_data, tmp_path):
    from modeling.cli import UsageError
    from modeling.pretraining import pretrain

    with pytest.raises(UsageError, match=r"train_batch_size\[1\]=6 is not divisible"):
        pretrain(
            _args(tiny_data, tmp_path, train_batch_size=[8, 6], gradient_accumulation_steps=[2, 4])
        )
    assert not list(tmp_path.glob("checkpoint-*"))


def test_unigram_baseline_counts_masked_tokens(tiny_data):
    from transformers import AutoTokenizer

    from modeling.collators import build_collator
    from modeling.meters import unigram_baseline
    from modeling.pretraining_data import load_pretraining_dataset

    ds = load_pretraining_dataset(tiny_data / "d64")
    tok = AutoTokenizer.from_pretrained(str(tiny_data / "d64" / "tokenizer"))
    base = unigram_baseline(ds, build_collator("token", tok), num_samples=len(ds))
    assert 0 < base["accuracy"] < 0.5 and base["masked"] > 50
    assert tok.convert_ids_to_tokens(base["token_id"]) in {".", "the", ",", "and", "a", "of"}


# ------------------------------------------------------------------------- command-line runs
def _run(cmd, env_extra=None, timeout=600):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", **(env_extra or {}))
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_two_cpu_processes_through_accelerate_launch(tiny_data, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    settings = dict(
        TINY,
        train_data=[str(tiny_data / "d64")],
        max_seq_length=[64],
        max_steps=20,
        train_batch_size=[8],
        gradient_accumulation_steps=[2],
        learning_rate=1e-2,
        output_dir=str(tmp_path / "out"),
        seed=11,
    )
    recipe.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    launcher = Path(PY).with_name("accelerate")
    proc = _run(
        [str(launcher), "launch", "--config_file", "accelerate_configs/cpu.yaml",
         "--main_process_port", str(free_port()), "scripts/pretrain.py", "--config", str(recipe)]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "train_results.json").read_text())
    assert result["num_processes"] == 2
    fingerprints = result["param_fingerprints"]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1]
    losses = _losses(tmp_path / "out")
    assert sorted(losses) == list(range(1, 21))
    first = sum(losses[s] for s in (1, 2, 3)) / 3
    last = sum(losses[s] for s in (18, 19, 20)) / 3
    assert last < first - 0.3, losses
    # the run's weights are the weights each rank held
    from modeling import BertForPreTraining
    from modeling.checkpointing import param_fingerprint

    saved = BertForPreTraining.from_pretrained(str(tmp_path / "out" / "model"))
    assert param_fingerprint(saved) == fingerprints[0]


def test_bad_configuration_is_one_line(tmp_path, tiny_data):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"train_data: [{tiny_data / 'd64'}]\nlearning_rat: 1.0e-4\n")
    proc = _run([PY, "scripts/pretrain.py", "--config", str(bad)], timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {bad}: unknown field 'learning_rat' (see --help for the fields)"
    ]
    proc = _run([PY, "scripts/pretrain.py", "--train_data", str(tmp_path / "nope")], timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: train_data[0]: {tmp_path / 'nope'} not found"
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _run([PY, "scripts/pretrain.py", "--train_data", str(empty)], timeout=120)
    assert proc.returncode == 2 and "has no metadata.json" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_recipes_parse_with_the_papers_settings():
    from modeling.cli import parse_args
    from modeling.pretraining_args import PretrainingArguments

    for model, (layers, hidden) in {"bert-base": (12, 768), "bert-large": (24, 1024)}.items():
        (args,) = parse_args([PretrainingArguments], ["--config", f"recipes/{model}/pretrain.yaml"])
        assert (args.num_hidden_layers, args.hidden_size) == (layers, hidden)
        assert args.max_steps == 1_000_000 and args.phase_steps() == [900_000, 100_000]
        assert args.train_batch_size == [256] and args.learning_rate == 1e-4
        assert (args.adam_beta1, args.adam_beta2, args.weight_decay) == (0.9, 0.999, 0.01)
        assert args.warmup == 10_000 and args.lr_scheduler_type == "bert"
        assert args.hidden_dropout_prob == args.attention_probs_dropout_prob == 0.1
        assert args.hidden_act == "gelu" and args.max_grad_norm == 1.0
    for model in ("bert-tiny", "bert-mini"):
        (args,) = parse_args([PretrainingArguments], ["--config", f"recipes/{model}/pretrain.yaml"])
        assert args.num_phases == 2 and args.per_phase("phase_fractions") == [0.9, 0.1]


def test_raw_text_is_converted_on_the_fly(tmp_path):
    from modeling import BertForPreTraining
    from modeling.pretraining import PretrainingArguments, pretrain
    from modeling.pretraining_data import load_metadata

    args = PretrainingArguments(
        **dict(
            TINY,
            train_data=[str(CORPUS)],
            max_seq_length=[64],
            tokenizer_vocab_size=500,
            num_validation_docs=2,
            max_steps=2,
            train_batch_size=[4],
            output_dir=str(tmp_path),
        )
    )
    result = pretrain(args)
    assert result["step"] == 2
    meta = load_metadata(tmp_path / "data" / "phase0-64")
    assert meta["inputs"] == [str(CORPUS)] and meta["max_seq_length"] == 64
    assert meta["summary"]["splits"]["validation"]["documents"] == 2
    model = BertForPreTraining.from_pretrained(str(tmp_path / "model"))
    assert model.config.vocab_size == meta["vocab_size"] <= 500


def test_sentence_task_none_has_no_nsp_metrics(tiny_data, tmp_path):
    """RoBERTa-style packed data (no next_sentence_label): MLM only, no NSP columns."""
    from modeling.pretraining import pretrain
    from modeling.pretraining_data import create_pretraining_data

    data = tmp_path / "packed"
    create_pretraining_data(
        [CORPUS], data, str(tiny_data / "tok"), max_seq_length=64, sentence_task="none",
        num_validation_docs=2, progress=False,
    )  # fmt: skip
    args = _args(tiny_data, tmp_path / "out", train_data=[str(data)], phase_fractions=[1.0],
                 max_steps=3, train_batch_size=[4], gradient_accumulation_steps=[1])  # fmt: skip
    result = pretrain(args)
    last = result["last_log"]
    assert last["loss"] == pytest.approx(last["mlm_loss"])
    assert "nsp_accuracy" not in last and "eval_nsp_accuracy" not in result["last_eval"]
