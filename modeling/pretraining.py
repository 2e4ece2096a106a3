"""The BERT pretraining loop: one library for one CPU, one GPU, many GPUs or many nodes.

``scripts/pretrain.py`` parses :class:`PretrainingArguments` (YAML recipe + flags) and calls
:func:`pretrain`. The parts live in modules named after what they hold:

* ``pretraining_args``: every hyper-parameter (:class:`PretrainingArguments`).
* ``phases``: one data folder per phase, and the deterministic, sample-indexed data order.
  The paper's recipe is two phases: 90% of the steps at length 128, then 10% at 512
  (``phase_fractions: [0.9, 0.1]``). Data and batch size change at the switch; the model,
  optimizer and learning-rate schedule simply continue. ``train_batch_size`` is the global
  batch (sequences per optimizer step, as in the paper); each process runs micro-batches of
  ``train_batch_size / (num_processes * gradient_accumulation_steps)`` sequences.
* ``optim``: parameter groups, AdamW / Google's AdamWeightDecay / LAMB, the schedules (shared
  with fine-tuning). Gradients are clipped to ``max_grad_norm`` (1.0).
* ``meters``: losses, accuracies, tokens/s, MFU, curves.
* ``device``: bf16 support of the CPU (fp32 fallback) and threads per CPU process.
* ``zero``: DeepSpeed ZeRO launch checks, gathered ZeRO-3 weights, offloaded optimizer settings.
* ``checkpointing``: ``output_dir/checkpoint-<step>/`` (``resume_from_checkpoint: latest``
  picks the newest complete one).
* ``pretraining_card``: the final ``output_dir/model`` (a run that reached ``max_steps``) gets
  this package's modeling source (``trust_remote_code=True`` picks our classes) and a
  ``README.md`` model card; ``push_to_hub`` uploads it (``hub_model_id``, ``hub_private_repo``,
  ``hub_token``; checked before any work).

Logging every ``logging_steps`` goes to ``output_dir/log.jsonl``, the progress bar and
wandb/tensorboard (``report_to``); every ``eval_steps``, the same metrics on the held-out split of
the current phase's data. Budget stops: ``max_steps`` (the schedule length), ``max_time`` (wall
clock; saves a checkpoint, then stops) and ``stop_at_step`` (stop with a checkpoint without
shortening the schedule, e.g. for time-sliced cluster jobs).

Errors in the configuration (unknown field, a batch that does not split over processes x
accumulation, missing or binary data, an output_dir holding another run, a resume whose settings
or data differ from the checkpoint's) raise :class:`modeling.cli.UsageError` before any work
starts (:func:`start_run`).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from . import atomic, zero
from .checkpointing import (
    Checkpointer,
    check_data_signatures,
    check_output_dir,
    check_resume,
    find_checkpoint,
    param_fingerprint,
    read_trainer_state,
)
from .cli import UsageError
from .device import FreeMemoryReleaser, cpu_mixed_precision, set_cpu_threads
from .meters import (
    Meter,
    RunLog,
    Throughput,
    _matmul_dtype,
    measure_peak_flops,
    unigram_baseline,
)
from .optim import apply_optimizer_settings, build_optimizer, build_scheduler
from .phases import (
    Phase,
    PhaseBatches,
    SampleOrder,
    build_phases,
    check_batches,
    check_data_paths,
    collate_rows,
    is_prepared,
    mix_seed,
    resolve_data,
)
from .pretraining_args import PretrainingArguments, parse_duration
from .pretraining_data import PretrainingDataError, load_pretraining_dataset

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Set-up
# --------------------------------------------------------------------------------------------


def _flat_config(args: PretrainingArguments) -> dict:
    return {k: (str(v) if isinstance(v, (list, dict)) or v is None else v)
            for k, v in args.public_dict().items()}  # fmt: skip


def _make_accelerator(args: PretrainingArguments, needs_unused: bool):
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    trackers = [t for t in args.report_to if t != "none"]
    kwargs: dict[str, Any] = {}
    cuda = torch.cuda.is_available()
    precision = args.mixed_precision if cuda else cpu_mixed_precision(args.mixed_precision)
    if precision:
        kwargs["mixed_precision"] = precision
    handlers = [DistributedDataParallelKwargs(find_unused_parameters=True)] if needs_unused else []
    # `accelerate launch` on a machine without GPUs starts WORLD_SIZE processes but each one
    # stays single-process unless told to use the CPU (DDP) or given gloo (DeepSpeed, which
    # `cpu=True` would silently drop): then they join one group.
    if zero.deepspeed_requested():
        handlers += zero.process_group_kwargs(cuda)
    elif int(os.environ.get("WORLD_SIZE", "1")) > 1 and not cuda:
        kwargs["cpu"] = True
    # A run owns its precision and plugins: a process that ran pretrain() before (a notebook,
    # the reproduction runner in process, tests) keeps accelerate's state singleton, which would
    # refuse this run's settings. The process group (PartialState) is kept.
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state()
    GradientState._reset_state()
    accelerator = Accelerator(
        log_with=trackers or None,
        project_dir=args.output_dir,
        kwargs_handlers=handlers,
        **kwargs,
    )
    zero.check_launch(accelerator)
    zero.check_offload(accelerator, args.optim)
    threads = ""
    if accelerator.device.type == "cpu":
        local = int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))
        count, why = set_cpu_threads(local, args.num_cpu_threads)
        threads = f", {count} CPU threads each ({why})"
    stage = zero.zero_stage(accelerator)
    kind = f"DeepSpeed ZeRO-{stage}" if stage else str(accelerator.distributed_type).split(".")[-1]
    accelerator.print(
        f"{accelerator.num_processes} process(es), {kind}, {accelerator.device}, "
        f"mixed precision {accelerator.mixed_precision}{threads}"
    )
    return accelerator


def _is_deepspeed(accelerator) -> bool:
    return zero.is_deepspeed(accelerator)


def check_model_path(args: PretrainingArguments) -> None:
    """A local ``model_name_or_path`` must be a model folder (a Hub name is tried later)."""
    name = args.model_name_or_path
    if not name:
        return
    looks_local = Path(name).exists() or name.startswith(("/", ".", "~")) or name.count("/") > 1
    if looks_local and not (Path(name) / "config.json").is_file():
        raise UsageError(f"model_name_or_path: {name} is not a model folder (no config.json)")


def start_run(args: PretrainingArguments):
    """Every check, then the accelerator and the phases (raw text is converted on the main
    process). Refusals are one-line UsageErrors raised before any work."""
    check_data_paths(args)
    check_model_path(args)
    out_dir = Path(args.output_dir)
    previous_run = check_output_dir(args)
    spec = args.resume_from_checkpoint
    checkpoint = find_checkpoint(spec, out_dir) if spec else None
    saved = read_trainer_state(checkpoint) if checkpoint else None
    folders = [Path(p) for p in args.train_data]
    phases = build_phases(args, folders) if all(is_prepared(p) for p in folders) else None
    has_nsp = phases is None or all(p.metadata["sentence_task"] != "none" for p in phases)
    accelerator = _make_accelerator(args, needs_unused=not has_nsp)
    check_batches(args, accelerator.num_processes)
    if _is_deepspeed(accelerator) and len(set(args.per_phase("gradient_accumulation_steps"))) > 1:
        raise UsageError(
            "gradient_accumulation_steps must be the same in every phase with DeepSpeed"
        )
    facts = {
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
    }
    if saved is not None:
        check_resume(checkpoint, saved, args, facts)
    elif spec == "auto":
        accelerator.print(f"no checkpoint in {out_dir}: starting a new run")
    if previous_run and accelerator.is_main_process:
        logger.warning("overwrite_output_dir: removing the previous run's %s", previous_run)
        for path in previous_run:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    accelerator.wait_for_everyone()
    if phases is None:
        phases = build_phases(args, resolve_data(args, accelerator))
    if saved is not None:
        check_data_signatures(checkpoint, saved, phases, args.ignore_resume_mismatch)
    return accelerator, phases, checkpoint, saved


def load_phase_data(phases: list[Phase]) -> tuple[list, list]:
    """Each phase's training set and held-out set (None when the folder has none)."""
    try:
        train = [load_pretraining_dataset(p.path, "train") for p in phases]
    except PretrainingDataError as err:
        raise UsageError(str(err)) from None
    held_out = [
        load_pretraining_dataset(p.path, "validation") if (p.path / "validation").is_dir() else None
        for p in phases
    ]
    return train, held_out


