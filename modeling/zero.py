"""DeepSpeed ZeRO under ``accelerate launch``: the launch checks, full weights under ZeRO-3, and
what an offloaded optimizer keeps of ours.

* A DeepSpeed launch (``ACCELERATE_USE_DEEPSPEED=true``, set by an accelerate config with
  ``distributed_type: DEEPSPEED``) must end up as DeepSpeed with every launched process in one
  group: :func:`check_launch` refuses anything else in one line (``Accelerator(cpu=True)``
  would drop DeepSpeed and run DDP). On a machine without GPUs the processes join one gloo
  group (:func:`process_group_kwargs`) and DeepSpeed uses its CPU accelerator. (``accelerate
  launch --cpu`` decides before the script starts: it runs one plain process and does not
  tell the script about the DeepSpeed config.)
* ZeRO-3 keeps only a partition of each parameter on each process: :func:`full_parameters`
  gathers them (for the fingerprint every process compares), and the ``model/`` folder needs
  ``stage3_gather_16bit_weights_on_model_save``.
* ``offload_optimizer`` makes accelerate replace our optimizer with ``DeepSpeedCPUAdam``, built
  from our parameter groups: :func:`check_offload` refuses optimizers it cannot stand for (LAMB,
  Google's AdamW) and :func:`optimizer_settings` reports what the running optimizer uses.
"""

from __future__ import annotations

import contextlib
import os

from .cli import UsageError

SETTINGS = ("lr", "betas", "eps", "weight_decay")


def deepspeed_requested(env: dict | None = None) -> bool:
    """Whether the accelerate launcher was given a DeepSpeed configuration."""
    env = os.environ if env is None else env
    return env.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"


def process_group_kwargs(cuda: bool) -> list:
    """Accelerator ``kwargs_handlers`` for a DeepSpeed launch: gloo on a machine without GPUs
    (DeepSpeed's CPU accelerator would ask for oneCCL), nothing otherwise."""
    if cuda:
        return []
    from accelerate.utils import InitProcessGroupKwargs

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    return [InitProcessGroupKwargs(backend="gloo")]


def zero_stage(accelerator) -> int | None:
    """The ZeRO stage of a DeepSpeed run, None otherwise."""
    if not is_deepspeed(accelerator):
        return None
    return int(accelerator.state.deepspeed_plugin.deepspeed_config["zero_optimization"]["stage"])


def is_deepspeed(accelerator) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.DEEPSPEED


def check_launch(accelerator, env: dict | None = None) -> None:
    """One-line refusal when the launch and the run disagree: a DeepSpeed configuration that
    ended up without DeepSpeed, or fewer processes in the group than were launched."""
    env = os.environ if env is None else env
    kind = str(accelerator.distributed_type).split(".")[-1]
    if deepspeed_requested(env) and not is_deepspeed(accelerator):
        raise UsageError(
            f"the accelerate config asks for DeepSpeed but the run would be {kind} "
            "(Accelerator(cpu=True) drops DeepSpeed)"
        )
    launched = int(env.get("WORLD_SIZE", "1"))
    if accelerator.num_processes != launched:
        raise UsageError(
            f"accelerate launch started {launched} processes but they formed a group of "
            f"{accelerator.num_processes} ({kind})"
        )
    if zero_stage(accelerator) == 3:
        zero = accelerator.state.deepspeed_plugin.deepspeed_config["zero_optimization"]
        if not zero.get("stage3_gather_16bit_weights_on_model_save", False):
            raise UsageError(
                "DeepSpeed config: ZeRO-3 needs zero_optimization."
                "stage3_gather_16bit_weights_on_model_save: true to write the model/ folder"
            )


def offload_device(accelerator) -> str:
    """Where a DeepSpeed config offloads the optimizer ("none" when it does not)."""
    if not is_deepspeed(accelerator):
        return "none"
    zero = accelerator.state.deepspeed_plugin.deepspeed_config["zero_optimization"]
    return str(zero.get("offload_optimizer", {}).get("device", "none"))


def check_offload(accelerator, optim: str) -> None:
    """accelerate swaps in DeepSpeedCPUAdam under ``offload_optimizer``: only our AdamW maps
    onto it (LAMB's trust ratio and Google's missing bias correction would be lost)."""
    device = offload_device(accelerator)
    if device != "none" and optim != "adamw":
        raise UsageError(
            f"optim {optim}: DeepSpeed offload_optimizer (device {device}) runs DeepSpeedCPUAdam, "
            "which implements only adamw; use --optim adamw or remove offload_optimizer"
        )


def optimizer_settings(optimizer) -> dict:
    """Class and per-group lr/betas/eps/weight decay of the optimizer that actually steps
    (through accelerate's and DeepSpeed's wrappers)."""
    inner = optimizer
    for attribute in ("optimizer", "optimizer", "optimizer"):  # accelerate -> ZeRO -> torch
        inner = getattr(inner, attribute, inner)
    groups = [
        {k: (list(g[k]) if isinstance(g[k], tuple) else g[k]) for k in SETTINGS if k in g}
        for g in inner.param_groups
    ]
    return {"class": type(inner).__name__, "groups": groups}


def settings_lost(settings: dict, betas: tuple, eps: float, weight_decays: list[float]) -> list:
    """Names of our optimizer settings the running optimizer does not use."""
    lost = []
    for group, decay in zip(settings["groups"], weight_decays):
        if tuple(group.get("betas", ())) != tuple(betas):
            lost.append("betas")
        if group.get("eps") != eps:
            lost.append("eps")
        if group.get("weight_decay") != decay:
            lost.append("weight_decay")
    return sorted(set(lost))


def full_parameters(accelerator, model):
    """A context in which every process holds every full parameter (ZeRO-3 gathers them;
    other set-ups already do)."""
    if zero_stage(accelerator) != 3:
        return contextlib.nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None)
