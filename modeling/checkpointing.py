"""Checkpoints of a pretraining run: ``output_dir/checkpoint-<step>/``, written to a temporary
folder and renamed when complete, the last ``save_total_limit`` kept.

Each holds ``state/`` (``accelerator.save_state``: model, optimizer, scheduler, RNG states of
every process; DeepSpeed-aware), ``model/`` (``save_pretrained`` + tokenizer, loads in stock
``transformers.BertForPreTraining``) and ``trainer_state.json`` (step, phase, data position,
log history, arguments).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from .cli import UsageError
from .pretraining_args import PretrainingArguments

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE = "trainer_state.json"


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints (with trainer_state.json), oldest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = CHECKPOINT_PATTERN.match(d.name)
        if m and (d / TRAINER_STATE).is_file():
            found.append((int(m.group(1)), d))
    return [d for _, d in sorted(found)]


def find_checkpoint(spec: str, output_dir: str | Path) -> Path | None:
    if spec == "latest":
        found = list_checkpoints(output_dir)
        return found[-1] if found else None
    path = Path(spec)
    if not (path / TRAINER_STATE).is_file():
        raise UsageError(f"resume_from_checkpoint: {path} is not a complete checkpoint")
    return path


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
        tokenizer.save_pretrained(str(target))


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
            for old in list_checkpoints(self.root)[: -max(1, self.args.save_total_limit)]:
                shutil.rmtree(old, ignore_errors=True)
        acc.wait_for_everyone()
        return final