def build_model(args: PretrainingArguments, vocab_size: int, pad_token_id: int):
    from . import BertConfig, BertForPreTraining

    if args.model_name_or_path:
        try:
            return BertForPreTraining.from_pretrained(
                args.model_name_or_path,
                unpad_inputs=args.unpad_inputs,
                attn_implementation=args.attn_implementation,
            )
        except (OSError, ValueError) as err:
            first = (str(err).strip().splitlines() or [""])[0][:200]
            raise UsageError(
                f"model_name_or_path: cannot load {args.model_name_or_path}: {first}"
            ) from None
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_hidden_layers,
        num_attention_heads=args.num_attention_heads,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        hidden_act=args.hidden_act,
        hidden_dropout_prob=args.hidden_dropout_prob,
        attention_probs_dropout_prob=args.attention_probs_dropout_prob,
        max_position_embeddings=args.max_position_embeddings,
        initializer_range=args.initializer_range,
        pad_token_id=pad_token_id,
        unpad_inputs=args.unpad_inputs,
        sparse_prediction_head=True,
    )
    config._attn_implementation = args.attn_implementation
    return BertForPreTraining(config)


def build_training(args: PretrainingArguments, accelerator, phases: list[Phase], tokenizer):
    """Model, optimizer and schedule, seeded and prepared for the accelerator."""
    torch.manual_seed(args.seed)
    model = build_model(args, len(tokenizer), tokenizer.pad_token_id)
    optimizer = build_optimizer(model, args)
    scheduler = build_scheduler(optimizer, args)
    if _is_deepspeed(accelerator):
        ds = accelerator.state.deepspeed_plugin.deepspeed_config
        p0 = phases[0]
        ds["train_micro_batch_size_per_gpu"] = p0.global_batch // (
            accelerator.num_processes * p0.accumulation
        )
        ds["gradient_accumulation_steps"] = p0.accumulation
        if ds.get("gradient_clipping") == "auto":
            ds["gradient_clipping"] = args.max_grad_norm
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(scheduler)
    if zero.offload_device(accelerator) != "none":  # accelerate swapped in DeepSpeedCPUAdam
        settings = zero.optimizer_settings(optimizer)
        decays = [args.weight_decay, 0.0]  # optim.param_groups: decayed, then not
        lost = zero.settings_lost(
            settings, (args.adam_beta1, args.adam_beta2), args.adam_epsilon, decays
        )
        if lost:
            raise UsageError(
                f"DeepSpeed offload_optimizer: {settings['class']} does not use our {lost}"
            )
        accelerator.print(
            f"offload_optimizer: {settings['class']} with our lr, betas, eps and weight decay"
        )
    return model, optimizer, scheduler


