"""GLUE recipe: metrics against hand-computed values, real-TSV loaders, leaderboard files, runs."""

import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from modeling.cli import UsageError
from recipes.glue import (
    TASKS,
    Example,
    GlueDataArguments,
    GlueDataError,
    compute_metrics,
    decode_predictions,
    examples_to_records,
    get_task,
    glue_score,
    load_split,
    read_glue_tsv,
    read_records_file,
    tokenize_batch,
    write_predictions,
    zip_submission,
)

REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------------ metrics


def test_classification_metrics_match_hand_computed_values():
    preds = [1, 1, 0, 0, 1, 0]
    refs = [1, 0, 0, 0, 1, 1]  # TP 2, FP 1, TN 2, FN 1
    cola = compute_metrics(get_task("cola"), preds, refs)
    # percentages, as the paper's tables; one metric: no combined score
    assert cola["matthews_correlation"] == pytest.approx(100 * (2 * 2 - 1 * 1) / math.sqrt(3**4))
    assert set(cola) == {"matthews_correlation"}
    mrpc = compute_metrics(get_task("mrpc"), preds, refs)
    assert mrpc["f1"] == pytest.approx(100 * 2 * 2 / (2 * 2 + 1 + 1))
    assert mrpc["accuracy"] == pytest.approx(100 * 4 / 6)
    assert mrpc["combined_score"] == pytest.approx(100 * (2 / 3 + 4 / 6) / 2)
    # F1 is of the positive class 1, not of the majority or a macro average
    flipped = compute_metrics(get_task("qqp"), [1 - p for p in preds], [1 - r for r in refs])
    assert flipped["f1"] == pytest.approx(100 * 2 * 2 / (2 * 2 + 1 + 1))
    skewed = compute_metrics(get_task("qqp"), [1, 1, 1, 1], [1, 0, 0, 0])
    assert skewed["f1"] == pytest.approx(40) and skewed["accuracy"] == 25
    rte = compute_metrics(get_task("rte"), [0, 1, 1], [0, 1, 0])
    assert rte == {"accuracy": pytest.approx(100 * 2 / 3)}


def test_regression_metrics_match_hand_computed_values():
    stsb = compute_metrics(get_task("stsb"), [1.0, 2.0, 3.0, 10.0], [1.0, 3.0, 2.0, 4.0])
    # deviations (-3,-2,-1,6) and (-1.5,.5,-.5,1.5): cov 13, variances 50 and 5
    assert stsb["pearson"] == pytest.approx(100 * 13 / math.sqrt(50 * 5))
    # ranks (1,2,3,4) vs (1,3,2,4): Spearman = Pearson of the ranks = 4/5
    assert stsb["spearmanr"] == pytest.approx(80)
    assert stsb["combined_score"] == pytest.approx(100 * (13 / math.sqrt(250) + 0.8) / 2)


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

    tok = AutoTokenizer.from_pretrained(minilm_path)
    rte = get_task("rte")
    long_a = " ".join(["alpha"] * 40)
    records = examples_to_records(
        rte,
        [
            Example("0", "the cat sat", "a dog ran", "entailment"),
            Example("1", long_a, "short one", "not_entailment"),
        ],
    )
    batch = {k: [r[k] for r in records] for k in records[0]}
    out = tokenize_batch(batch, tok, max_seq_length=16)
    f0 = {k: v[0] for k, v in out.items()}
    f1 = {k: v[1] for k, v in out.items()}
    assert tok.convert_ids_to_tokens(f0["input_ids"]) == (
        ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "ran", "[SEP]"]
    )
    assert f0["token_type_ids"] == [0] * 5 + [1] * 4 and f0["labels"] == 0
    # 16 = CLS + 11 alpha + SEP + short one + SEP: only the longer segment was cut
    assert len(f1["input_ids"]) == 16 and f1["labels"] == 1
    assert tok.convert_ids_to_tokens(f1["input_ids"])[-4:] == ["[SEP]", "short", "one", "[SEP]"]
    (stsb,) = examples_to_records(get_task("stsb"), [Example("0", "a", "b", 3.8)])
    assert stsb["label"] == pytest.approx(3.8)
    single = tokenize_batch({"text_a": ["x y"], "text_b": [None], "label": [None]}, tok)
    assert "labels" not in single and single["token_type_ids"] == [[0, 0, 0, 0]]


