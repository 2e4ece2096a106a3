"""GLUE recipe: metrics against hand-computed values, real-TSV loaders, leaderboard files, runs."""

import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from recipes.glue import (
    TASKS,
    GlueDataArguments,
    GlueDataError,
    compute_metrics,
    decode_predictions,
    get_task,
    glue_score,
    load_split,
    read_glue_tsv,
    read_records_file,
    tokenize_examples,
    write_predictions,
    zip_submission,
)

REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------------ metrics


def test_classification_metrics_match_hand_computed_values():
    preds = [1, 1, 0, 0, 1, 0]
    refs = [1, 0, 0, 0, 1, 1]  # TP 2, FP 1, TN 2, FN 1
    cola = compute_metrics(get_task("cola"), preds, refs)
    assert cola["matthews_correlation"] == pytest.approx((2 * 2 - 1 * 1) / math.sqrt(3**4))
    assert cola["score"] == pytest.approx(1 / 3)
    mrpc = compute_metrics(get_task("mrpc"), preds, refs)
    assert mrpc["f1"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert mrpc["accuracy"] == pytest.approx(4 / 6)
    assert mrpc["score"] == pytest.approx((2 / 3 + 4 / 6) / 2)
    # F1 is of the positive class 1, not of the majority or a macro average
    flipped = compute_metrics(get_task("qqp"), [1 - p for p in preds], [1 - r for r in refs])
    assert flipped["f1"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))  # TN/TP swap: same counts here
    skewed = compute_metrics(get_task("qqp"), [1, 1, 1, 1], [1, 0, 0, 0])
    assert skewed["f1"] == pytest.approx(2 / 5) and skewed["accuracy"] == 0.25
    assert compute_metrics(get_task("rte"), [0, 1, 1], [0, 1, 0])["accuracy"] == pytest.approx(
        2 / 3
    )


def test_regression_metrics_match_hand_computed_values():
    stsb = compute_metrics(get_task("stsb"), [1.0, 2.0, 3.0, 10.0], [1.0, 3.0, 2.0, 4.0])
    # deviations (-3,-2,-1,6) and (-1.5,.5,-.5,1.5): cov 13, variances 50 and 5
    assert stsb["pearson"] == pytest.approx(13 / math.sqrt(50 * 5))
    # ranks (1,2,3,4) vs (1,3,2,4): Spearman = Pearson of the ranks = 4/5
    assert stsb["spearmanr"] == pytest.approx(0.8)
    assert stsb["score"] == pytest.approx((13 / math.sqrt(250) + 0.8) / 2)


def test_glue_score_reproduces_bert_base_leaderboard_score():
    # BERT-base test results (Devlin et al. 2018, Table 1; GLUE leaderboard score 78.3)
    published = {
        "cola": 52.1,
        "sst2": 93.5,
        "mrpc": {"f1": 88.9, "accuracy": 84.8},
        "stsb": {"pearson": 87.1, "spearmanr": 85.8},
        "qqp": {"f1": 71.2, "accuracy": 89.2},
        "mnli": {"accuracy": 84.6, "accuracy_mm": 83.4},
        "qnli": 90.5,
        "rte": 66.4,
        "wnli": 65.1,
        "ax": 34.2,  # the diagnostic set is not part of the score
    }
    assert round(glue_score(published), 1) == 78.3
    split = dict(published, **{"mnli-m": 84.6, "mnli-mm": 83.4})
    del split["mnli"]
    assert glue_score(split) == pytest.approx(glue_score(published))
    assert glue_score({"rte": 0.6, "cola": {"matthews_correlation": 0.2}}) == pytest.approx(0.4)


# ------------------------------------------------------------------------------------ loaders


