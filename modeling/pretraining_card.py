"""The model card and Hub files of a pretraining run's final ``output_dir/model`` folder.

:func:`finish_model_folder` turns the folder into a Hub repository: this package's modeling
source + ``auto_map`` (``trust_remote_code=True`` picks the fast classes; without it the folder
is stock BERT) and a ``README.md`` model card with the data, the recipe, the command (any
``--hub_token`` value masked), the training figures and the held-out evaluation as
``model-index`` metadata. ``modeling.pretraining`` calls it before the optional push.
"""

from __future__ import annotations

import os
from pathlib import Path


def _command_line() -> str:
    """The command that ran, with any --hub_token value masked."""
    import shlex
    import sys

    argv, masked = list(sys.argv), []
    for i, arg in enumerate(argv):
        if arg.startswith("--hub_token="):
            arg = "--hub_token=***"
        elif i and argv[i - 1] == "--hub_token":
            arg = "***"
        masked.append(arg)
    launcher = "accelerate launch" if "ACCELERATE_MIXED_PRECISION" in os.environ else "python"
    return f"{launcher} {shlex.join(masked)}"


def _sources(metadata: dict, shown: int = 5) -> str:
    inputs = [str(x) for x in metadata.get("inputs") or []]
    if not inputs:
        return ""
    more = f" and {len(inputs) - shown} more" if len(inputs) > shown else ""
    return f" built from {', '.join(inputs[:shown])}{more}"


def finish_model_folder(folder: Path, args, results: dict, phases) -> None:
    """Make the final ``model/`` folder a Hub repository: our modeling source + ``auto_map``
    (``trust_remote_code=True`` picks the fast classes; stock BERT without it) and a model
    card with the data, the recipe, the command, the figures and the held-out evaluation."""
    from .hub import add_remote_code, write_model_card

    add_remote_code(folder)
    data = [
        f"Phase {p.index + 1} ({p.steps:,} steps, batch {p.global_batch}): `{p.path}`, "
        f"sequences of {p.max_seq_length} tokens{_sources(p.metadata)}, sentence task "
        f"{p.metadata.get('sentence_task', 'nsp')}, {args.masking_strategy} masking of "
        f"{args.mlm_probability:.0%} of the tokens."
        for p in phases
    ]
    data.append("Evaluation: the held-out documents of the last phase's data (`validation`).")
    last, last_eval = results.get("last_log") or {}, results.get("last_eval") or {}
    figures = {
        "optimizer steps": results["step"],
        "processes": results["num_processes"],
        "train time (s)": round(results["train_seconds"], 1),
    }
    for key in ("loss", "mlm_loss", "mlm_accuracy", "nsp_accuracy", "tokens_per_second", "mfu"):
        if last.get(key) is not None:
            figures[f"last logged {key}"] = last[key]
    baseline = (results.get("unigram_baseline") or {}).get("accuracy")
    if baseline is not None:
        figures["unigram baseline MLM accuracy (held-out)"] = baseline
    dataset = Path(args.train_data[-1]).name
    evals = []
    for key, task_type, task_name, metric, name in (
        ("eval_mlm_accuracy", "fill-mask", "Masked language modelling", "accuracy", "MLM accuracy"),
        ("eval_mlm_loss", "fill-mask", "Masked language modelling", "loss", "MLM loss"),
        ("eval_nsp_accuracy", "text-classification", "Next sentence prediction", "accuracy",
         "NSP accuracy"),
    ):  # fmt: skip
        if last_eval.get(key) is not None:
            evals.append(
                dict(task_type=task_type, task_name=task_name, dataset_type=dataset,
                     dataset_name=f"{dataset} (held-out documents)", dataset_split="validation",
                     metric_type=metric, metric_name=name, metric_value=last_eval[key])
            )  # fmt: skip
    write_model_card(
        folder,
        model_name=args.hub_model_id or Path(args.output_dir).resolve().name,
        data_description="\n\n".join(data),
        command=_command_line(),
        hyperparameters=args.public_dict(),
        training_figures=figures,
        eval_results=evals,
    )
