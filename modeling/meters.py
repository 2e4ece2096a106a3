"""What a pretraining run measures: losses and accuracies (:class:`Meter`), model FLOPs and
MFU (model FLOPs / measured dense-GEMM peak of the device), the unigram baseline an MLM accuracy
must beat, and the curves of a run's ``log.jsonl``.
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path

import torch

from . import atomic, forward_flops_per_token
from .constants import IGNORE_INDEX
from .phases import collate_rows


class Meter:
    """Sums of losses and correct counts, kept on the device until a log step."""

    KEYS = ("loss", "mlm_loss", "nsp_loss", "batches", "mlm_correct", "mlm_total",
            "nsp_correct", "nsp_total")  # fmt: skip

    def __init__(self, device):
        self.device = device
        self.values = torch.zeros(len(self.KEYS), dtype=torch.float64, device=device)

    def add(self, out, batch) -> None:
        with torch.no_grad():
            labels = batch["labels"]
            selected = labels[labels != IGNORE_INDEX]
            logits = out.prediction_logits
            if logits.dim() == 3:  # dense head
                logits = logits[labels != IGNORE_INDEX]
            correct = (logits.argmax(-1) == selected).sum()
            row = [
                out.loss.detach(),
                out.mlm_loss.detach(),
                out.nsp_loss.detach()
                if out.nsp_loss is not None
                else torch.zeros((), device=self.device),
                torch.ones((), device=self.device),
                correct,
                torch.tensor(selected.numel(), device=self.device),
            ]
            if "next_sentence_label" in batch:
                nsp = batch["next_sentence_label"]
                row += [(out.seq_relationship_logits.argmax(-1) == nsp).sum(),
                        torch.tensor(nsp.numel(), device=self.device)]  # fmt: skip
            else:
                row += [torch.zeros((), device=self.device)] * 2
            self.values += torch.stack([r.to(torch.float64) for r in row])

    def summary(self, accelerator, prefix: str = "") -> dict[str, float]:
        """Reduce over processes and reset; losses are means over micro-batches."""
        total = accelerator.reduce(self.values.clone(), reduction="sum").tolist()
        self.values.zero_()
        v = dict(zip(self.KEYS, total))
        n = max(1.0, v["batches"])
        out = {
            f"{prefix}loss": v["loss"] / n,
            f"{prefix}mlm_loss": v["mlm_loss"] / n,
            f"{prefix}mlm_accuracy": v["mlm_correct"] / max(1.0, v["mlm_total"]),
        }
        if v["nsp_total"]:
            out[f"{prefix}nsp_loss"] = v["nsp_loss"] / n
            out[f"{prefix}nsp_accuracy"] = v["nsp_correct"] / v["nsp_total"]
        return out


class Throughput:
    """Tokens, sequences and model FLOPs since the last summary, per process, on the host."""

    def __init__(self, config, peak_flops: float, accelerator):
        self.config, self.peak, self.accelerator = config, peak_flops, accelerator
        self._reset()

    def _reset(self) -> None:
        self.tokens = self.flops = self.sequences = 0.0
        self.t0 = time.perf_counter()

    def add(self, batch: dict) -> None:
        self.tokens += float(batch["attention_mask"].sum())
        self.sequences += batch["attention_mask"].shape[0]
        self.flops += batch_flops(self.config, batch)

    def summary(self) -> dict[str, float]:
        """Rates over all processes since the last call; MFU against ``peak_flops`` each."""
        acc = self.accelerator
        seconds = time.perf_counter() - self.t0
        local = torch.tensor([self.tokens, self.flops, self.sequences], dtype=torch.float64,
                             device=acc.device)  # fmt: skip
        tokens, flops, sequences = acc.reduce(local, reduction="sum").tolist()
        self._reset()
        return {
            "tokens_per_second": tokens / seconds,
            "sequences_per_second": sequences / seconds,
            "mfu": flops / seconds / (self.peak * acc.num_processes),
        }


class RunLog:
    """The run's history: ``log.jsonl`` (rewritten at start with the history being resumed,
    appended at each record), trackers, and the list kept in ``trainer_state.json``."""

    def __init__(self, accelerator, path: Path, history: list[dict], trackers: bool):
        self.accelerator, self.path, self.history, self.trackers = (
            accelerator, Path(path), history, trackers,
        )  # fmt: skip
        if accelerator.is_main_process:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_text(self.path, "".join(json.dumps(r) + "\n" for r in history))

    def record(self, step: int, values: dict) -> None:
        values = {"step": step, **values}
        self.history.append(values)
        if self.accelerator.is_main_process:
            with open(self.path, "a") as fh:
                fh.write(json.dumps(values) + "\n")
        if self.trackers:
            self.accelerator.log({k: v for k, v in values.items() if k != "step"}, step=step)


def measure_peak_flops(device, dtype=None, size: int | None = None, repeats: int = 10) -> float:
    """Dense-matmul FLOP/s of this device and thread count (best of ``repeats``): the MFU
    denominator. On a shared machine it is measured under whatever load is there at start;
    pass ``peak_flops`` for a fixed denominator."""
    size = size or (8192 if device.type == "cuda" else 1024)
    dtype = dtype or torch.float32
    # constant inputs: drawing random ones would move the global RNG (dropout) state
    a = torch.full((size, size), 0.5, device=device, dtype=dtype)
    b = torch.full((size, size), 0.25, device=device, dtype=dtype)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.matmul(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best


def _matmul_dtype(accelerator):
    """The dtype the model's matmuls run in (mixed precision: autocast on GPUs and CPUs, or
    DeepSpeed's 16-bit weights), so MFU is against the peak of that precision."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(
        accelerator.mixed_precision, torch.float32
    )