def test_leaderboard_file_format(tmp_path, caplog):
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
    with caplog.at_level("WARNING"):
        archive = zip_submission(tmp_path)
    assert archive == tmp_path.parent / f"{tmp_path.name}.zip"
    assert sorted(zipfile.ZipFile(archive).namelist()) == ["RTE.tsv", "STS-B.tsv"]
    # the 9 other leaderboard files are named in the warning
    assert "9 of the 11 GLUE leaderboard files missing" in caplog.text
    assert "MNLI-mm.tsv" in caplog.text and "AX.tsv" in caplog.text
    assert "RTE.tsv," not in caplog.text


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
    argv = [
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
        "--cache_dir",
        tmp_path / "cache",
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
        "true",
    ]
    summary = _run_glue(argv)
    grid = json.loads((out / "grid_results.json").read_text())
    assert grid == json.loads(json.dumps(summary))
    assert len(grid["runs"]) == 2 and grid["metric"] == "eval_accuracy"
    chosen = Path(grid["chosen_run"]["output_dir"])
    assert grid["chosen_run"]["eval_accuracy"] == max(r["eval_accuracy"] for r in grid["runs"])
    results = json.loads((chosen / "eval_results.json").read_text())
    assert results["eval_samples"] == 277 and 0 <= results["eval_accuracy"] <= 100
    dev_rows = _rows(chosen / "eval_predictions.tsv")
    assert dev_rows[0] == ["index", "prediction"] and len(dev_rows) == 1 + 277
    assert {r[1] for r in dev_rows[1:]} <= {"entailment", "not_entailment"}
    # the recorded accuracy (percent) is the accuracy of the written predictions
    ((_, dev),) = load_split(
        get_task("rte"),
        GlueDataArguments(task_name="rte", data_dir=str(shared_data / "glue" / "RTE")),
        "dev",
    )
    agree = np.mean([r[1] == e.label for r, e in zip(dev_rows[1:], dev)])
    assert 100 * agree == pytest.approx(results["eval_accuracy"])
    # the chosen cell is promoted: output_dir holds its model, results, card and submission
    assert json.loads((out / "eval_results.json").read_text()) == results
    assert (out / "config.json").is_file() and (out / "README.md").is_file()
    test_rows = _rows(out / "submission" / "RTE.tsv")
    assert test_rows[0] == ["index", "prediction"] and len(test_rows) == 1 + 3000
    assert [r[0] for r in test_rows[1:4]] == ["0", "1", "2"]
    assert zipfile.ZipFile(out / "submission.zip").namelist() == ["RTE.tsv"]
    # a second launch into the same folder is refused; resuming reuses the finished cells
    with pytest.raises(UsageError, match="is not empty"):
        _run_glue(argv)
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*/all_results.json")}
    again = _run_glue([*argv, "--resume_from_checkpoint", "true"])
    assert again["chosen_run"] == grid["chosen_run"]
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/all_results.json")} == stamps


@pytest.mark.slow
def test_submission_for_every_test_set_present(shared_data, tiny_model, tmp_path):
    """Leaderboard files for every real GLUE test set here: names, headers, row counts."""
    submission = tmp_path / "glue_submission"
    expected = {}
    for name in ("cola", "sst2", "mrpc", "rte", "wnli", "qnli", "ax"):
        task = get_task(name)
        folder = shared_data / "glue" / task.folder
        _run_glue(
            ["--model_name_or_path", tiny_model, "--task_name", name, "--data_dir", folder]
            + ["--do_train", "false", "--do_eval", "false", "--do_predict"]
            + ["--output_dir", tmp_path / name, "--submission_dir", submission]
            + ["--per_device_eval_batch_size", 256, "--cache_dir", tmp_path / "cache"]
        )
        data = GlueDataArguments(task_name=name, data_dir=str(folder))
        for eval_set, examples in load_split(task, data, "test"):
            expected[eval_set.submission] = (len(examples), set(task.labels))
    archive = tmp_path / "glue_submission.zip"
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
    metrics = _run_glue(
        ["--model_name_or_path", tiny_model, "--task_name", "mnli", "--data_dir", mnli]
        + ["--output_dir", out, "--num_train_epochs", 1, "--do_train", "--do_eval"]
        + ["--do_predict", "--disable_tqdm", "true", "--cache_dir", tmp_path / "cache"]
        + ["--submission_dir", tmp_path / "sub"]
    )
    assert metrics["eval_samples"] == 9 and metrics["eval_samples_mm"] == 6
    written = json.loads((out / "eval_results.json").read_text())
    assert written["eval_accuracy_mm"] == metrics["eval_accuracy_mm"]
    assert len(_rows(out / "eval_predictions.tsv")) == 10
    assert len(_rows(out / "eval_predictions_mismatched.tsv")) == 7
    names = zipfile.ZipFile(tmp_path / "sub.zip").namelist()
    assert sorted(names) == ["AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv"]
    assert len(_rows(tmp_path / "sub" / "AX.tsv")) == 1105
    assert len(_rows(tmp_path / "sub" / "MNLI-mm.tsv")) == 5


def _cli(*argv, timeout=180):
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "run_glue.py"), *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_reports_bad_input_in_one_line(tmp_path, minilm_path):
    bad = tmp_path / "train.csv"
    bad.write_text("sentence1,sentence2,label\na,b,entailment\nc,d\n")
    common = ["--model_name_or_path", minilm_path, "--task_name", "rte", "--do_train"]
    proc = _cli(
        *common, "--train_file", bad, "--validation_file", bad, "--output_dir", tmp_path / "o"
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f"error: {bad}:3: wrong number of fields"
    binary = tmp_path / "dev.tsv"
    binary.write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\t\xff\xfe\tc\n")
    proc = _cli(*common, "--train_file", binary, "--output_dir", tmp_path / "o")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: {binary}:3: not UTF-8 text (byte 0xff at offset 51)"
    )
    binary.write_bytes(b"\x00\x01\x02binary")
    proc = _cli(*common, "--train_file", binary, "--output_dir", tmp_path / "o")
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: {binary}:1: binary data (NUL byte), not a text file"
    )
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    good = tmp_path / "good.tsv"
    good.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    proc = _cli(*common, "--train_file", good, "--output_dir", a_file)
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: --output_dir {a_file} is a file, not a folder"
    )
    proc = _cli("--model_name_or_path", "x", "--task_name", "rte", "--output_dir", tmp_path)
    assert proc.returncode == 2 and "exactly one of --data_dir" in proc.stderr
