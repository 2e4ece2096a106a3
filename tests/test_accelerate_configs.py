"""The accelerate launch configurations: each one parses with accelerate's own loader, and each
DeepSpeed JSON is accepted by DeepSpeed's own config parser (ZeRO runs: tests/test_deepspeed.py)."""

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "accelerate_configs"
EXPECTED = {
    "cpu.yaml": ("MULTI_GPU", 2),
    "cpu_single.yaml": ("NO", 1),
    "single_gpu.yaml": ("NO", 1),
    "multi_gpu.yaml": ("MULTI_GPU", 8),
    "deepspeed_zero1.yaml": ("DEEPSPEED", 8),
    "deepspeed_zero2.yaml": ("DEEPSPEED", 8),
    "deepspeed_zero3.yaml": ("DEEPSPEED", 8),
    "multi_node.yaml": ("MULTI_GPU", 16),
}


def test_every_config_is_listed():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_accelerate_parses_config(name):
    from accelerate.commands.config.config_args import load_config_from_file

    cfg = load_config_from_file(str(CONFIGS / name))
    kind, processes = EXPECTED[name]
    assert str(cfg.distributed_type).split(".")[-1] == kind
    assert cfg.num_processes == processes
    if name.startswith("cpu"):
        # MULTI_CPU or --cpu would start a single process; MULTI_GPU + use_cpu gives gloo DDP
        assert cfg.use_cpu is True
    if name == "multi_node.yaml":
        assert cfg.num_machines == 2 and cfg.main_process_ip and cfg.main_process_port
    if kind == "DEEPSPEED":
        ds_file = cfg.deepspeed_config["deepspeed_config_file"]
        assert (REPO / ds_file).is_file(), ds_file


def _fill_auto(value, fill):
    if isinstance(value, dict):
        return {
            k: fill.get(k, "auto") if v == "auto" else _fill_auto(v, fill) for k, v in value.items()
        }
    return value


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_deepspeed_parser_accepts_config(stage):
    """What accelerate does at launch: fill the "auto" fields, then DeepSpeed parses the dict."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig

    raw = json.loads((CONFIGS / f"deepspeed_zero{stage}.json").read_text())
    fill = {
        "enabled": False,
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 4,
        "train_batch_size": 32,  # world size 1 outside a launch: 8 x 4 x 1
        "gradient_clipping": 1.0,
        "reduce_bucket_size": 65536,
        "stage3_prefetch_bucket_size": 58982,
        "stage3_param_persistence_threshold": 2560,
    }
    filled = _fill_auto(raw, fill)
    filled["bf16"]["enabled"] = True
    assert "auto" not in json.dumps(filled)
    cfg = DeepSpeedConfig(filled)
    assert cfg.zero_optimization_stage == stage
    assert cfg.gradient_clipping == 1.0
    assert cfg.train_batch_size == 32 and cfg.gradient_accumulation_steps == 4
    assert cfg.bfloat16_config.enabled and not cfg.float16_config.enabled
    if stage == 3:
        assert cfg.zero_config.gather_16bit_weights_on_model_save


def test_deepspeed_parser_rejects_inconsistent_batch():
    """The parser is strict: a batch that does not factor is refused (so the test above means
    something)."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig

    raw = json.loads((CONFIGS / "deepspeed_zero2.json").read_text())
    filled = _fill_auto(
        raw,
        {
            "enabled": False,
            "train_micro_batch_size_per_gpu": 8,
            "gradient_accumulation_steps": 4,
            "train_batch_size": 30,
            "gradient_clipping": 1.0,
        },
    )
    with pytest.raises(AssertionError):
        DeepSpeedConfig(filled)