def batch_flops(config, batch: dict) -> float:
    """Training FLOPs of one micro-batch (3x forward: forward + backward)."""
    tokens = float(batch["attention_mask"].sum())
    masked = float((batch["labels"] != IGNORE_INDEX).sum())
    width = batch["attention_mask"].shape[1]
    return 3 * forward_flops_per_token(config, width, masked / max(1.0, tokens)) * tokens


def unigram_baseline(dataset, collator, num_samples: int = 2000, seed: int = 0) -> dict:
    """MLM accuracy of always predicting the most frequent masked token (a floor to beat)."""
    n = min(num_samples, len(dataset))
    counts: collections.Counter = collections.Counter()
    for i in range(0, n, 256):
        batch = collate_rows(dataset, list(range(i, min(i + 256, n))), collator, seed + i)
        labels = batch["labels"]
        counts.update(labels[labels != IGNORE_INDEX].tolist())
    token, hits = counts.most_common(1)[0]
    return {
        "token_id": token,
        "accuracy": hits / sum(counts.values()),
        "masked": sum(counts.values()),
    }


# --------------------------------------------------------------------------------------------
# Curves
# --------------------------------------------------------------------------------------------

CURVE_COLUMNS = (
    "step", "phase", "elapsed_seconds", "loss", "mlm_loss", "mlm_accuracy", "nsp_loss",
    "nsp_accuracy", "learning_rate", "grad_norm", "tokens_per_second", "mfu", "eval_mlm_loss",
    "eval_mlm_accuracy", "eval_nsp_accuracy",
)  # fmt: skip


def write_curves(
    log_path: str | Path,
    csv_path: str | Path,
    png_path: str | Path | None = None,
    baseline: float | None = None,
) -> list[dict]:
    """Turn a run's ``log.jsonl`` into a CSV (training and evaluation rows merged per step) and,
    with matplotlib installed, a PNG of the MLM loss/accuracy and NSP accuracy curves."""
    import csv

    rows: dict[int, dict] = {}
    for line in Path(log_path).read_text().splitlines():
        record = json.loads(line)
        rows.setdefault(record["step"], {}).update(record)
    table = [rows[s] for s in sorted(rows)]
    with atomic.atomic_open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CURVE_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)
    if png_path is None:
        return table
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(key):
        pts = [(r["step"], r[key]) for r in table if r.get(key) is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, keys, title in (
        (axes[0], ("mlm_loss", "eval_mlm_loss"), "MLM loss"),
        (axes[1], ("mlm_accuracy", "eval_mlm_accuracy"), "MLM accuracy"),
        (axes[2], ("nsp_accuracy", "eval_nsp_accuracy"), "NSP accuracy"),
    ):
        for key, style in zip(keys, ("-", "o-")):
            x, y = series(key)
            if x:
                ax.plot(x, y, style, label=key, markersize=3)
        if title == "MLM accuracy" and baseline is not None:
            ax.axhline(baseline, color="gray", linestyle="--", label="unigram baseline")
        switches = [r["step"] for a, r in zip(table, table[1:]) if a.get("phase") != r.get("phase")]
        for s in switches:
            ax.axvline(s, color="red", linestyle=":", label="phase switch")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    Path(png_path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return table
