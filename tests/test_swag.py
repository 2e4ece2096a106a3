"""SWAG: readers, (context, ending) pairs, multiple-choice batching shapes and loss, end to end."""

import json

import numpy as np
import pytest
import torch

from modeling.cli import UsageError
from recipes.swag import (
    MultipleChoiceCollator,
    SwagExample,
    accuracy,
    build_features,
    read_swag_file,
    synthetic_swag,
)

HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3"
ROW = (
    '0,anetv_jkn6uvmqwh4,3,"Members of the procession walk. A drum line",'
    "Members of the procession walk.,A drum line,gold,passes by.,has heard.,arrives.,turns."
)


def test_read_swag_csv_as_distributed(tmp_path):
    path = tmp_path / "val.csv"
    path.write_text(f"{HEADER},label\n{ROW},2\n")
    (example,) = read_swag_file(path)
    assert example == SwagExample(
        id="anetv_jkn6uvmqwh4-3",
        context="Members of the procession walk.",
        start="A drum line",
        endings=["passes by.", "has heard.", "arrives.", "turns."],
        label=2,
    )
    test = tmp_path / "test.csv"
    test.write_text(f"{HEADER}\n{ROW}\n")  # the test file has no label column
    assert read_swag_file(test)[0].label is None


@pytest.mark.parametrize(
    "text,message",
    [
        ("sent1,sent2,ending0,ending1,ending2\n", "missing column.*ending3"),
        (f"{HEADER},label\n{ROW},2\n{ROW},x\n", r"val\.csv:3: label 'x'"),
        (f"{HEADER},label\n{ROW},4\n", r"val\.csv:2: label 4 is not in 0\.\.3"),
    ],
)
def test_read_swag_csv_errors(tmp_path, text, message):
    path = tmp_path / "val.csv"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        read_swag_file(path)


def test_binary_or_non_utf8_files_are_one_line_errors(tmp_path):
    path = tmp_path / "val.csv"
    path.write_bytes(f"{HEADER},label\n".encode() + b"0,\xe9t\xe9,x\n")
    with pytest.raises(UsageError, match=rf"^{path}:2: not UTF-8 text \(byte 0xe9"):
        read_swag_file(path)
    path.write_bytes(b"PK\x03\x04\x00\x00binary")
    with pytest.raises(UsageError, match=rf"^{path}:1: binary data"):
        read_swag_file(path)


def test_read_swag_json_fixture(shared_data):
    examples = read_swag_file(shared_data / "fixtures" / "swag" / "sample.json")
    assert len(examples) == 10
    first = examples[0]
    assert first.context.startswith("Members of the procession walk down the street")
    assert first.start == "A drum line"
    assert first.endings[0] == "passes by walking down the street playing their instruments."
    assert first.label == 0 and examples[1].label == 3 and examples[2].label == 1


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


def test_pairs_are_context_then_start_plus_ending(tokenizer):
    example = SwagExample("x", "A man sits.", "He", ["eats.", "runs far away.", "sleeps.", "x"], 1)
    (feature,) = build_features([example], tokenizer, 32)
    assert feature["labels"] == 1 and len(feature["input_ids"]) == 4
    texts = [tokenizer.decode(ids) for ids in feature["input_ids"]]
    assert texts[1] == "[CLS] a man sits. [SEP] he runs far away. [SEP]"
    types = feature["token_type_ids"][1]
    assert types == [0] * 6 + [1] * (len(types) - 6)  # [CLS] a man sits . [SEP] | B
    long = SwagExample("y", "word " * 100, "start " * 50, ["end"] * 4, None)
    (cut,) = build_features([long], tokenizer, 24)
    assert all(len(ids) == 24 for ids in cut["input_ids"]) and "labels" not in cut
    assert cut["token_type_ids"][0].count(1) >= 3  # longest-first: both segments keep pieces


