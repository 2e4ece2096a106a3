"""Checkpoints of a pretraining run: ``output_dir/checkpoint-<step>/``, written to a temporary
folder and renamed when complete, the last ``save_total_limit`` kept.

Each holds ``state/`` (``accelerator.save_state``: model, optimizer, scheduler, RNG states of
every process; DeepSpeed-aware), ``model/`` (``save_pretrained`` + tokenizer, loads in stock
``transformers.BertForPreTraining``) and ``trainer_state.json`` (step, phase, data position,
log history, arguments, data signatures).

No run destroys or mixes another: :func:`check_output_dir` refuses a folder holding another run
(unless ``overwrite_output_dir``), :func:`find_checkpoint` refuses ``latest`` without a complete
checkpoint, :func:`check_resume` and :func:`check_data_signatures` refuse a resume whose
settings or data would make it differ from an uninterrupted run (unless
``ignore_resume_mismatch``), and :func:`prune` never removes a checkpoint newer than the one just
written.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from .cli import UsageError
from .pretraining_args import PretrainingArguments
from .tokenizer_folder import save_tokenizer

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE = "trainer_state.json"


# Settings a resumed run may change: they decide what is logged, kept or measured, not what is
# computed. Every other field of PretrainingArguments must match the checkpoint's.
RESUME_FREE_FIELDS = frozenset({
    "output_dir", "overwrite_output_dir", "resume_from_checkpoint", "ignore_resume_mismatch",
    "save_steps", "save_total_limit", "max_time", "stop_at_step", "logging_steps", "eval_steps",
    "max_eval_samples", "per_device_eval_batch_size", "report_to", "run_name", "peak_flops",
    "disable_tqdm", "dataloader_num_workers", "num_cpu_threads", "push_to_hub", "hub_model_id",
    "hub_private_repo",
    "train_data",  # compared by content (data_signatures): moved data resumes exactly
})  # fmt: skip
# Fields even --ignore_resume_mismatch cannot change: the saved state would not fit.
RESUME_FIXED_FIELDS = frozenset({
    "optim", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "max_position_embeddings",
})  # fmt: skip
RUN_FILES = ("log.jsonl", "train_results.json", "model")


def checkpoint_step(path: Path) -> int:
    return int(CHECKPOINT_PATTERN.match(path.name).group(1))


def checkpoint_dirs(output_dir: str | Path) -> list[Path]:
    """Every ``checkpoint-<step>`` folder, complete or not, oldest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [d for d in root.iterdir() if CHECKPOINT_PATTERN.match(d.name) and d.is_dir()]
    return sorted(found, key=checkpoint_step)


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints (with trainer_state.json), oldest first."""
    return [d for d in checkpoint_dirs(output_dir) if (d / TRAINER_STATE).is_file()]


def find_checkpoint(spec: str, output_dir: str | Path) -> Path | None:
    """The checkpoint ``resume_from_checkpoint`` names: a folder, ``latest`` (the newest in
    ``output_dir``; none is an error) or ``auto`` (the newest, or None for a new run)."""
    if spec in ("latest", "auto"):
        found = checkpoint_dirs(output_dir)
        if not found:
            if spec == "auto":
                return None
            raise UsageError(
                f"resume_from_checkpoint=latest: no checkpoint in output_dir {output_dir} "
                "(use 'auto' to start a new run when there is none)"
            )
        path = found[-1]
    else:
        path = Path(spec)
        if not path.is_dir():
            raise UsageError(f"resume_from_checkpoint: {path} not found")
    if not (path / TRAINER_STATE).is_file():
        raise UsageError(
            f"resume_from_checkpoint: {path} is incomplete (no {TRAINER_STATE}); name an "
            "earlier checkpoint folder"
        )
    return path


def read_trainer_state(checkpoint: Path) -> dict:
    path = Path(checkpoint) / TRAINER_STATE
    try:
        state = json.loads(path.read_text())
        for key in ("step", "max_steps", "log_history", "args"):
            state[key]  # noqa: B018 -- a KeyError names the missing key
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise UsageError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    return state


def check_output_dir(args: PretrainingArguments) -> list[Path]:
    """Refuse an ``output_dir`` that is a file, or that holds another run when this one starts
    afresh without ``overwrite_output_dir``. Return what a new run must remove first."""
    root = Path(args.output_dir)
    if root.exists() and not root.is_dir():
        raise UsageError(f"output_dir: {root} is a file, not a folder")
    previous = checkpoint_dirs(root) + [root / f for f in RUN_FILES if (root / f).exists()]
    spec = args.resume_from_checkpoint
    if not previous or spec in ("latest", "auto"):
        return []
    if spec and Path(spec).resolve().parent == root.resolve():
        return []  # continuing this folder's own run
    if not args.overwrite_output_dir:
        names = ", ".join(p.name for p in previous[:3]) + (", ..." if len(previous) > 3 else "")
        raise UsageError(
            f"output_dir: {root} holds another run ({names}); pass --overwrite_output_dir to "
            "replace it or --resume_from_checkpoint latest to continue it"
        )
    return previous


def _per_phase(args: dict, name: str, phases: int):
    value = args.get(name, "(unset)")
    return list(value) * phases if isinstance(value, list) and len(value) == 1 else value


def resume_mismatches(saved: dict, args: PretrainingArguments, facts: dict) -> list[str]:
    """``name: old -> new`` for every setting that differs from the checkpoint's and would make
    the resumed run differ from an uninterrupted one. ``facts``: what the launch decides
    (``num_processes``, ``mixed_precision``)."""
    new, old, phases = args.public_dict(), saved["args"], args.num_phases
    out = []
    for name in new:
        a, b = _per_phase(old, name, phases), _per_phase(new, name, phases)
        if name not in RESUME_FREE_FIELDS and a != b:
            out.append(f"{name}: {a} -> {b}")
    for name, value in facts.items():
        if saved.get(name, value) != value:
            out.append(f"{name}: {saved[name]} -> {value}")
    return out


def check_resume(checkpoint: Path, saved: dict, args: PretrainingArguments, facts: dict):
    """Refuse to resume with settings that break exactness, naming each one, unless
    ``ignore_resume_mismatch`` (fields of RESUME_FIXED_FIELDS never change)."""
    diffs = resume_mismatches(saved, args, facts)
    fixed = [d for d in diffs if d.split(":", 1)[0] in RESUME_FIXED_FIELDS]
    if fixed:
        raise UsageError(
            f"resume_from_checkpoint: {checkpoint} holds another model or optimizer "
            f"({'; '.join(fixed)}); start a new run instead"
        )
    if diffs and not args.ignore_resume_mismatch:
        raise UsageError(
            f"resume_from_checkpoint: {checkpoint} was saved with other settings "
            f"({'; '.join(diffs)}): the run would not continue exactly; pass "
            "--ignore_resume_mismatch to continue with the new values"
        )
    return diffs


def check_data_signatures(checkpoint: Path, saved: dict, phases: list, force: bool) -> None:
    """Refuse to resume on data whose content differs from what the checkpoint trained on."""
    old, new = saved.get("data_signatures"), [p.signature for p in phases]
    if old is None or old == new or force:
        return
    changed = [f"train_data[{p.index}]={p.path}" for p, a in zip(phases, old) if a != p.signature]
    raise UsageError(
        f"resume_from_checkpoint: {checkpoint} was trained on other data "
        f"({', '.join(changed) or 'another number of phases'}); pass --ignore_resume_mismatch "
        "to continue on this data"
    )


def param_fingerprint(model) -> str:
    """SHA-256 of all parameters (in name order): equal on every process of a healthy run."""
    digest = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def save_pretrained_folder(accelerator, model, tokenizer, target: Path) -> None:
    """``save_pretrained`` (config, safetensors) + tokenizer, on the main process."""
    state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        unwrapped = accelerator.unwrap_model(model)
        unwrapped.save_pretrained(str(target), state_dict=state_dict, safe_serialization=True)
        save_tokenizer(tokenizer, target)


def prune(root: Path, step: int, limit: int) -> list[Path]:
    """Keep the checkpoint of ``step`` and the ``limit - 1`` newest before it; never touch a
    later one (it may be what a resumed run is re-deriving, or another branch)."""
    older = [d for d in list_checkpoints(root) if checkpoint_step(d) < step]
    doomed = older[: max(0, len(older) - (max(1, limit) - 1))]
    for old in doomed:
        shutil.rmtree(old, ignore_errors=True)
    return doomed


class Checkpointer:
    def __init__(self, accelerator, model, tokenizer, args: PretrainingArguments):
        self.accelerator, self.model, self.tokenizer, self.args = (
            accelerator,
            model,
            tokenizer,
            args,
        )
        self.root = Path(args.output_dir)

    def save(self, state: dict) -> Path:
        acc = self.accelerator
        final = self.root / f"checkpoint-{state['step']:07d}"
        tmp = self.root / f".{final.name}.tmp"
        if acc.is_main_process:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
        acc.wait_for_everyone()
        acc.save_state(str(tmp / "state"), safe_serialization=False)
        save_pretrained_folder(acc, self.model, self.tokenizer, tmp / "model")
        acc.wait_for_everyone()
        if acc.is_main_process:
            (tmp / TRAINER_STATE).write_text(json.dumps(state, indent=1) + "\n")
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            prune(self.root, state["step"], self.args.save_total_limit)
        acc.wait_for_everyone()
        return final
