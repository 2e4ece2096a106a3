"""Model cards and Hub uploads for saved model folders.

A folder written by ``save_pretrained`` (plus the tokenizer) becomes a Hub model repository in
three calls, each usable alone:

* :func:`add_remote_code` copies this package's modeling source and an ``auto_map`` into the
  folder: ``AutoModel*.from_pretrained(repo, trust_remote_code=True)`` then picks our fast
  classes, while the same folder without that flag still loads as stock ``transformers`` BERT
  (its ``model_type`` is ``bert``).
* :func:`write_model_card` writes ``README.md``: YAML metadata the Hub reads (license,
  language, ``library_name: transformers``, tags, datasets, base model, pipeline tag and the
  evaluation results as ``model-index``), then the model size, vocabulary, data, recipe and
  command, training figures, evaluation table, intended use, limits and how to load it.
* :func:`push_to_hub` creates the repository (if needed) and uploads the folder with
  ``huggingface_hub``.

Importing this module is cheap: it needs neither torch nor transformers (``huggingface_hub`` is
imported when a card is written or a folder pushed). It reads ``config.json``, the tokenizer
files and the ``model.safetensors`` header directly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import atomic
from .constants import AUTO_MAP, REMOTE_CODE_FILES

CARD_NAME = "README.md"
LIBRARY_TAGS = ("bert", "bert-toolkit")

# Hub pipeline tag and stock Auto class per architecture name in config.json.
_ARCHITECTURES = {
    "BertForPreTraining": ("fill-mask", "AutoModelForPreTraining"),
    "BertForMaskedLM": ("fill-mask", "AutoModelForMaskedLM"),
    "BertForSequenceClassification": ("text-classification", "AutoModelForSequenceClassification"),
    "BertForQuestionAnswering": ("question-answering", "AutoModelForQuestionAnswering"),
    "BertForTokenClassification": ("token-classification", "AutoModelForTokenClassification"),
    "BertForMultipleChoice": (None, "AutoModelForMultipleChoice"),
    "BertModel": ("feature-extraction", "AutoModel"),
}

_DEFAULT_USE = {
    "fill-mask": (
        "A starting point for fine-tuning on downstream tasks (classification, question "
        "answering, token classification) with any BERT-compatible code. Masked-token "
        "predictions are a by-product of pretraining, not a tuned product."
    ),
    "feature-extraction": "Sentence and token features for downstream models.",
}
_DEFAULT_TASK_USE = (
    "The task it was fine-tuned for (see Evaluation), on text like its training data (see "
    "Data). Check it on your own data before relying on it: the figures above say nothing "
    "about other domains."
)
_DEFAULT_LIMITS = (
    "The model reflects the text it was trained on, including its topics, its language and its "
    "biases; it has not been evaluated for fairness or safety. The figures above hold for the "
    "data named above only. Inputs longer than `max_position_embeddings` tokens must be "
    "truncated or windowed."
)
# transformers 5 removed the question-answering pipeline; 4.x's takes no threshold.
QA_THRESHOLD_NOTE = (
    "Unanswerable questions (SQuAD v2.0): the model predicts no answer when the null score "
    "(start + end logit at [CLS]) exceeds the best span's score by more than a threshold tau "
    "(Google's `null_score_diff_threshold`; the SQuAD recipe saves its tuned value in "
    "`config.json` as `null_score_diff_threshold`). `transformers` 5 has no "
    "`question-answering` pipeline (it was removed); the 4.x pipeline takes "
    "`handle_impossible_answer=True` but no threshold (it compares the [CLS] and best-span "
    "probabilities, i.e. tau = 0). bert-toolkit's SQuAD recipe applies tau; with other code, "
    "decode the start/end logits of `AutoModelForQuestionAnswering` and apply it yourself."
)


# --------------------------------------------------------------------------------------------
# Remote code
# --------------------------------------------------------------------------------------------


def add_remote_code(folder: str | Path) -> Path:
    """Copy the modeling source into ``folder`` and add ``auto_map`` to its ``config.json``.

    ``model_type`` stays ``bert``: without ``trust_remote_code`` the folder loads as stock BERT,
    with it the Auto classes load this package's classes from the copied files. Returns the
    folder. Raises ``FileNotFoundError`` when ``folder/config.json`` is missing.
    """
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path}: no config.json (not a saved model folder)")
    here = Path(__file__).resolve().parent
    for name in REMOTE_CODE_FILES:
        shutil.copyfile(here / name, folder / name)
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["auto_map"] = dict(AUTO_MAP)
    atomic.write_json(config_path, config)
    return folder


# --------------------------------------------------------------------------------------------
# What a folder holds
# --------------------------------------------------------------------------------------------


def count_parameters(folder: str | Path) -> int | None:
    """Number of stored parameters (tied weights once), from the safetensors header(s) of
    ``folder``; ``None`` when the folder holds no safetensors weights."""
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        with open(path, "rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(size))
        for name, entry in header.items():
            if name != "__metadata__":
                n = 1
                for dim in entry["shape"]:
                    n *= dim
                total += n
    return total


def tokenizer_summary(folder: str | Path) -> dict[str, Any]:
    """Vocabulary size, tokenizer class and lower-casing from the tokenizer files in ``folder``
    (empty when the folder has none)."""
    folder = Path(folder)
    out: dict[str, Any] = {}
    config_file = folder / "tokenizer_config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text(encoding="utf-8"))
        out["tokenizer_class"] = config.get("tokenizer_class")
        if "do_lower_case" in config:
            out["lowercase"] = bool(config["do_lower_case"])
    tokenizer_file = folder / "tokenizer.json"
    vocab_file = folder / "vocab.txt"
    if tokenizer_file.is_file():
        data = json.loads(tokenizer_file.read_text(encoding="utf-8"))
        vocab = (data.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):
            out["vocab_size"] = len(vocab)
        normalizer = data.get("normalizer") or {}
        if "lowercase" in normalizer and "lowercase" not in out:
            out["lowercase"] = bool(normalizer["lowercase"])
    elif vocab_file.is_file():
        out["vocab_size"] = sum(1 for _ in vocab_file.open(encoding="utf-8"))
    return out


# --------------------------------------------------------------------------------------------
# Model card
# --------------------------------------------------------------------------------------------


def _eval_result(item):
    from huggingface_hub import EvalResult

    if isinstance(item, EvalResult):
        return item
    if not isinstance(item, Mapping):
        raise TypeError(f"eval_results: expected a mapping or EvalResult, got {type(item)}")
    try:
        return EvalResult(**item)
    except TypeError as err:
        raise ValueError(f"eval_results: {err} in {dict(item)}") from None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    elif isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    elif isinstance(value, (list, tuple)):
        text = ", ".join(str(v) for v in value)
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def write_model_card(
    folder: str | Path,
    *,
    model_name: str | None = None,
    repo_id: str | None = None,
    base_model: str | None = None,
    datasets: str | Sequence[str] | None = None,
    data_description: str | None = None,
    command: str | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    training_figures: Mapping[str, Any] | None = None,
    eval_results: Sequence[Mapping[str, Any] | Any] = (),
    pipeline_tag: str | None = None,
    intended_use: str | None = None,
    limitations: str | None = None,
    license: str | None = "apache-2.0",
    language: str | Sequence[str] | None = "en",
    tags: Sequence[str] = (),
) -> Path:
    """Write ``folder/README.md``, a Hub model card, and return its path (written atomically).

    ``folder`` is a saved model folder (``config.json``, weights, tokenizer); model size,
    architecture and vocabulary are read from it. Every other argument is keyword-only:

    * ``model_name``: title and ``model-index`` name (default: ``repo_id``, else the folder
      name). ``repo_id``: the Hub id used in the loading examples (default: ``model_name``).
    * ``base_model``: the checkpoint this one was fine-tuned from (a Hub id; omit for a model
      pretrained from scratch).
    * ``datasets``: Hub dataset ids (metadata ``datasets``); ``data_description``: free text for
      the Data section (what text, how much, which split, local paths).
    * ``command``: the command line that trained the model; ``hyperparameters``: the recipe
      (name -> value), shown as a table.
    * ``training_figures``: name -> value (steps, tokens, time, final loss...), shown as a table.
    * ``eval_results``: each a ``huggingface_hub.EvalResult`` or a mapping with its field names
      (``task_type``, ``dataset_type``, ``dataset_name``, ``metric_type``, ``metric_value``,
      optional ``task_name``, ``dataset_config``, ``dataset_split``, ``metric_name``, ...).
      They become the Hub's ``model-index`` metadata and the Evaluation table.
    * ``pipeline_tag``: default from the architecture (``fill-mask`` for pretraining models,
      ``text-classification``, ``question-answering``, ``token-classification``).
    * ``intended_use``, ``limitations``: free text; defaults say what any such model is for
      and what it cannot promise.
    * ``license``, ``language``, ``tags`` (added to ``bert``, ``bert-toolkit``): metadata.

    Raises ``FileNotFoundError`` when ``folder/config.json`` is missing and ``ValueError`` for
    an evaluation result without the required fields.
    """
    from huggingface_hub import ModelCardData

    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path}: no config.json (not a saved model folder)")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    architecture = (config.get("architectures") or ["BertModel"])[0]
    default_tag, auto_class = _ARCHITECTURES.get(architecture, (None, "AutoModel"))
    pipeline_tag = pipeline_tag or default_tag
    model_name = model_name or repo_id or folder.resolve().name
    repo_id = repo_id or model_name
    results = [_eval_result(r) for r in eval_results]
    tags = list(dict.fromkeys([*LIBRARY_TAGS, *tags]))

    data = ModelCardData(
        model_name=model_name,
        license=license,
        language=_as_list(language) or None,
        library_name="transformers",
        tags=tags,
        datasets=_as_list(datasets) or None,
        base_model=base_model,
        pipeline_tag=pipeline_tag,
        eval_results=results or None,
    )

    n_params = count_parameters(folder)
    tok = tokenizer_summary(folder)
    size_rows = [
        ("architecture", f"{architecture} (model_type `{config.get('model_type')}`)"),
        ("layers (L)", config.get("num_hidden_layers")),
        ("hidden size (H)", config.get("hidden_size")),
        ("attention heads (A)", config.get("num_attention_heads")),
        ("feed-forward size", config.get("intermediate_size")),
        ("max positions", config.get("max_position_embeddings")),
        ("parameters", n_params if n_params is not None else "n/a"),
        ("vocabulary", config.get("vocab_size")),
    ]
    if tok.get("tokenizer_class"):
        size_rows.append(("tokenizer", tok["tokenizer_class"]))
    if "lowercase" in tok:
        size_rows.append(("lower-cased", "yes" if tok["lowercase"] else "no (cased)"))
    if config.get("id2label") and architecture != "BertForPreTraining":
        labels = [config["id2label"][k] for k in sorted(config["id2label"], key=int)]
        size_rows.append(("labels", labels))

    sections = [f"# {model_name}", ""]
    sections.append(
        f"BERT ({config.get('num_hidden_layers')} layers, hidden size "
        f"{config.get('hidden_size')}, {config.get('num_attention_heads')} heads"
        + (f", {n_params / 1e6:.1f}M parameters" if n_params else "")
        + ") trained with bert-toolkit"
        + (f", fine-tuned from `{base_model}`" if base_model else "")
        + ". The checkpoint is plain BERT: stock `transformers` loads it without this package."
    )
    sections += ["", "## Model", "", _table(size_rows, ("property", "value")), ""]
    sections += ["## Data", ""]
    data_lines = []
    if data_description:
        data_lines.append(data_description)
    if datasets:
        data_lines.append("Datasets: " + ", ".join(f"`{d}`" for d in _as_list(datasets)) + ".")
    sections += [("\n\n".join(data_lines) or "Not recorded."), ""]
    sections += ["## Training", ""]
    if command:
        sections += ["Command:", "", "```bash", command, "```", ""]
    if hyperparameters:
        rows = [(k, v) for k, v in hyperparameters.items()]
        sections += ["Recipe:", "", _table(rows, ("hyper-parameter", "value")), ""]
    if training_figures:
        rows = [(k, v) for k, v in training_figures.items()]
        sections += ["Training figures:", "", _table(rows, ("figure", "value")), ""]
    if not (command or hyperparameters or training_figures):
        sections += ["Not recorded.", ""]
    sections += ["## Evaluation", ""]
    if results:
        rows = [
            (
                r.task_name or r.task_type,
                r.dataset_name,
                r.dataset_split or "",
                r.metric_name or r.metric_type,
                r.metric_value,
            )
            for r in results
        ]
        sections += [_table(rows, ("task", "dataset", "split", "metric", "value")), ""]
    else:
        sections += ["No evaluation recorded.", ""]
    use = intended_use or _DEFAULT_USE.get(pipeline_tag, _DEFAULT_TASK_USE)
    sections += ["## Intended use", "", use, ""]
    limits = limitations or _DEFAULT_LIMITS
    if architecture == "BertForQuestionAnswering":
        limits += "\n\n" + QA_THRESHOLD_NOTE
    sections += ["## Limitations", "", limits, ""]
    sections += ["## How to load", "", _loading_snippet(repo_id, auto_class, pipeline_tag), ""]
    if "auto_map" in config:
        sections += [
            "bert-toolkit's faster implementation of the same math (unpadded encoder, MLM head "
            "at the masked positions only) ships in this repository: add "
            "`trust_remote_code=True` to pick it.",
            "",
            "```python",
            f'model = {auto_class}.from_pretrained("{repo_id}", trust_remote_code=True)',
            "```",
            "",
        ]
    body = "\n".join(sections).replace("\n\n\n", "\n\n")
    text = f"---\n{data.to_yaml()}\n---\n\n{body}"
    target = folder / CARD_NAME
    atomic.write_text(target, text)
    return target


def _loading_snippet(repo_id: str, auto_class: str, pipeline_tag: str | None) -> str:
    lines = ["```python", f"from transformers import AutoTokenizer, {auto_class}"]
    if pipeline_tag in ("fill-mask", "text-classification", "token-classification"):
        lines[-1] += ", pipeline"
    lines += [
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}")',
        f'model = {auto_class}.from_pretrained("{repo_id}")',
    ]
    if pipeline_tag == "fill-mask":
        lines.append(f'pipeline("fill-mask", model="{repo_id}")("Paris is the [MASK] of France.")')
    elif pipeline_tag in ("text-classification", "token-classification"):
        lines.append(f'pipeline("{pipeline_tag}", model="{repo_id}")("Some text.")')
    lines.append("```")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Upload
# --------------------------------------------------------------------------------------------

# Never uploaded: hidden files, temporary files of atomic writes, Python caches.
IGNORE_PATTERNS = [".*", "**/.*", "*.tmp", "*.tmp-*", "__pycache__", "**/__pycache__/*"]


def default_repo_id(output_dir: str | Path) -> str:
    """The repository name used when none is given: the output folder's name (as
    ``transformers.TrainingArguments`` does), the user's namespace being added by the Hub."""
    name = Path(output_dir).resolve().name
    return re.sub(r"[^A-Za-z0-9._-]", "-", name).strip(".-") or "model"