def build_collator(args: PretrainingArguments, tokenizer, phase: Phase):
    from .collators import build_collator as _build

    if args.masking_strategy == "static":
        return _build("static", tokenizer)
    return _build(
        args.masking_strategy,
        tokenizer,
        mlm_probability=args.mlm_probability,
        mask_replace_prob=args.mask_replace_prob,
        random_replace_prob=args.random_replace_prob,
        max_predictions_per_seq=phase.max_predictions,
    )


def phase_loader(args, accelerator, phase: Phase, dataset, collator, step: int):
    """The micro-batches of ``phase`` for this process, from global step ``step`` on."""
    batches = PhaseBatches(
        dataset,
        collator,
        SampleOrder(len(dataset), mix_seed(args.seed, phase.index)),
        phase.index,
        step - phase.first_global_step,
        phase.steps,
        phase.global_batch,
        phase.accumulation,
        accelerator.num_processes,
        accelerator.process_index,
        args.seed,
    )
    accelerator.print(
        f"phase {phase.index}: {phase.path} (length {phase.max_seq_length}, "
        f"{len(dataset)} sequences), steps {step}->{phase.first_global_step + phase.steps}, "
        f"global batch {phase.global_batch} = {accelerator.num_processes} process(es) x "
        f"{phase.accumulation} x {batches.micro}"
    )
    return torch.utils.data.DataLoader(
        batches,
        batch_size=None,
        shuffle=False,
        num_workers=args.dataloader_num_workers,
        generator=torch.Generator(),  # never touch the global RNG (dropout state)
        persistent_workers=False,
    )