def test_registry_covers_every_glue_task_and_leaderboard_file():
    assert set(TASKS) == {
        "cola",
        "sst2",
        "mrpc",
        "stsb",
        "qqp",
        "mnli",
        "qnli",
        "rte",
        "wnli",
        "ax",
    }
    files = {s.submission for t in TASKS.values() for s in t.test}
    assert files == {
        "CoLA.tsv",
        "SST-2.tsv",
        "MRPC.tsv",
        "STS-B.tsv",
        "QQP.tsv",
        "MNLI-m.tsv",
        "MNLI-mm.tsv",
        "QNLI.tsv",
        "RTE.tsv",
        "WNLI.tsv",
        "AX.tsv",
    }
    assert get_task("SST-2") is TASKS["sst2"] and get_task("STS-B").is_regression


@pytest.mark.parametrize(
    "task, split, count, first_label, first_text",
    [
        ("cola", "train", 8551, "1", "Our friends won't buy this analysis"),  # no header
        ("cola", "dev", 1043, "1", "The sailors rode the breeze clear of the rocks."),
        ("cola", "test", 1063, None, "Bill whistled past the house."),
        ("sst2", "dev", 872, "1", "it 's a charming and often affecting journey ."),
        ("mrpc", "train", 3668, "1", "Amrozi accused his brother"),  # header with a BOM
        ("mrpc", "dev", 408, "1", "He said the foodservice pie business"),
        ("mrpc", "test", 1725, None, "PCCW 's chief operating officer"),
        ("rte", "train", 2490, "not_entailment", "No Weapons of Mass Destruction Found in Iraq"),
        ("rte", "dev", 277, "not_entailment", "Dana Reeve, the widow of the actor"),
        ("rte", "test", 3000, None, "Mangla was summoned after Madhumita's sister"),
        ("wnli", "dev", 71, "0", "The drain is clogged with hair."),
        ("qnli", "dev", 5463, "entailment", "What came into force after the new constitution"),
        ("ax", "test", 1104, None, "The cat sat on the mat."),
    ],
)
def test_loaders_read_the_real_glue_tsvs(shared_data, task, split, count, first_label, first_text):
    spec = get_task(task)
    data = GlueDataArguments(task_name=task, data_dir=str(shared_data / "glue" / spec.folder))
    ((_, examples),) = load_split(spec, data, split)
    assert len(examples) == count
    assert examples[0].label == first_label
    assert examples[0].text_a.startswith(first_text)
    assert (examples[0].text_b is None) == (spec.text_columns[1] is None)
    if split == "test":
        assert [e.index for e in examples[:3]] == ["0", "1", "2"]
    else:
        assert {e.label for e in examples} == set(spec.labels)


def test_malformed_rows_are_reported_with_file_and_line(tmp_path):
    rte = get_task("rte")
    path = tmp_path / "dev.tsv"
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\ta b\tc\tentailment\n1\tonly two\n")
    with pytest.raises(GlueDataError, match=rf"{path}:3: malformed row, 2 .* has 4"):
        read_glue_tsv(rte, path)
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\ta b\tc\tmaybe\n")
    with pytest.raises(GlueDataError, match=rf"{path}:2: label 'maybe' is not one of rte"):
        read_glue_tsv(rte, path)
    path.write_text("index\tpremise\thypothesis\tlabel\n")
    with pytest.raises(GlueDataError, match=rf"{path}:1: header .* lacks the rte column"):
        read_glue_tsv(rte, path)
    path.write_text("index\tsentence1\tsentence2\n0\ta\tb\n")
    with pytest.raises(GlueDataError, match=rf"{path}:2: no label"):
        read_glue_tsv(rte, path, labelled=True)
    with pytest.raises(FileNotFoundError):
        read_glue_tsv(rte, tmp_path / "missing.tsv")


