"""Optimizers and learning-rate schedules, shared by pretraining and fine-tuning.

* Parameter groups (:func:`param_groups`): weight decay never applies to biases and LayerNorm.
* ``adamw`` (``torch.optim.AdamW``, bias-corrected, the default), ``adamw_bert`` (Google's
  ``AdamWeightDecayOptimizer``: no bias correction, as the reference code) and ``lamb`` (You et
  al. 2019, for large batches): :func:`build_optimizer`.
* Schedules per optimizer step (:func:`lr_factor`), one warmup formula for both: ``bert`` (the
  reference code: ``step / warmup`` during warmup, then ``1 - step / max_steps``) and
  ``linear`` (``transformers.get_linear_schedule_with_warmup``: ``step / warmup``, then
  ``(max_steps - step) / (max_steps - warmup)``).
"""

from __future__ import annotations

import torch

from .pretraining_args import PretrainingArguments


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on weights only: not on biases or LayerNorm parameters (as in BERT)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (
            no_decay if name.endswith("bias") or "LayerNorm" in name or param.ndim == 1 else decay
        ).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2019) and, with ``trust_ratio=False``, AdamW.

    Update: ``u = m_hat / (sqrt(v_hat) + eps) + weight_decay * p``; with the trust ratio,
    ``p -= lr * (||p|| / ||u||) * u`` (ratio 1 when either norm is 0), otherwise
    ``p -= lr * u``. With ``bias_correction=False`` ``m_hat = m`` and ``v_hat = v``: this is
    Google BERT's ``AdamWeightDecayOptimizer``. Options are per parameter group.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        bias_correction: bool = True,
        trust_ratio: bool = True,
    ):
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            bias_correction=bias_correction,
            trust_ratio=trust_ratio,
        )
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                if group["bias_correction"]:
                    m_hat = m / (1 - beta1 ** state["step"])
                    v_hat = v / (1 - beta2 ** state["step"])
                else:
                    m_hat, v_hat = m, v
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                ratio = 1.0
                if group["trust_ratio"]:
                    w_norm, u_norm = p.norm(), update.norm()
                    ratio = torch.where(
                        (w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm)
                    )
                p.sub_(update * (group["lr"] * ratio))
        return loss


def build_optimizer(model, args: PretrainingArguments):
    """AdamW / Google's AdamWeightDecay / LAMB; no weight decay (and, for LAMB, no layer
    adaptation, as in the ALBERT/TF implementation) on biases and LayerNorm."""
    groups = param_groups(model, args.weight_decay)
    common = dict(lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2))
    if args.optim == "adamw":
        return torch.optim.AdamW(groups, eps=args.adam_epsilon, **common)
    lamb = args.optim == "lamb"
    for g in groups:
        g["trust_ratio"] = lamb and g["weight_decay"] > 0
    return Lamb(groups, eps=args.adam_epsilon, bias_correction=lamb, trust_ratio=lamb, **common)


def lr_factor(step: int, kind: str, warmup: int, total: int) -> float:
    """Learning-rate multiplier at optimizer step ``step`` (0-based).

    ``bert``: Google's ``optimization.py``: ``step / warmup`` while ``step < warmup``, then
    ``1 - step / total`` (polynomial decay of power 1 counted from step 0, so the rate drops
    to ``1 - warmup / total`` right after warmup, as in the reference code).
    ``linear``: ``transformers``' linear warmup/decay: ``step / warmup`` then
    ``(total - step) / (total - warmup)``.
    """
    if step < warmup:
        return step / warmup
    if kind == "bert":
        return max(0.0, 1.0 - step / total)
    return max(0.0, (total - step) / max(1, total - warmup))


def build_scheduler(optimizer, args: PretrainingArguments):
    kind, warmup, total = args.lr_scheduler_type, args.warmup, args.max_steps
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, kind, warmup, total)
    )


def apply_optimizer_settings(optimizer, scheduler, args: PretrainingArguments) -> None:
    """Give a loaded optimizer and schedule this run's learning rate, betas, epsilon and weight
    decay (loading restores the saved ones: a resumed run would silently ignore new values)."""
    for i, group in enumerate(optimizer.param_groups):  # group 0 decays, group 1 does not
        group.update(
            betas=(args.adam_beta1, args.adam_beta2),
            eps=args.adam_epsilon,
            weight_decay=args.weight_decay if i == 0 else 0.0,
            initial_lr=args.learning_rate,
        )
        if "trust_ratio" in group:
            group["trust_ratio"] = args.optim == "lamb" and group["weight_decay"] > 0
    scheduler.base_lrs = [args.learning_rate] * len(optimizer.param_groups)
    for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas):
        group["lr"] = args.learning_rate * factor(scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