def _rng_state_loads(path: Path) -> bool:
    try:
        torch.load(path, weights_only=False)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError):
        return False
    return True


def resume(args, accelerator, checkpoint: Path | None, saved: dict | None, optimizer, scheduler):
    """Load ``checkpoint`` (checked by :func:`start_run`); return (step, log history, training
    seconds so far), or a fresh start."""
    if checkpoint is None:
        return 0, [], 0.0
    rng = checkpoint / "state" / f"random_states_{accelerator.process_index}.pkl"
    if not _rng_state_loads(rng):
        logger.warning(
            "%s: no usable RNG state for process %d; the resumed run will not be exact "
            "(dropout draws differ from an uninterrupted run)",
            checkpoint,
            accelerator.process_index,
        )
    try:
        accelerator.load_state(str(checkpoint / "state"))
    except (OSError, RuntimeError, EOFError, ValueError, KeyError, pickle.UnpicklingError) as err:
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise UsageError(
            f"resume_from_checkpoint: {checkpoint / 'state'} cannot be loaded "
            f"({type(err).__name__}: {first})"
        ) from None
    if args.ignore_resume_mismatch:
        apply_optimizer_settings(optimizer, scheduler, args)
    step = saved["step"]
    accelerator.print(f"resumed from {checkpoint} at step {step}")
    history = [r for r in saved["log_history"] if r["step"] <= step]
    return step, history, saved.get("train_seconds", 0.0)


def trainer_state(args, accelerator, phases: list[Phase], step: int, log: RunLog, seconds):
    """What ``trainer_state.json`` records: where the run stands and how it got there."""
    phase = next((p for p in phases if step < p.first_global_step + p.steps), phases[-1])
    return {
        "step": step,
        "max_steps": args.max_steps,
        "phase": phase.index,
        "phase_step": step - phase.first_global_step,
        "data_position": (step - phase.first_global_step) * phase.global_batch,
        "train_seconds": seconds,
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        "data_signatures": [p.signature for p in phases],
        "log_history": log.history,
        "args": args.public_dict(),
    }


def budget_stop(args, accelerator, step: int, seconds: float, budget: float | None) -> str | None:
    """``stop_at_step`` or ``max_time`` reached (the latter agreed over all processes)."""
    if args.stop_at_step is not None and step >= args.stop_at_step:
        return "stop_at_step"
    if budget is not None:
        over = torch.tensor(float(seconds >= budget), device=accelerator.device)
        if accelerator.reduce(over, reduction="max").item() > 0:
            return "max_time"
    return None


def evaluate(accelerator, model, dataset, collator, args: PretrainingArguments) -> dict[str, float]:
    """MLM/NSP loss and accuracy on the first ``max_eval_samples`` held-out sequences, masked
    with a fixed seed (comparable across steps), split over processes.

    Every process runs the same number of forward passes (a process without a batch of its own
    repeats batch 0 and discards it), since DDP and ZeRO-3 forwards are collective."""
    n = min(args.max_eval_samples, len(dataset))
    bs = args.per_device_eval_batch_size
    rank, world = accelerator.process_index, accelerator.num_processes
    starts = list(range(0, n, bs))
    rounds = math.ceil(len(starts) / world)
    meter = Meter(accelerator.device)
    net = model if _is_deepspeed(accelerator) else accelerator.unwrap_model(model)
    was_training = net.training
    net.eval()
    with torch.no_grad():
        for r in range(rounds):
            b = r * world + rank
            start = starts[b] if b < len(starts) else 0
            indices = list(range(start, min(start + bs, n)))
            batch = collate_rows(dataset, indices, collator, mix_seed(args.seed, 7919, start))
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            out = net(**batch)
            if b < len(starts):
                meter.add(out, batch)
    net.train(was_training)
    return meter.summary(accelerator, prefix="eval_")


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