def test_csv_json_and_stsb_files(shared_data, tmp_path):
    fixtures = shared_data / "fixtures"
    mrpc = read_records_file(get_task("mrpc"), fixtures / "MRPC" / "dev.csv", labelled=True)
    # the Hub's label names map onto GLUE's: equivalent = 1 (the positive class of F1)
    assert mrpc[0].label == "1" and mrpc[1].label == "0"
    assert mrpc[0].text_b.startswith('" The foodservice pie')
    stsb = read_glue_tsv(get_task("stsb"), fixtures / "STS-B" / "dev.tsv", labelled=True)
    assert stsb[0].label == 5.0 and stsb[1].label == 4.75 and stsb[0].index == "0"
    lines = tmp_path / "rte.jsonl"
    lines.write_text(
        '{"sentence1": "a", "sentence2": "b", "label": "entailment", "idx": 7}\n'
        '{"sentence1": "c", "sentence2": "d", "label": 1}\n'
        '{"sentence1": "e", "sentence2": "f", "label": "not_entailment"}\n'
    )
    with pytest.raises(GlueDataError, match=rf"{lines}:2: label 1 is not one of rte"):
        read_records_file(get_task("rte"), lines)
    lines.write_text(
        '{"sentence1": "a", "sentence2": "b", "label": "entailment", "idx": 7}\n{"sentence1": "c"'
    )
    with pytest.raises(GlueDataError, match=rf"{lines}:2: invalid JSON"):
        read_records_file(get_task("rte"), lines)
    records = tmp_path / "cola.json"
    records.write_text(json.dumps([{"sentence": "x y", "label": 1}, {"sentence": "z", "label": 0}]))
    loaded = read_records_file(get_task("cola"), records)
    assert [e.label for e in loaded] == ["1", "0"] and loaded[1].index == "1"


# ------------------------------------------------------------------------------------ features


def test_tokenize_pairs_truncates_longest_first(minilm_path):
    from transformers import AutoTokenizer

    from recipes.glue import Example

    tok = AutoTokenizer.from_pretrained(minilm_path)
    rte = get_task("rte")
    long_a = " ".join(["alpha"] * 40)
    examples = [
        Example("0", "the cat sat", "a dog ran", "entailment"),
        Example("1", long_a, "short one", "not_entailment"),
    ]
    f0, f1 = tokenize_examples(examples, tok, rte, max_seq_length=16)
    assert tok.convert_ids_to_tokens(f0["input_ids"]) == (
        ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "ran", "[SEP]"]
    )
    assert f0["token_type_ids"] == [0] * 5 + [1] * 4 and f0["labels"] == 0
    # 16 = CLS + 11 alpha + SEP + short one + SEP: only the longer segment was cut
    assert len(f1["input_ids"]) == 16 and f1["labels"] == 1
    assert tok.convert_ids_to_tokens(f1["input_ids"])[-4:] == ["[SEP]", "short", "one", "[SEP]"]
    stsb = tokenize_examples([Example("0", "a", "b", 3.8)], tok, get_task("stsb"))
    assert stsb[0]["labels"] == pytest.approx(3.8)


def test_leaderboard_file_format(tmp_path):
    rte, stsb, mrpc = get_task("rte"), get_task("stsb"), get_task("mrpc")
    names = decode_predictions(rte, [np.array([2.0, -1.0]), np.array([0.0, 3.0])])
    assert names == ["entailment", "not_entailment"]
    assert decode_predictions(mrpc, [np.array([0.1, 0.2])]) == ["1"]
    # a model fine-tuned elsewhere with another label order is decoded by its own id2label
    swapped = {0: "not_entailment", 1: "entailment"}
    assert decode_predictions(rte, [np.array([2.0, -1.0])], swapped) == ["not_entailment"]
    scores = decode_predictions(stsb, [np.array([3.14159]), np.array([0.5])])
    write_predictions(tmp_path / "STS-B.tsv", ["0", "1"], scores)
    assert (tmp_path / "STS-B.tsv").read_text() == "index\tprediction\n0\t3.142\n1\t0.500\n"
    write_predictions(tmp_path / "RTE.tsv", ["0", "1"], names)
    (tmp_path / "notes.txt").write_text("not part of the upload")
    archive = zip_submission(tmp_path)
    assert archive == tmp_path.parent / f"{tmp_path.name}.zip"
    assert sorted(zipfile.ZipFile(archive).namelist()) == ["RTE.tsv", "STS-B.tsv"]


