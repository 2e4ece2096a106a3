"""modeling.hub: the model card (metadata the Hub parses, figures read from the folder), the
upload (captured by a local stand-in for the Hub), remote code, and the cheap import."""

import json
import os
import subprocess
import sys
from pathlib import Path

import fake_hub
import pytest
import torch
import yaml
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results
from transformers import AutoTokenizer

from modeling import BertConfig, BertForPreTraining, BertForSequenceClassification, hub
from modeling.constants import AUTO_MAP, REMOTE_CODE_FILES

TINY = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
)

EVAL = [
    {
        "task_type": "text-classification",
        "task_name": "Paraphrase",
        "dataset_type": "nyu-mll/glue",
        "dataset_name": "GLUE MRPC",
        "dataset_config": "mrpc",
        "dataset_split": "validation",
        "metric_type": "accuracy",
        "metric_name": "Accuracy",
        "metric_value": 0.8125,
    },
    {
        "task_type": "text-classification",
        "dataset_type": "nyu-mll/glue",
        "dataset_name": "GLUE MRPC",
        "dataset_config": "mrpc",
        "dataset_split": "validation",
        "metric_type": "f1",
        "metric_value": 0.875,
    },
]


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def glue_folder(tmp_path_factory, tokenizer):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        num_labels=2,
        id2label={0: "not_equivalent", 1: "equivalent"},
        label2id={"not_equivalent": 0, "equivalent": 1},
        **TINY,
    )
    model = BertForSequenceClassification(config)
    folder = tmp_path_factory.mktemp("glue")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, model


def read_card(path):
    text = path.read_text()
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    return text, front


def test_card_metadata_parses_as_the_hub_reads_it(glue_folder):
    folder, model = glue_folder
    path = hub.write_model_card(
        folder,
        model_name="bert-tiny-mrpc",
        repo_id="org/bert-tiny-mrpc",
        base_model="org/bert-tiny",
        datasets=["nyu-mll/glue"],
        eval_results=EVAL,
        tags=["glue"],
    )
    assert path == folder / "README.md"
    _, front = read_card(path)
    assert front["library_name"] == "transformers"
    assert front["license"] == "apache-2.0"
    assert front["language"] == ["en"]
    assert front["pipeline_tag"] == "text-classification"
    assert front["base_model"] == "org/bert-tiny"
    assert front["datasets"] == ["nyu-mll/glue"]
    assert front["tags"] == ["bert", "bert-toolkit", "glue"]
    (entry,) = front["model-index"]
    assert entry["name"] == "bert-tiny-mrpc"
    # the Hub's model-index layout: results [{task, dataset, metrics}]
    (result,) = entry["results"]  # both metrics share task and dataset: one result
    assert result["task"] == {"type": "text-classification", "name": "Paraphrase"}
    assert result["dataset"]["type"] == "nyu-mll/glue"
    assert result["dataset"]["split"] == "validation" and result["dataset"]["config"] == "mrpc"
    assert [(m["type"], m["value"]) for m in result["metrics"]] == [
        ("accuracy", 0.8125),
        ("f1", 0.875),
    ]
    # and huggingface_hub reads it back into the same results
    name, results = model_index_to_eval_results(front["model-index"])
    assert name == "bert-tiny-mrpc"
    assert [(r.metric_type, r.metric_value, r.dataset_split) for r in results] == [
        ("accuracy", 0.8125, "validation"),
        ("f1", 0.875, "validation"),
    ]
    card = ModelCard.load(path)
    assert card.data.eval_results[0].metric_value == 0.8125


def test_card_body_reads_size_vocabulary_and_figures_from_the_folder(glue_folder, tokenizer):
    folder, model = glue_folder
    path = hub.write_model_card(
        folder,
        repo_id="org/bert-tiny-mrpc",
        data_description="MRPC train split (3,668 pairs).",
        command="python scripts/run_glue.py --task_name mrpc --learning_rate 1e-4",
        hyperparameters={"learning_rate": 1e-4, "per_device_train_batch_size": 32},
        training_figures={"train_steps": 345, "train_loss": 0.4321, "train_seconds": 812.5},
        eval_results=EVAL,
    )
    text, front = read_card(path)
    n_params = sum(p.numel() for p in model.parameters())
    assert hub.count_parameters(folder) == n_params
    assert f"| parameters | {n_params:,} |" in text
    assert "| layers (L) | 2 |" in text and "| hidden size (H) | 32 |" in text
    assert "| attention heads (A) | 4 |" in text
    assert f"| vocabulary | {len(tokenizer):,} |" in text
    assert "| lower-cased | yes |" in text
    assert "| labels | not_equivalent, equivalent |" in text
    assert "python scripts/run_glue.py --task_name mrpc --learning_rate 1e-4" in text
    assert "| train_steps | 345 |" in text and "| train_loss | 0.4321 |" in text
    assert "| Paraphrase | GLUE MRPC | validation | Accuracy | 0.8125 |" in text
    assert "| text-classification | GLUE MRPC | validation | f1 | 0.875 |" in text
    assert "MRPC train split (3,668 pairs)." in text
    for section in ("## Model", "## Data", "## Training", "## Evaluation", "## Intended use"):
        assert section in text
    assert "## Limitations" in text and "## How to load" in text
    assert 'AutoModelForSequenceClassification.from_pretrained("org/bert-tiny-mrpc")' in text
    assert "trust_remote_code" not in text  # this folder carries no remote code
    assert front["model-index"][0]["name"] == "org/bert-tiny-mrpc"
    assert hub.tokenizer_summary(folder)["vocab_size"] == len(tokenizer)


