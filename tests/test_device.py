"""CPU set-up: bf16 detection and fallback, threads per process (the launcher's OMP_NUM_THREADS=1
corrected), bf16 autocast numerics of our model, MFU against the bf16 peak, and a single-process
`accelerate launch` (no --cpu) running on every core."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from modeling import device

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "recipes" / "bert-tiny" / "corpus.txt"

X86_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
X86_OLD = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.mark.parametrize(
    "text, expected",
    [(X86_BF16, True), (X86_OLD, False), (ARM_BF16, True), ("processor\t: 0\n", False)],
)
def test_cpu_supports_bf16_reads_the_flags(tmp_path, text, expected, monkeypatch):
    monkeypatch.setattr(device.platform, "system", lambda: "Linux")
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    assert device.cpu_supports_bf16(path) is expected
    assert device.cpu_supports_bf16(tmp_path / "missing") is False


def test_bf16_falls_back_to_fp32_with_a_message(monkeypatch, caplog):
    monkeypatch.setattr(device, "cpu_supports_bf16", lambda: False)
    with caplog.at_level("WARNING", logger="modeling.device"):
        assert device.cpu_mixed_precision("bf16", env={}) == "no"
        # asked for by the accelerate config rather than the recipe
        assert device.cpu_mixed_precision(None, env={"ACCELERATE_MIXED_PRECISION": "bf16"}) == (
            "no"
        )
    assert "no native bf16" in caplog.text and "running fp32" in caplog.text
    assert device.cpu_mixed_precision("no", env={}) == "no"
    assert device.cpu_mixed_precision(None, env={}) is None
    monkeypatch.setattr(device, "cpu_supports_bf16", lambda: True)
    assert device.cpu_mixed_precision("bf16", env={}) == "bf16"


@pytest.mark.parametrize(
    "env, processes, requested, threads",
    [
        ({}, 1, 0, 8),  # plain python: every core
        ({}, 2, 0, 4),  # two processes share the cores
        ({}, 16, 0, 1),  # never 0
        ({"OMP_NUM_THREADS": "1", "ACCELERATE_MIXED_PRECISION": "no"}, 1, 0, 8),  # launcher's 1
        ({"OMP_NUM_THREADS": "1", "TORCHELASTIC_RUN_ID": "x"}, 2, 0, 4),  # torchrun's 1
        ({"OMP_NUM_THREADS": "1"}, 1, 0, 1),  # the user's own 1
        ({"OMP_NUM_THREADS": "3", "ACCELERATE_MIXED_PRECISION": "no"}, 1, 0, 3),  # user's 3
        ({"OMP_NUM_THREADS": "1", "ACCELERATE_MIXED_PRECISION": "no"}, 1, 1, 1),  # explicit
        ({}, 1, 5, 5),
    ],
)
def test_threads_per_process(env, processes, requested, threads):
    got, why = device.cpu_threads_for(processes, requested, env=env, cores=8)
    assert got == threads, why


def test_set_cpu_threads_sets_torch(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    try:
        n, why = device.set_cpu_threads(1)
        assert n == device.available_cores() == torch.get_num_threads()
        assert "not the launcher's default OMP_NUM_THREADS=1" in why
    finally:
        torch.set_num_threads(before)


def test_mfu_denominator_is_the_bf16_peak_under_bf16():
    from modeling.meters import _matmul_dtype

    cpu = torch.device("cpu")
    assert _matmul_dtype(SimpleNamespace(device=cpu, mixed_precision="bf16")) == torch.bfloat16
    assert _matmul_dtype(SimpleNamespace(device=cpu, mixed_precision="no")) == torch.float32


def test_bf16_autocast_training_step_matches_fp32():
    """Our model under CPU bf16 autocast: the matmuls really run in bf16, and loss and gradients
    stay within bf16 rounding of the fp32 step (same weights, same batch)."""
    from modeling import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    config = BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128,
                        sparse_prediction_head=True)  # fmt: skip
    model = BertForPreTraining(config).train()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 500, (4, 32), generator=g)
    labels = torch.full_like(ids, -100)
    labels[:, 3::5] = ids[:, 3::5]
    batch = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels,
                 next_sentence_label=torch.tensor([0, 1, 0, 1]))  # fmt: skip
    losses, grads = {}, {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(2)  # same dropout masks
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model(**batch)
            if precision == "bf16":
                assert out.prediction_logits.dtype == torch.bfloat16
        out.loss.backward()
        losses[precision] = out.loss.item()
        grads[precision] = model.bert.encoder.layer[0].attention.self.query.weight.grad.clone()
    assert losses["bf16"] != losses["fp32"]  # bf16 really ran
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=2e-2)
    cosine = torch.nn.functional.cosine_similarity(
        grads["bf16"].flatten(), grads["fp32"].flatten(), dim=0
    )
    assert cosine > 0.98


@pytest.mark.slow
def test_single_process_accelerate_launch_uses_every_core(tmp_path):
    """`accelerate launch` without --cpu exports OMP_NUM_THREADS=1; the run still uses every
    core (and says so), and bf16 follows the CPU's support."""
    from modeling.pretraining_data import create_pretraining_data
    from modeling.tokenizer_training import train_wordpiece

    train_wordpiece([CORPUS], tmp_path / "tok", vocab_size=600, min_frequency=1)
    create_pretraining_data([CORPUS], tmp_path / "d64", str(tmp_path / "tok"), max_seq_length=64,
                            num_validation_docs=2, progress=False)  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("OMP_NUM_THREADS", None)
    cmd = [str(Path(sys.executable).with_name("accelerate")), "launch", "--num_processes", "1",
           "scripts/pretrain.py", "--train_data", str(tmp_path / "d64"), "--hidden_size", "32",
           "--num_hidden_layers", "1", "--num_attention_heads", "2", "--max_steps", "2",
           "--train_batch_size", "4", "--save_steps", "0", "--disable_tqdm", "true",
           "--max_eval_samples", "8", "--peak_flops", "1e9", "--mixed_precision", "bf16",
           "--output_dir", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "train_results.json").read_text())
    cores = device.available_cores()
    assert result["cpu_threads"] == cores
    line = f"1 process(es), NO, cpu, mixed precision {result['mixed_precision']}, {cores} CPU"
    assert line + " threads each" in proc.stdout
    assert result["mixed_precision"] == ("bf16" if device.cpu_supports_bf16() else "no")