# ------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, minilm_path):
    """A randomly initialised 2-layer, hidden-32 BERT with the real uncased vocabulary."""
    import torch
    from transformers import AutoTokenizer

    from modeling import BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    folder = tmp_path_factory.mktemp("tiny-bert")
    BertModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _run_glue(argv):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import run_glue
    finally:
        sys.path.pop(0)
    return run_glue.main([str(a) for a in argv])


def _rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_end_to_end_grid_on_rte_writes_results_and_submission(shared_data, tiny_model, tmp_path):
    out = tmp_path / "rte"
    outcome = _run_glue(
        [
            "--config",
            REPO / "recipes" / "minilm" / "glue.yaml",
            "--model_name_or_path",
            tiny_model,
            "--task_name",
            "rte",
            "--data_dir",
            shared_data / "glue" / "RTE",
            "--output_dir",
            out,
            "--max_train_samples",
            48,
            "--learning_rate_grid",
            1e-3,
            1e-4,
            "--batch_size_grid",
            16,
            "--num_train_epochs",
            1,
            "--do_predict",
            "--disable_tqdm",
        ]
    )
    grid = json.loads((out / "grid_results.json").read_text())
    assert len(grid["runs"]) == 2 and grid["metric"] == "score"
    chosen = Path(grid["chosen_run"]["output_dir"])
    results = json.loads((chosen / "eval_results.json").read_text())
    assert {"accuracy", "score", "eval_samples", "train_loss"} <= set(results)
    assert results["eval_samples"] == 277 and 0 <= results["accuracy"] <= 1
    dev_rows = _rows(chosen / "eval_predictions.tsv")
    assert dev_rows[0] == ["index", "prediction"] and len(dev_rows) == 1 + 277
    assert {r[1] for r in dev_rows[1:]} <= {"entailment", "not_entailment"}
    # the recorded accuracy is the accuracy of the written predictions
    ((_, dev),) = load_split(
        get_task("rte"),
        GlueDataArguments(task_name="rte", data_dir=str(shared_data / "glue" / "RTE")),
        "dev",
    )
    agree = np.mean([r[1] == e.label for r, e in zip(dev_rows[1:], dev)])
    assert agree == pytest.approx(results["accuracy"])
    test_rows = _rows(out / "submission" / "RTE.tsv")
    assert test_rows[0] == ["index", "prediction"] and len(test_rows) == 1 + 3000
    assert [r[0] for r in test_rows[1:4]] == ["0", "1", "2"]
    assert zipfile.ZipFile(outcome["submission_zip"]).namelist() == ["RTE.tsv"]


@pytest.mark.slow
def test_submission_for_every_test_set_present(shared_data, tiny_model, tmp_path):
    """Leaderboard files for every real GLUE test set here: names, headers, row counts."""
    from recipes.arguments import ModelArguments, TrainingArguments
    from recipes.finetune import load_tokenizer
    from recipes.glue import build_model, predict_test_sets

    model_args = ModelArguments(model_name_or_path=str(tiny_model))
    tokenizer = load_tokenizer(model_args)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=256)
    args.disable_tqdm = True
    submission = tmp_path / "glue_submission"
    expected = {}
    for name in ("cola", "sst2", "mrpc", "rte", "wnli", "qnli", "ax"):
        task = get_task(name)
        data = GlueDataArguments(task_name=name, data_dir=str(shared_data / "glue" / task.folder))
        test_sets = load_split(task, data, "test")
        predict_test_sets(task, build_model(task, model_args), tokenizer, test_sets, data, args,
                          submission)  # fmt: skip
        for eval_set, examples in test_sets:
            expected[eval_set.submission] = (len(examples), set(task.labels))
    archive = zip_submission(submission)
    with zipfile.ZipFile(archive) as zf:
        assert sorted(zf.namelist()) == sorted(expected)
        assert sorted(expected) == sorted(
            ["AX.tsv", "CoLA.tsv", "MRPC.tsv", "QNLI.tsv", "RTE.tsv", "SST-2.tsv", "WNLI.tsv"]
        )
        for name, (count, labels) in expected.items():
            rows = [line.split("\t") for line in zf.read(name).decode().splitlines()]
            assert rows[0] == ["index", "prediction"], name
            assert len(rows) == 1 + count, name
            assert [r[0] for r in rows[1:]] == [str(i) for i in range(count)], name
            assert {r[1] for r in rows[1:]} <= labels, name
    assert expected["AX.tsv"] == (1104, {"contradiction", "entailment", "neutral"})
    assert expected["CoLA.tsv"][0] == 1063 and expected["SST-2.tsv"][0] == 1821