def test_pretraining_card_defaults_and_remote_code_note(tmp_path, tokenizer):
    model = BertForPreTraining(BertConfig(vocab_size=len(tokenizer), **TINY))
    model.save_pretrained(tmp_path, remote_code=True)
    tokenizer.save_pretrained(tmp_path)
    text, front = read_card(hub.write_model_card(tmp_path, model_name="bert-tiny"))
    assert front["pipeline_tag"] == "fill-mask"
    assert "model-index" not in front and "base_model" not in front
    assert "No evaluation recorded." in text
    # tied decoder weights are stored once
    assert hub.count_parameters(tmp_path) == sum(p.numel() for p in model.parameters())
    assert 'AutoModelForPreTraining.from_pretrained("bert-tiny", trust_remote_code=True)' in text
    assert 'pipeline("fill-mask", model="bert-tiny")' in text


def test_question_answering_card_says_how_tau_applies(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "architectures": ["BertForQuestionAnswering"]})
    )
    text, front = read_card(hub.write_model_card(tmp_path, model_name="qa"))
    assert front["pipeline_tag"] == "question-answering"
    assert hub.QA_THRESHOLD_NOTE in text
    assert "handle_impossible_answer=True` but no threshold" in text
    assert "The task it was fine-tuned for" in text  # the default intended use of a task model


def test_card_refuses_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        hub.write_model_card(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="eval_results"):
        hub.write_model_card(tmp_path, eval_results=[{"task_type": "fill-mask"}])


def test_add_remote_code_writes_auto_map_and_sources(glue_folder, tmp_path):
    folder, model = glue_folder
    model.save_pretrained(tmp_path)
    hub.add_remote_code(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"] == AUTO_MAP and config["model_type"] == "bert"
    for name in REMOTE_CODE_FILES:
        assert (tmp_path / name).read_bytes() == (Path(hub.__file__).parent / name).read_bytes()


def test_push_uploads_the_folder_and_honours_private_revision_and_token(
    glue_folder, tmp_path, monkeypatch
):
    folder, _ = glue_folder
    hub.write_model_card(folder, model_name="m", eval_results=EVAL)
    (folder / ".model.safetensors.tmp-123").write_text("junk")  # a crashed write: not uploaded
    root = fake_hub.install(tmp_path / "hub")
    monkeypatch.setenv("HF_TOKEN", "hf_env_token")
    url = hub.push_to_hub(folder, "bert-tiny-mrpc", private=True)
    assert url == "https://huggingface.co/user/bert-tiny-mrpc/commit/0123abcd"
    uploaded = root / "user" / "bert-tiny-mrpc" / "main"
    expected = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert sorted(p.name for p in uploaded.iterdir()) == expected
    assert {"config.json", "model.safetensors", "README.md", "tokenizer.json"} <= set(expected)
    assert (uploaded / "model.safetensors").read_bytes() == (
        folder / "model.safetensors"
    ).read_bytes()
    create, upload = fake_hub.calls(root)
    assert create["private"] is True and create["token"] == "hf_env_token"
    assert upload["revision"] is None and upload["token"] == "hf_env_token"
    # an explicit token wins over the environment; a revision is a branch
    hub.push_to_hub(folder, "org/x", token="hf_arg", revision="v1", commit_message="v1 weights")
    calls = fake_hub.calls(root)[2:]
    assert [c["method"] for c in calls] == ["create_repo", "create_branch", "upload_folder"]
    assert all(c["token"] == "hf_arg" for c in calls)
    assert calls[2]["revision"] == "v1" and calls[2]["commit_message"] == "v1 weights"
    assert (root / "org" / "x" / "v1" / "README.md").is_file()
    with pytest.raises(FileNotFoundError, match="config.json"):
        hub.push_to_hub(tmp_path, "org/x")


def test_push_settings_fail_fast_with_one_line(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "t")
    hub.check_push_settings("org/name")
    with pytest.raises(ValueError, match="not a valid repository id") as err:
        hub.check_push_settings("org/bad name!")
    assert "\n" not in str(err.value)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    with pytest.raises(ValueError, match="no Hub token"):
        hub.check_push_settings("org/name")
    hub.check_push_settings("org/name", token="hf_x")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE"):
        hub.check_push_settings("org/name", token="hf_x")


def test_default_repo_id_is_the_output_folder_name(tmp_path):
    assert hub.default_repo_id(tmp_path / "bert tiny (run 2)") == "bert-tiny--run-2"
    assert hub.default_repo_id("outputs/demo/pretrain") == "pretrain"


def test_import_is_cheap():
    code = "import sys, modeling.hub; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(Path(hub.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