@pytest.mark.slow
def test_multiple_choice_batch_shapes_and_loss(tokenizer, tmp_path):
    from modeling import BertForMultipleChoice

    examples = synthetic_swag(3, seed=1)
    features = build_features(examples, tokenizer, 64)
    batch = MultipleChoiceCollator(tokenizer)(features)
    assert batch["input_ids"].shape == (3, 4, max(len(x) for f in features for x in f["input_ids"]))
    assert batch["labels"].tolist() == [e.label for e in examples]
    from test_ner import tiny_checkpoint

    path = tiny_checkpoint(tmp_path / "tiny", tokenizer)
    model = BertForMultipleChoice.from_pretrained(path).eval()
    out = model(**batch)
    assert out.logits.shape == (3, 4)
    expected = torch.nn.functional.cross_entropy(out.logits, batch["labels"])
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-6)
    # each choice is scored on its own: the score of a choice ignores the other choices
    alone = model(**{k: v[:, :1] if v.dim() == 3 else v for k, v in batch.items() if k != "labels"})
    torch.testing.assert_close(alone.logits[:, 0], out.logits[:, 0], atol=1e-5, rtol=1e-5)
    # padding over choices changes nothing: one example at a time gives the same scores
    for i, feature in enumerate(features):
        one = MultipleChoiceCollator(tokenizer)([feature])
        single = model(**{k: v for k, v in one.items() if k != "labels"}).logits[0]
        torch.testing.assert_close(single, out.logits[i], atol=1e-5, rtol=1e-5)
    # no labels (the test file): still a batch
    stripped = [{k: v for k, v in f.items() if k != "labels"} for f in features]
    unlabelled = MultipleChoiceCollator(tokenizer)(stripped)
    assert "labels" not in unlabelled and unlabelled["input_ids"].shape[:2] == (3, 4)
    perfect = [np.eye(4)[e.label] for e in examples]
    assert accuracy(perfect, [e.label for e in examples]) == 100
    assert accuracy(perfect, [(e.label + 1) % 4 for e in examples]) == 0


def test_synthetic_task_needs_the_context():
    examples = synthetic_swag(400, seed=3)
    labels = np.bincount([e.label for e in examples], minlength=4)
    assert labels.min() > 70  # answer position uniform
    for e in examples[:50]:
        answer = e.endings[e.label].rstrip(".")
        noun = e.start.split()[1]
        assert f"the {noun} is {answer}" in e.context.lower()
        mentioned = [x for x in e.endings if x.rstrip(".") in e.context]
        assert len(mentioned) == 2  # the other object's colour is a distractor
    assert synthetic_swag(5, seed=3)[0] == examples[0]
    copy = synthetic_swag(20, seed=3, task="copy")
    for e in copy:
        assert [x for x in e.endings if x.rstrip(".") in e.context] == [e.endings[e.label]]
    with pytest.raises(ValueError, match="synthetic task"):
        synthetic_swag(1, task="other")


@pytest.mark.slow
def test_run_swag_end_to_end_on_fixture(shared_data, tokenizer, tmp_path):
    from test_ner import run_script, tiny_checkpoint

    fixture = str(shared_data / "fixtures" / "swag" / "sample.json")
    out = tmp_path / "out"
    run_script(
        "run_swag",
        model_name_or_path=tiny_checkpoint(tmp_path / "tiny", tokenizer),
        train_file=fixture,
        validation_file=fixture,
        do_train=True,
        do_eval=True,
        max_steps=2,
        per_device_train_batch_size=4,
        output_dir=out,
        cache_dir=tmp_path / "cache",
        disable_tqdm="true",
    )
    results = json.loads((out / "all_results.json").read_text())
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and results["train_samples"] == 10
    assert results["eval_samples"] == 10 and results["train_final_learning_rate"] == 0
    rows = [json.loads(line) for line in (out / "dev_predictions.jsonl").read_text().splitlines()]
    assert [r["label"] for r in rows[:3]] == [0, 3, 1]
    assert all(abs(sum(r["probabilities"]) - 1) < 1e-4 for r in rows)
    hits = sum(r["prediction"] == r["label"] for r in rows)
    assert results["eval_accuracy"] == pytest.approx(10.0 * hits)  # percent
    assert (out / "config.json").is_file() and (out / "README.md").is_file()