def pretrain(args: PretrainingArguments) -> dict[str, Any]:
    """Run (or resume) pretraining; return the final metrics (also in train_results.json)."""
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer

    t_start = time.perf_counter()
    out_dir = Path(args.output_dir)
    budget = parse_duration(args.max_time) if args.max_time else None
    accelerator, phases, checkpoint, saved = start_run(args)
    deepspeed = _is_deepspeed(accelerator)
    tokenizer = AutoTokenizer.from_pretrained(str(phases[0].path / "tokenizer"))
    train_sets, eval_sets = load_phase_data(phases)
    model, optimizer, scheduler = build_training(args, accelerator, phases, tokenizer)
    config = accelerator.unwrap_model(model).config
    step, history, seconds_before = resume(
        args, accelerator, checkpoint, saved, optimizer, scheduler
    )
    log = RunLog(accelerator, out_dir / "log.jsonl", history, trackers=bool(args.report_to))
    if args.report_to:
        accelerator.init_trackers(args.run_name or out_dir.name, config=_flat_config(args))
    peak = args.peak_flops or measure_peak_flops(accelerator.device, _matmul_dtype(accelerator))
    checkpointer = Checkpointer(accelerator, model, tokenizer, args)
    progress = tqdm(total=args.max_steps, initial=step, desc="pretrain", unit="step",
                    disable=args.disable_tqdm or not accelerator.is_local_main_process)  # fmt: skip
    meter, speed = Meter(accelerator.device), Throughput(config, peak, accelerator)
    heap = FreeMemoryReleaser(enabled=accelerator.device.type == "cpu")
    grad_norm = torch.zeros((), device=accelerator.device)
    stop_reason = "max_steps" if step >= args.max_steps else None
    t_loop = time.perf_counter()

    model.train()
    for phase in phases:
        if stop_reason or step >= phase.first_global_step + phase.steps:
            continue
        accelerator.gradient_accumulation_steps = phase.accumulation
        accelerator.step = 0
        collator = build_collator(args, tokenizer, phase)
        for batch in phase_loader(
            args, accelerator, phase, train_sets[phase.index], collator, step
        ):
            speed.add(batch)
            batch = {k: v.to(accelerator.device, non_blocking=True) for k, v in batch.items()}
            with accelerator.accumulate(model):
                out = model(**batch)
                accelerator.backward(out.loss)
                if accelerator.sync_gradients and args.max_grad_norm > 0:
                    norm = accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    if norm is not None:
                        grad_norm = norm.detach() if torch.is_tensor(norm) else torch.tensor(norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if deepspeed and accelerator.sync_gradients:  # DeepSpeed clips inside its step
                    norm = model.get_global_grad_norm()
                    grad_norm = torch.tensor(float(norm if norm is not None else 0.0))
            meter.add(out, batch)
            if not accelerator.sync_gradients:
                continue
            lr = scheduler.get_last_lr()[0]
            scheduler.step()
            heap.step()
            step += 1
            progress.update(1)
            last = step == args.max_steps
            seconds = seconds_before + time.perf_counter() - t_loop
            if step % args.logging_steps == 0 or last:
                values = {"phase": phase.index, **meter.summary(accelerator), "learning_rate": lr,
                          "grad_norm": float(grad_norm), **speed.summary(), "elapsed_seconds": seconds}  # fmt: skip
                log.record(step, values)
                progress.set_postfix(
                    {k: f"{values[k]:.3g}" for k in ("loss", "mlm_accuracy", "mfu")}
                )
            held_out = eval_sets[phase.index]
            if held_out is not None and (last or args.eval_steps and step % args.eval_steps == 0):
                metrics = evaluate(accelerator, model, held_out, collator, args)
                log.record(step, {"phase": phase.index, **metrics})
            elapsed = time.perf_counter() - t_start
            stop_reason = (
                "max_steps" if last else budget_stop(args, accelerator, step, elapsed, budget)
            )
            if stop_reason or (args.save_steps and step % args.save_steps == 0):
                seconds = seconds_before + time.perf_counter() - t_loop
                checkpointer.save(trainer_state(args, accelerator, phases, step, log, seconds))
            if stop_reason:
                break
    progress.close()
    results = {
        "step": step,
        "stop_reason": stop_reason or "max_steps",
        "train_seconds": seconds_before + time.perf_counter() - t_loop,
        "peak_flops_per_process": peak,
        "distributed_type": str(accelerator.distributed_type).split(".")[-1],
        "zero_stage": zero.zero_stage(accelerator),
        "mixed_precision": accelerator.mixed_precision,
        "cpu_threads": torch.get_num_threads() if accelerator.device.type == "cpu" else None,
        "optimizer": zero.optimizer_settings(optimizer),
    }
    if eval_sets[0] is not None and accelerator.is_main_process:
        # the floor an MLM accuracy must beat: always answering the commonest masked token
        results["unigram_baseline"] = unigram_baseline(
            eval_sets[0], build_collator(args, tokenizer, phases[0]), args.max_eval_samples
        )
    return finish(args, accelerator, model, log, results, phases)


def finish(args, accelerator, model, log: RunLog, results: dict, phases) -> dict[str, Any]:
    """Check that every process holds the same weights, copy the last checkpoint's model to
    ``output_dir/model`` (a finished run only) with its model card and remote code, write
    ``train_results.json``, push to the Hub when asked."""
    from accelerate.utils import gather_object

    out_dir, step = Path(args.output_dir), results["step"]
    with zero.full_parameters(accelerator, model):  # ZeRO-3: the gathered weights
        fingerprints = gather_object([param_fingerprint(accelerator.unwrap_model(model))])
    results.update(
        num_processes=accelerator.num_processes,
        param_fingerprints=fingerprints,
        ranks_identical=len(set(fingerprints)) == 1,
        last_log=next((r for r in reversed(log.history) if "loss" in r), None),
        last_eval=next((r for r in reversed(log.history) if "eval_loss" in r), None),
    )
    if results["stop_reason"] == "max_steps" and accelerator.is_main_process:
        # the final save_pretrained folder at a fixed place: output_dir/model
        final_src = out_dir / f"checkpoint-{step:07d}" / "model"
        with atomic.atomic_dir(out_dir / "model") as tmp:
            for f in final_src.iterdir():
                shutil.copy2(f, tmp / f.name)
            from .pretraining_card import finish_model_folder

            finish_model_folder(tmp, args, results, phases)
    if accelerator.is_main_process:
        atomic.write_json(out_dir / "train_results.json", results)
    accelerator.wait_for_everyone()
    if args.report_to:
        accelerator.end_training()
    if not results["ranks_identical"]:
        raise RuntimeError(f"processes ended with different weights: {fingerprints}")
    if args.push_to_hub and accelerator.is_main_process:
        # last, once everything is saved: a failed upload loses nothing and can be redone
        # with modeling.hub.push_to_hub(output_dir/model, hub_model_id)
        if results["stop_reason"] != "max_steps":
            logger.warning(
                "not pushed: the run stopped (%s) before max_steps", results["stop_reason"]
            )
        else:
            from .hub import push_to_hub

            results["hub_commit_url"] = push_to_hub(
                out_dir / "model",
                args.hub_model_id,
                private=args.hub_private_repo,
                token=args.hub_token,
                commit_message=f"bert-toolkit pretraining, step {step}",
            )
            logger.info("pushed %s: %s", out_dir / "model", results["hub_commit_url"])
            atomic.write_json(out_dir / "train_results.json", results)
    return results