def test_cpu_recipes_ask_for_bf16():
    from modeling.cli import parse_args
    from modeling.pretraining_args import PretrainingArguments

    for model in ("bert-tiny", "bert-mini"):
        (args,) = parse_args([PretrainingArguments], ["--config", f"recipes/{model}/pretrain.yaml"])
        assert args.mixed_precision == "bf16", model


def _rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_release_free_memory_returns_freed_heap_pages():
    """Freed tensors below the mmap threshold stay in glibc's heap, resident, as long as a live
    block sits above them; malloc_trim hands them back (the pretraining loop's remedy)."""
    import torch

    from modeling.device import _glibc, release_free_memory

    if _glibc() is None:
        pytest.skip("no glibc allocator here")
    blocks = [torch.ones(16 * 1024) for _ in range(3000)]  # 64 KB each, ~190 MB
    top = blocks[-1]
    del blocks
    before = _rss_mb()
    assert release_free_memory()
    after = _rss_mb()
    assert before - after > 100, (before, after)
    assert top.sum().item() == 16 * 1024


def test_free_memory_releaser_trims_at_most_every_interval(monkeypatch):
    from modeling import device

    if device._glibc() is None:
        pytest.skip("no glibc allocator here")
    calls = []
    monkeypatch.setattr(device, "release_free_memory", lambda: calls.append(1) or True)
    times = iter([0.0, 3.0, 9.9, 10.0, 12.0, 25.0, 26.0])
    heap = device.FreeMemoryReleaser(enabled=True, interval=10.0, clock=lambda: next(times))
    for _ in range(3):  # t = 3, 9.9 (nothing), 10 (trim, then t=12 is the new start)
        heap.step()
    assert len(calls) == 1
    heap.step()  # t = 25: 13 s since the last trim
    assert len(calls) == 2
    off = device.FreeMemoryReleaser(enabled=False, interval=0.0)
    off.step()
    assert len(calls) == 2
