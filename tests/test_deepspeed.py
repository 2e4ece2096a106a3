"""DeepSpeed ZeRO-1/2/3 really running on two CPU processes through `accelerate launch` with the
shipped configs: DeepSpeed reported with 2 processes, loss falling, DeepSpeed's checkpoint
format, exact stop + resume, a gathered `model/` folder that stock transformers loads, the
ranks-identical check on gathered weights, optimizer settings surviving offload; and the launch
checks (a DeepSpeed config that would end up as DDP, or processes that do not join one group,
are refused in one line).

DeepSpeed compiles its ops on first use (the CPU comm op, ~1 min; DeepSpeedCPUAdam for offload,
~1.5 min more) into torch's extension cache (TORCH_EXTENSIONS_DIR, by default
~/.cache/torch_extensions), so only the first run on a machine pays for it."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ports import free_port
from tiny_pretrain import TINY_MODEL_RUN

from modeling.cli import UsageError

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "recipes" / "bert-tiny" / "corpus.txt"
PY = sys.executable
STEPS = 10

RECIPE = dict(
    TINY_MODEL_RUN,
    learning_rate=1e-2,
    warmup_steps=2,
    max_steps=STEPS,
    train_batch_size=[8],
    gradient_accumulation_steps=[2],
    adam_epsilon=1e-6,
    weight_decay=0.01,
    seed=11,
)


# ---------------------------------------------------------------------------------------------
# The launch checks, on stand-in accelerators (no processes)
# ---------------------------------------------------------------------------------------------


def _accelerator(kind: str, processes: int, zero: dict | None = None):
    from accelerate.utils import DistributedType

    plugin = SimpleNamespace(deepspeed_config={"zero_optimization": zero or {}})
    return SimpleNamespace(
        distributed_type=getattr(DistributedType, kind),
        num_processes=processes,
        state=SimpleNamespace(deepspeed_plugin=plugin if kind == "DEEPSPEED" else None),
    )


def test_deepspeed_config_ending_as_ddp_is_refused():
    from modeling import zero

    env = {"ACCELERATE_USE_DEEPSPEED": "true", "WORLD_SIZE": "2"}
    with pytest.raises(UsageError, match="asks for DeepSpeed but the run would be MULTI_CPU"):
        zero.check_launch(_accelerator("MULTI_CPU", 2), env)
    with pytest.raises(UsageError, match="started 2 processes but they formed a group of 1"):
        zero.check_launch(_accelerator("DEEPSPEED", 1, {"stage": 2}), env)
    with pytest.raises(UsageError, match="stage3_gather_16bit_weights_on_model_save"):
        zero.check_launch(_accelerator("DEEPSPEED", 2, {"stage": 3}), env)
    zero.check_launch(_accelerator("DEEPSPEED", 2, {"stage": 2}), env)  # fine
    zero.check_launch(_accelerator("MULTI_CPU", 2), {"WORLD_SIZE": "2"})  # DDP asked, DDP got
    with pytest.raises(UsageError, match="started 2 processes but they formed a group of 1"):
        zero.check_launch(_accelerator("NO", 1), {"WORLD_SIZE": "2"})


def test_offload_refuses_optimizers_deepspeed_cannot_stand_for():
    from modeling import zero

    offload = _accelerator("DEEPSPEED", 2, {"stage": 2, "offload_optimizer": {"device": "cpu"}})
    for optim in ("lamb", "adamw_bert"):
        with pytest.raises(UsageError, match=f"optim {optim}: .*DeepSpeedCPUAdam"):
            zero.check_offload(offload, optim)
    zero.check_offload(offload, "adamw")
    zero.check_offload(_accelerator("DEEPSPEED", 2, {"stage": 2}), "lamb")  # no offload: fine


def test_optimizer_settings_see_through_wrappers_and_name_what_is_lost():
    import torch

    from modeling import zero

    p, q = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(1))
    inner = torch.optim.AdamW(
        [{"params": [p], "weight_decay": 0.01}, {"params": [q], "weight_decay": 0.0}],
        lr=1e-3,
        betas=(0.9, 0.98),
        eps=1e-6,
    )
    wrapped = SimpleNamespace(optimizer=SimpleNamespace(optimizer=inner))
    settings = zero.optimizer_settings(wrapped)
    assert settings["class"] == "AdamW"
    assert settings["groups"][0] == {"lr": 1e-3, "betas": [0.9, 0.98], "eps": 1e-6,
                                     "weight_decay": 0.01}  # fmt: skip
    assert zero.settings_lost(settings, (0.9, 0.98), 1e-6, [0.01, 0.0]) == []
    assert zero.settings_lost(settings, (0.9, 0.999), 1e-8, [0.01, 0.0]) == ["betas", "eps"]
    assert zero.settings_lost(settings, (0.9, 0.98), 1e-6, [0.01, 0.01]) == ["weight_decay"]


# ---------------------------------------------------------------------------------------------
# Real runs: 2 CPU processes through accelerate launch
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ds_data(tmp_path_factory):
    pytest.importorskip("deepspeed")
    from modeling.pretraining_data import create_pretraining_data
    from modeling.tokenizer_training import train_wordpiece

    root = tmp_path_factory.mktemp("ds_data")
    train_wordpiece([CORPUS], root / "tok", vocab_size=600, min_frequency=1)
    create_pretraining_data([CORPUS], root / "d64", str(root / "tok"), max_seq_length=64,
                            dupe_factor=3, num_validation_docs=2, progress=False)  # fmt: skip
    recipe = root / "recipe.yaml"
    settings = dict(RECIPE, train_data=[str(root / "d64")])
    recipe.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    return recipe


def _launch(config, recipe, out, *flags, launcher_flags=(), timeout=600):
    env = dict(os.environ, HF_HUB_OFFLINE="1", DS_ACCELERATOR="cpu")
    env.pop("OMP_NUM_THREADS", None)
    cmd = [str(Path(PY).with_name("accelerate")), "launch", "--config_file", str(config),
           "--num_processes", "2", "--main_process_port", str(free_port()), *launcher_flags,
           "scripts/pretrain.py", "--config", str(recipe), "--output_dir", str(out), *flags]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(proc):
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _losses(out) -> dict[int, float]:
    rows = [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


@pytest.fixture(scope="module")
def full_runs(ds_data, tmp_path_factory):
    """One uninterrupted run per ZeRO stage, launched on first use."""
    runs: dict[int, Path] = {}

    def get(stage: int) -> Path:
        if stage not in runs:
            out = tmp_path_factory.mktemp(f"zero{stage}")
            _ok(_launch(REPO / "accelerate_configs" / f"deepspeed_zero{stage}.yaml", ds_data, out))
            runs[stage] = out
        return runs[stage]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_stage_trains_on_two_cpu_processes(full_runs, stage):
    import transformers

    from modeling.checkpointing import param_fingerprint

    out = full_runs(stage)
    result = json.loads((out / "train_results.json").read_text())
    assert result["distributed_type"] == "DEEPSPEED" and result["zero_stage"] == stage
    assert result["num_processes"] == 2 and result["step"] == STEPS
    losses = _losses(out)
    assert sorted(losses) == list(range(1, STEPS + 1))
    first, last = sum(losses[s] for s in (1, 2, 3)) / 3, sum(losses[s] for s in (8, 9, 10)) / 3
    assert last < first - 0.3, losses
    # DeepSpeed's checkpoint: one model/optimizer partition file per rank, no DDP files
    state = out / f"checkpoint-{STEPS:07d}" / "state"
    files = sorted(p.name for p in (state / "pytorch_model").iterdir())
    assert "zero_pp_rank_1_mp_rank_00_optim_states.pt" in files, files
    assert not (state / "model.safetensors").exists() and not (state / "optimizer.bin").exists()
    # the model/ folder holds the full (gathered) weights, loads in stock transformers, and the
    # fingerprint every rank reported is the one of those full weights
    stock, info = transformers.BertForPreTraining.from_pretrained(
        str(out / "model"), output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert sum(p.numel() for p in stock.parameters()) > 40_000
    fingerprints = result["param_fingerprints"]
    assert len(fingerprints) == 2 and result["ranks_identical"]
    from modeling import BertForPreTraining

    assert (
        param_fingerprint(BertForPreTraining.from_pretrained(str(out / "model")))
        == (fingerprints[0])
    )


@pytest.mark.slow
def test_zero_stages_compute_the_same_losses(full_runs):
    """ZeRO partitions state, not the math: the three stages log the same losses."""
    losses = [_losses(full_runs(stage)) for stage in (1, 2, 3)]
    for step in range(1, STEPS + 1):
        assert losses[1][step] == pytest.approx(losses[0][step], abs=1e-4), step
        assert losses[2][step] == pytest.approx(losses[0][step], abs=1e-4), step


@pytest.mark.slow
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_stop_and_resume_equals_uninterrupted(full_runs, ds_data, tmp_path, stage):
    config = REPO / "accelerate_configs" / f"deepspeed_zero{stage}.yaml"
    _ok(_launch(config, ds_data, tmp_path, "--stop_at_step", "5"))
    assert not (tmp_path / "model").exists()
    proc = _ok(_launch(config, ds_data, tmp_path, "--resume_from_checkpoint", "latest"))
    assert "resumed from" in proc.stdout and "at step 5" in proc.stdout
    full = full_runs(stage)
    a, b = _losses(full), _losses(tmp_path)
    for step in range(1, STEPS + 1):
        assert b[step] == pytest.approx(a[step], abs=1e-6), step
    wa, wb = _weights(full / "model"), _weights(tmp_path / "model")
    assert wa.keys() == wb.keys()
    for name in wa:
        assert (wa[name] - wb[name]).abs().max().item() <= 1e-6, name


@pytest.mark.slow
def test_offload_keeps_our_optimizer_settings(ds_data, tmp_path):
    """With offload_optimizer accelerate runs DeepSpeedCPUAdam built from our parameter groups:
    betas, epsilon and the per-group weight decay must be ours."""
    ds = json.loads((REPO / "accelerate_configs" / "deepspeed_zero2.json").read_text())
    ds["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    yaml = (REPO / "accelerate_configs" / "deepspeed_zero2.yaml").read_text()
    config = tmp_path / "offload.yaml"
    config.write_text(
        yaml.replace("accelerate_configs/deepspeed_zero2.json", str(tmp_path / "ds.json"))
    )
    proc = _ok(_launch(config, ds_data, tmp_path / "out", "--adam_beta2", "0.98",
                       timeout=900))  # fmt: skip
    assert "offload_optimizer: DeepSpeedCPUAdam with our lr, betas, eps and weight decay" in (
        proc.stdout
    )
    result = json.loads((tmp_path / "out" / "train_results.json").read_text())
    assert result["optimizer"]["class"] == "DeepSpeedCPUAdam"
    groups = result["optimizer"]["groups"]
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0]
    assert all(g["betas"] == [0.9, 0.98] and g["eps"] == 1e-6 for g in groups)
    losses = _losses(tmp_path / "out")
    assert sum(losses[s] for s in (8, 9, 10)) < sum(losses[s] for s in (1, 2, 3)) - 0.9