@pytest.mark.slow
def test_mnli_two_dev_sets_and_ax_with_the_mnli_model(shared_data, tiny_model, tmp_path):
    """MNLI in the official layout (synthetic rows): matched + mismatched dev metrics, and the
    MNLI model predicts MNLI-m, MNLI-mm and AX (from the sibling AX folder)."""
    header = (
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
    )
    labels = ["entailment", "neutral", "contradiction"]

    def rows(n, labelled=True):
        out = []
        for i in range(n):
            label = labels[i % 3]
            fields = [str(i), "1", "1a", "fiction", "(x)", "(y)", "(X)", "(Y)"]
            fields += [f"premise number {i}", f"hypothesis {label}"]
            fields += [label, label] if labelled else []
            out.append("\t".join(fields))
        return "\n".join(out) + "\n"

    mnli = tmp_path / "glue" / "MNLI"
    mnli.mkdir(parents=True)
    (mnli / "train.tsv").write_text(header + rows(30))
    (mnli / "dev_matched.tsv").write_text(header + rows(9))
    (mnli / "dev_mismatched.tsv").write_text(header + rows(6))
    test_header = "\t".join(header.split("\t")[:10]) + "\n"
    (mnli / "test_matched.tsv").write_text(test_header + rows(5, False))
    (mnli / "test_mismatched.tsv").write_text(test_header + rows(4, False))
    (tmp_path / "glue" / "AX").symlink_to(shared_data / "glue" / "AX")
    out = tmp_path / "out"
    outcome = _run_glue(
        ["--model_name_or_path", tiny_model, "--task_name", "mnli", "--data_dir", mnli]
        + ["--output_dir", out, "--num_train_epochs", 1, "--do_predict", "--disable_tqdm"]
        + ["--submission_dir", tmp_path / "sub", "--save_model", "false"]
    )
    metrics = outcome["metrics"]
    assert metrics["eval_samples"] == 9 and metrics["eval_samples_mm"] == 6
    assert metrics["score"] == pytest.approx((metrics["accuracy"] + metrics["accuracy_mm"]) / 2)
    assert len(_rows(out / "eval_predictions.tsv")) == 10
    assert len(_rows(out / "eval_predictions_mismatched.tsv")) == 7
    names = zipfile.ZipFile(tmp_path / "sub.zip").namelist()
    assert sorted(names) == ["AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv"]
    assert len(_rows(tmp_path / "sub" / "AX.tsv")) == 1105
    assert len(_rows(tmp_path / "sub" / "MNLI-mm.tsv")) == 5


def test_cli_reports_bad_input_in_one_line(tmp_path, minilm_path):
    bad = tmp_path / "train.csv"
    bad.write_text("sentence1,sentence2,label\na,b,entailment\nc,d\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "run_glue.py"), "--model_name_or_path"]
        + [str(minilm_path), "--task_name", "rte", "--train_file", str(bad)]
        + ["--validation_file", str(bad), "--output_dir", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f"error: {bad}:3: wrong number of fields"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "run_glue.py"), "--model_name_or_path", "x"]
        + ["--task_name", "rte"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "exactly one of --data_dir" in proc.stderr