def check_push_settings(repo_id: str, *, token: str | None = None) -> None:
    """Fail fast, before any training, when a push cannot succeed: a malformed ``repo_id``,
    no token (argument, ``HF_TOKEN``, or a saved ``hf auth login``), or offline mode.
    Raises ``ValueError`` with a one-line message."""
    from huggingface_hub import constants, get_token
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise ValueError(f"hub_model_id={repo_id!r} is not a valid repository id: {err}") from None
    if constants.HF_HUB_OFFLINE:
        raise ValueError("push_to_hub: HF_HUB_OFFLINE=1 is set; unset it to upload")
    if not (token or os.environ.get("HF_TOKEN") or get_token()):
        raise ValueError(
            "push_to_hub: no Hub token: set HF_TOKEN, pass --hub_token, or run `hf auth login`"
        )


def push_to_hub(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str = "Upload model trained with bert-toolkit",
) -> str:
    """Upload a saved model folder to the Hub repository ``repo_id`` and return the commit URL.

    The repository is created if missing (``private`` applies only then); ``revision`` names a
    branch, created from ``main`` if missing; ``token`` defaults to the ``HF_TOKEN`` variable,
    then to the login saved by ``hf auth login``. Hidden and temporary files are not uploaded.
    Raises ``FileNotFoundError`` when ``folder`` has no ``config.json``.
    """
    from huggingface_hub import HfApi

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder}: no config.json (not a saved model folder)")
    token = token or os.environ.get("HF_TOKEN") or None
    api = HfApi(token=token)
    repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    repo_id = repo.repo_id
    if revision:
        api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
    info = api.upload_folder(
        repo_id=repo_id,
        folder_path=str(folder),
        repo_type="model",
        revision=revision,
        commit_message=commit_message,
        ignore_patterns=IGNORE_PATTERNS,
    )
    return str(info.commit_url)
