"""Feature extraction (Google's extract_features layout) and the feature-based BiLSTM tagger."""

import json

import numpy as np
import pytest
import torch

from recipes.features import _layer_index, extract_features, write_jsonl, write_npz
from recipes.ner.tagger import FeatureBasedTagger


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, tokenizer):
    from test_ner import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("tiny"), tokenizer, layers=3)


def _encoder(path):
    from modeling import BertModel

    return BertModel.from_pretrained(path, unpad_inputs=True).eval()


def test_layer_numbering():
    assert [_layer_index(i, 3) for i in (-1, -2, -3, 0, 2)] == [3, 2, 1, 1, 3]
    with pytest.raises(ValueError, match="layer -4 out of range"):
        _layer_index(-4, 3)


def test_extracted_layers_match_a_single_forward(tiny_dir, tokenizer):
    model = _encoder(tiny_dir)
    texts = ["Hello world .", "A much longer text to force some padding in the batch", "x ||| y z"]
    items = list(extract_features(model, tokenizer, texts, [-1, -3], 32, 8, disable_tqdm=True))
    assert [tokens[0] for tokens, _ in items] == ["[CLS]"] * 3
    assert items[2][0] == ["[CLS]", "x", "[SEP]", "y", "z", "[SEP]"]
    for text, (tokens, values) in zip(texts, items):
        a, _, b = text.partition(" ||| ")
        enc = tokenizer(a, b or None, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states
        assert values.shape == (2, len(tokens), 32)
        np.testing.assert_allclose(values[0], hidden[3][0].numpy(), atol=1e-5)  # -1: last
        np.testing.assert_allclose(values[1], hidden[1][0].numpy(), atol=1e-5)  # -3: first


def test_writers(tmp_path):
    values = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) / 7
    items = [(["[CLS]", "hi", "[SEP]"], values)]
    assert write_jsonl(tmp_path / "f.jsonl", items, [-1, -2]) == 1
    record = json.loads((tmp_path / "f.jsonl").read_text())
    assert record["linex_index"] == 0
    assert [f["token"] for f in record["features"]] == ["[CLS]", "hi", "[SEP]"]
    layer = record["features"][1]["layers"][1]
    assert layer["index"] == -2 and layer["values"] == [round(float(v), 6) for v in values[1, 1]]
    write_npz(tmp_path / "f.npz", items, [-1, -2])
    data = np.load(tmp_path / "f.npz")
    np.testing.assert_array_equal(data["features_0"], values)
    assert data["tokens_0"].tolist() == ["[CLS]", "hi", "[SEP]"]


@pytest.mark.slow
def test_extract_features_script(tiny_dir, tmp_path):
    from test_ner import run_script

    texts = tmp_path / "texts.txt"
    texts.write_text("Who was Jim Henson ? ||| Jim Henson was a puppeteer\n\nsecond line\n")
    run_script(
        "extract_features",
        model_name_or_path=tiny_dir,
        input_file=texts,
        output_file=tmp_path / "out.npz",
        layers=["-1", "-2"],
        disable_tqdm=True,
    )
    data = np.load(tmp_path / "out.npz")
    assert data["layers"].tolist() == [-1, -2]
    assert data["features_0"].shape == (2, len(data["tokens_0"]), 32)
    assert data["tokens_0"].tolist().count("[SEP]") == 2 and "features_1" in data
    assert "features_2" not in data  # the blank line is skipped


def test_tagger_is_frozen_and_trains_with_trainer(tiny_dir, tokenizer, tmp_path):
    from datasets import Dataset
    from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments

    tagger = FeatureBasedTagger(_encoder(tiny_dir), num_labels=2, layers=3, lstm_hidden_size=16)
    assert tagger.lstm.input_size == 3 * 32 and tagger.lstm.num_layers == 2
    tagger.train()
    assert tagger.training and not tagger.encoder.training  # no dropout in the frozen encoder
    before = {k: v.clone() for k, v in tagger.encoder.state_dict().items()}

    # label 1 for 5 of 20 token ids: readable from frozen random features
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(128):
        ids = rng.integers(1000, 1020, size=rng.integers(3, 12)).tolist()
        rows.append(
            {
                "input_ids": ids,
                "attention_mask": [1] * len(ids),
                "token_type_ids": [0] * len(ids),
                "labels": [int(i < 1005) for i in ids],
            }
        )
    args = TrainingArguments(
        output_dir=str(tmp_path),
        learning_rate=1e-2,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=7,
        num_train_epochs=8,
        disable_tqdm=True,
        logging_steps=8,
        save_strategy="no",
        report_to=[],
    )
    trainer = Trainer(
        model=tagger,
        args=args,
        train_dataset=Dataset.from_list(rows),
        data_collator=DataCollatorForTokenClassification(tokenizer),
    )
    trainable = {id(p) for g in trainer.create_optimizer().param_groups for p in g["params"]}
    assert trainable == {
        id(p) for p in [*tagger.lstm.parameters(), *tagger.classifier.parameters()]
    }
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses[-1] < 0.3 * losses[0]
    for key, value in tagger.encoder.state_dict().items():
        torch.testing.assert_close(value, before[key])
    out = trainer.predict(Dataset.from_list(rows[:20]))
    hits = [
        (lg[: len(f["labels"])].argmax(-1) == f["labels"]).mean()
        for lg, f in zip(out.predictions, rows[:20])
    ]
    assert np.mean(hits) > 0.9
    # the head round-trips through save_pretrained / from_pretrained
    tagger.save_pretrained(tmp_path)
    again = FeatureBasedTagger.from_pretrained(tmp_path, encoder=str(tiny_dir)).eval()
    batch = {k: torch.tensor([rows[0][k]]) for k in ("input_ids", "attention_mask")}
    torch.testing.assert_close(again(**batch).logits, tagger.eval()(**batch).logits)


def test_tagger_rejects_too_many_layers(tiny_dir):
    with pytest.raises(ValueError, match="layers must be in"):
        FeatureBasedTagger(_encoder(tiny_dir), num_labels=2, layers=4)


@pytest.mark.slow
def test_run_ner_feature_based_on_fixture(shared_data, tiny_dir, tmp_path):
    from test_ner import run_script

    fixture = str(shared_data / "fixtures" / "conll" / "sample.json")
    out = tmp_path / "out"
    run_script(
        "run_ner",
        model_name_or_path=tiny_dir,
        train_file=fixture,
        validation_file=fixture,
        feature_based=True,
        feature_layers=3,
        lstm_hidden_size=16,
        max_steps=2,
        per_device_train_batch_size=4,
        output_dir=out,
        do_train=True,
        do_eval=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    results = json.loads((out / "eval_results.json").read_text())
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and results["eval_samples"] == 10
    settings = json.loads((out / "tagger_config.json").read_text())
    assert settings["layers"] == 3 and settings["lstm_hidden_size"] == 16
    assert (out / "tagger_head.safetensors").is_file()
