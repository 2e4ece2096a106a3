"""CoNLL NER: tag schemes, readers, word/piece alignment, windows, conlleval metric, end to end."""

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from modeling.cli import UsageError
from recipes.ner.data import Sentence, label_list, read_conll, read_ner_file, to_iob2
from recipes.ner.features import build_features, decode_predictions, write_conll_predictions
from recipes.ner.metrics import conlleval

# --------------------------------------------------------------------------------------------
# Tag schemes
# --------------------------------------------------------------------------------------------


def test_iob1_to_iob2():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "I-MISC", "I-MISC"]
    expected = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG", "B-MISC", "I-MISC"]
    assert to_iob2(iob1, "iob1") == expected
    assert to_iob2(expected, "iob1") == expected  # IOB2 input is left as it is
    assert to_iob2(expected, "iob2") == expected
    assert to_iob2(["O", "I-PER", "B-PER"], "iob2") == ["O", "B-PER", "B-PER"]


def test_iobes_and_bilou_to_iob2():
    assert to_iob2(["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"], "iobes") == [
        "B-PER",
        "O",
        "B-LOC",
        "I-LOC",
        "I-LOC",
        "B-LOC",
    ]
    assert to_iob2(["U-ORG", "B-PER", "L-PER"], "bilou") == ["B-ORG", "B-PER", "I-PER"]


@pytest.mark.parametrize("tag,scheme", [("X-PER", "iob1"), ("S-PER", "iob1"), ("B", "iobes")])
def test_invalid_tags_raise(tag, scheme):
    with pytest.raises(ValueError, match=repr(tag)):
        to_iob2(["O", tag], scheme)


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------

CONLL = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- O O

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O
"""


def test_read_conll_documents_and_iob2(tmp_path):
    path = tmp_path / "eng.x"
    path.write_text(CONLL)  # no blank line after the last sentence, none after a DOCSTART
    sentences = read_conll(path)
    assert [s.words for s in sentences] == [
        ["EU", "rejects", "German", "call"],
        ["Peter", "Blackburn"],
        ["BRUSSELS", "1996-08-22"],
    ]
    assert [s.tags for s in sentences] == [
        ["B-ORG", "O", "B-MISC", "O"],
        ["B-PER", "I-PER"],
        ["B-LOC", "O"],
    ]
    assert [s.document for s in sentences] == [0, 0, 1]
    assert read_ner_file(path)[2].tags == ["B-LOC", "O"]


@pytest.mark.parametrize(
    "bad,message",
    [
        ("EU NNP I-NP I-ORG\nrejects\n", r"eng\.x:2: expected 'token \.\.\. tag'"),
        ("EU NNP I-NP I-ORG\nrejects VBZ O\n", r"eng\.x:2: 3 columns"),
        ("EU NNP I-NP I-ORG\n\nrejects VBZ I-VP Q-PER\n", r"eng\.x:3: tag 'Q-PER'"),
    ],
)
def test_read_conll_errors_name_file_and_line(tmp_path, bad, message):
    path = tmp_path / "eng.x"
    path.write_text(bad)
    with pytest.raises(UsageError, match=message):
        read_conll(path)


def test_run_ner_bad_file_is_a_one_line_error(tmp_path):
    import subprocess
    from pathlib import Path

    bad = tmp_path / "eng.bad"
    bad.write_text("EU NNP I-NP I-ORG\nrejects\n")
    script = Path(__file__).resolve().parents[1] / "scripts" / "run_ner.py"
    args = ["--model_name_or_path", "unused", "--train_file", str(bad), "--do_train"]
    args += ["--output_dir", str(tmp_path / "out")]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {bad}:2: expected 'token ... tag' columns, got 'rejects'"
    ]


def test_read_json_fixture(shared_data):
    sentences = read_ner_file(shared_data / "fixtures" / "conll" / "sample.json")
    assert len(sentences) == 10
    assert sentences[1].words == ["CHICAGO", "AT", "ATLANTA"]
    assert sentences[1].tags == ["B-ORG", "O", "B-LOC"]
    assert len({s.document for s in sentences}) == 10


@pytest.mark.parametrize(
    "name,sentences,documents,entities",
    [
        # published CoNLL-2003 statistics (Tjong Kim Sang & De Meulder 2003, table 2)
        ("eng.train", 14041, 946, {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}),
        ("eng.testa", 3250, 216, {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}),
        ("eng.testb", 3453, 231, {"LOC": 1668, "MISC": 702, "ORG": 1661, "PER": 1617}),
    ],
)
def test_real_conll_counts(shared_data, name, sentences, documents, entities):
    data = read_conll(shared_data / "conll2003" / name)
    assert len(data) == sentences
    assert len({s.document for s in data}) == documents
    found = {}
    for s in data:
        for tag in s.tags:
            if tag.startswith("B-"):
                found[tag[2:]] = found.get(tag[2:], 0) + 1
    assert found == entities  # IOB1 -> IOB2 keeps every entity and its boundaries


# --------------------------------------------------------------------------------------------
# Metric: conlleval
# --------------------------------------------------------------------------------------------


def test_conlleval_type_and_boundary_errors():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "I-ORG", "O"]]
    r = conlleval(gold, pred)
    # correct: the PER only; LOC predicted as ORG (type), ORG cut short (boundary)
    assert (r["correct"], r["found_guessed"], r["found_gold"]) == (1, 3, 3)
    assert r["precision"] == pytest.approx(100 / 3)
    assert r["f1"] == pytest.approx(100 / 3)
    assert r["accuracy"] == pytest.approx(100 * 5 / 7)
    assert r["per_type"]["PER"]["f1"] == 100
    assert r["per_type"]["LOC"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "found_gold": 1,
        "found_guessed": 0,
        "correct": 0,
    }
    assert r["per_type"]["ORG"]["precision"] == 0 and r["per_type"]["ORG"]["found_guessed"] == 2


def test_conlleval_split_entity_and_sentence_boundary():
    # two B- of the same type are two entities; an entity never runs over a sentence end
    gold = [["B-PER", "I-PER"], ["I-PER", "O"]]
    pred = [["B-PER", "B-PER"], ["B-PER", "O"]]
    r = conlleval(gold, pred)
    assert (r["correct"], r["found_guessed"], r["found_gold"]) == (1, 3, 2)  # only sent. 2
    assert r["recall"] == 50 and r["precision"] == pytest.approx(100 / 3)
    assert r["f1"] == pytest.approx(40.0)


def test_conlleval_ill_formed_i_opens_a_chunk():
    # conlleval reads "O I-X" as the start of a chunk, so B-X vs I-X after O is correct
    r = conlleval([["O", "B-LOC", "I-LOC"]], [["O", "I-LOC", "I-LOC"]])
    assert r["f1"] == 100 and r["accuracy"] == pytest.approx(200 / 3)
    r = conlleval([["B-LOC", "I-LOC"]], [["B-LOC", "I-PER"]])
    assert (r["correct"], r["found_guessed"]) == (0, 2)
    assert conlleval([["O"]], [["O"]])["f1"] == 0.0  # no entities: 0, as the script prints


@pytest.mark.slow
def test_conlleval_matches_seqeval_on_random_sequences():
    from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

    rng = random.Random(0)
    tags = ["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "B-MISC"]
    for _ in range(100):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 10))] for _ in range(4)]
        pred = [[rng.choice(tags) for _ in sentence] for sentence in gold]
        ours = conlleval(gold, pred)
        assert ours["f1"] == pytest.approx(100 * f1_score(gold, pred), abs=1e-9)
        assert ours["precision"] == pytest.approx(100 * precision_score(gold, pred), abs=1e-9)
        assert ours["recall"] == pytest.approx(100 * recall_score(gold, pred), abs=1e-9)
        report = classification_report(gold, pred, output_dict=True, zero_division=0)
        for kind, row in ours["per_type"].items():
            if kind in report:
                assert row["f1"] == pytest.approx(100 * report[kind]["f1-score"], abs=1e-9)
                assert row["found_gold"] == report[kind]["support"]


# --------------------------------------------------------------------------------------------
# Word/piece alignment and windows
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minilm_path)
    assert len(tok) == 30522
    return tok


LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
L2I = {t: i for i, t in enumerate(LABELS)}


def test_first_piece_alignment(tokenizer):
    sentence = Sentence(["Frechette", "beat", "Somerset", "."], ["B-PER", "O", "B-ORG", "O"])
    (feature,) = build_features([sentence], tokenizer, L2I, 32)
    pieces = tokenizer.convert_ids_to_tokens(feature["input_ids"])
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    n_first = len(tokenizer.tokenize("Frechette"))
    assert n_first > 1
    assert feature["positions"] == [1, 1 + n_first, 2 + n_first, len(pieces) - 2]
    expected = [-100] * len(pieces)
    for pos, tag in zip(feature["positions"], sentence.tags):
        expected[pos] = L2I[tag]
    assert feature["labels"] == expected
    assert pieces[feature["positions"][2]] == tokenizer.tokenize("Somerset")[0]
    (every,) = build_features([sentence], tokenizer, L2I, 32, label_all_pieces=True)
    assert every["labels"][1 : 1 + n_first] == [L2I["B-PER"]] + [L2I["I-PER"]] * (n_first - 1)
    assert every["positions"] == feature["positions"]


def test_word_without_pieces_gets_unk(tokenizer):
    (feature,) = build_features([Sentence(["a", "\x00", "b"], ["O", "O", "O"])], tokenizer, L2I)
    assert feature["input_ids"][2] == tokenizer.unk_token_id
    assert feature["positions"] == [1, 2, 3]


def _oracle_logits(features):
    """Logits whose argmax at every labelled position is the gold label."""
    out = []
    for f in features:
        values = np.zeros((len(f["input_ids"]), len(LABELS)), dtype=np.float32)
        for pos, label in enumerate(f["labels"]):
            if label != -100:
                values[pos, label] = 1.0
        out.append(values)
    return out


@pytest.mark.parametrize("context", [False, True])
@pytest.mark.parametrize("max_len", [128, 24])
def test_every_dev_word_gets_one_prediction(shared_data, tokenizer, context, max_len):
    dev = read_conll(shared_data / "conll2003" / "eng.testa")
    lengths = [
        2 + sum(len(tokenizer.tokenize(w)) for w in s.words)
        for s in dev
        if len(s.words) > 40  # the long ones; the longest is 146 pieces
    ]
    assert max(lengths) == 146
    features = build_features(dev, tokenizer, L2I, max_len, document_context=context)
    assert max(len(f["input_ids"]) for f in features) <= max_len
    if context:  # windows are filled with neighbouring sentences up to the limit
        assert (
            np.mean([len(f["input_ids"]) == max_len for f in features]) > 0.85
        )  # not short documents
    predicted = decode_predictions(features, _oracle_logits(features), dev, dict(enumerate(LABELS)))
    assert predicted == [s.tags for s in dev]  # each word exactly once, mapped back in order
    assert conlleval([s.tags for s in dev], predicted)["f1"] == 100
    longest = max(range(len(dev)), key=lambda i: len(dev[i].words))
    windows = [f for f in features if f["sentence_index"] == longest]
    assert len(windows) >= (2 if max_len == 128 else 6)


def test_document_context_scores_only_own_words(tokenizer):
    doc = [
        Sentence(["Peter", "Blackburn"], ["B-PER", "I-PER"], 0),
        Sentence(["BRUSSELS", "1996-08-22"], ["B-LOC", "O"], 0),
        Sentence(["The", "EU", "said"], ["O", "B-ORG", "O"], 0),
        Sentence(["Other", "doc"], ["O", "O"], 1),
    ]
    features = build_features(doc, tokenizer, L2I, 64, document_context=True)
    assert [f["sentence_index"] for f in features] == [0, 1, 2, 3]
    middle = features[1]
    text = tokenizer.decode(middle["input_ids"])
    assert "peter blackburn" in text and "the eu said" in text and "other" not in text
    assert sum(label != -100 for label in middle["labels"]) == 2
    assert [middle["labels"][p] for p in middle["positions"]] == [L2I["B-LOC"], L2I["O"]]
    plain = build_features(doc, tokenizer, L2I, 64)
    assert tokenizer.decode(plain[1]["input_ids"]) == "[CLS] brussels 1996 - 08 - 22 [SEP]"


def test_decode_rejects_missing_words(tokenizer):
    sentence = Sentence(["a", "b"], ["O", "O"])
    (feature,) = build_features([sentence], tokenizer, L2I)
    feature = {**feature, "word_ids": [0], "positions": feature["positions"][:1]}
    with pytest.raises(ValueError, match=r"words \[1\] got no prediction"):
        decode_predictions(
            [feature], _oracle_logits([feature]), [sentence], dict(enumerate(LABELS))
        )


def test_label_list_and_prediction_file(tmp_path):
    sentences = [Sentence(["EU", "rejects"], ["B-ORG", "O"]), Sentence(["Peter"], ["B-PER"])]
    assert label_list(sentences) == ["O", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    write_conll_predictions(tmp_path / "p.txt", sentences, [["B-ORG", "O"], ["O"]])
    assert (tmp_path / "p.txt").read_text() == "EU B-ORG B-ORG\nrejects O O\n\nPeter B-PER O\n\n"


def load_script(name):
    """Import scripts/<name>.py (scripts/ is not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------------
# End to end on a tiny model
# --------------------------------------------------------------------------------------------


def tiny_checkpoint(path, tokenizer, layers: int = 2):
    """A randomly initialised 32-wide BERT with the real vocabulary, saved with its tokenizer."""
    import torch

    from modeling import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def run_script(name: str, **flags) -> None:
    """``scripts/<name>.py`` main() with ``--flag value`` per keyword."""
    argv = []
    for key, value in flags.items():
        argv.append(f"--{key}")
        argv.extend(str(v) for v in (value if isinstance(value, list) else [value]))
    load_script(name).main(argv)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, tokenizer):
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-bert"), tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("context", [False, True])
def test_run_ner_end_to_end_on_fixture(shared_data, tiny_model, tmp_path, context):
    fixture = str(shared_data / "fixtures" / "conll" / "sample.json")
    out = tmp_path / "out"
    run_script(
        "run_ner",
        model_name_or_path=tiny_model,
        train_file=fixture,
        validation_file=fixture,
        test_file=fixture,
        do_train=True,
        do_eval=True,
        do_predict=True,
        max_seq_length=16,  # forces long-sentence windows
        document_context=context,
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        output_dir=out,
        save_strategy="no",
        disable_tqdm=True,
    )
    results = json.loads((out / "all_results.json").read_text())
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert results["eval_windows"] > results["eval_samples"] == 10
    assert {"eval_precision", "eval_recall", "eval_f1", "eval_accuracy"} <= set(results)
    assert 0 <= results["predict_f1"] <= 100
    dev = json.loads((out / "eval_results.json").read_text())
    assert dev["eval_f1"] == results["eval_f1"] and "predict_f1" not in dev
    test = json.loads((out / "predict_results.json").read_text())
    assert test["predict_f1"] == results["predict_f1"]
    gold = read_ner_file(fixture)
    lines = (out / "test_predictions.txt").read_text().split("\n")
    assert sum(1 for line in lines if line) == sum(len(s.words) for s in gold)
    first = [line.split(" ") for line in lines[: len(gold[0].words)]]
    assert [row[0] for row in first] == gold[0].words
    assert [row[1] for row in first] == gold[0].tags
    labels = json.loads((out / "config.json").read_text())["id2label"].values()
    assert all(row[2] in labels for row in first)
    # the metrics are conlleval's on the written file
    rows = [
        line.split(" ")
        for line in (out / "dev_predictions.txt").read_text().split("\n\n")[0].splitlines()
    ]
    assert [r[1] for r in rows] == gold[0].tags
    sents = (out / "dev_predictions.txt").read_text().strip("\n").split("\n\n")
    table = [[line.split(" ") for line in sent.splitlines()] for sent in sents]
    scored = conlleval([[r[1] for r in t] for t in table], [[r[2] for r in t] for t in table])
    assert scored["f1"] == pytest.approx(dev["eval_f1"])
    for name in ("model.safetensors", "tokenizer.json", "README.md", "train_results.json"):
        assert (out / name).is_file(), name


@pytest.mark.parametrize(
    "content,message",
    [
        (
            b"EU NNP I-NP I-ORG\n\nK\xf6ln NNP I-NP I-LOC\n",
            r"eng\.bad:3: not UTF-8 text \(byte 0xf6",
        ),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", r"eng\.bad:1: binary data \(NUL byte\)"),
        (b"EU NNP I-NP I-ORG\n\n\n\x00junk\n", r"eng\.bad:4: binary data"),
    ],
)
def test_binary_or_non_utf8_conll_is_a_file_line_error(tmp_path, content, message):
    from recipes.ner.recipe import NerRecipe
    from recipes.runner import run

    bad = tmp_path / "eng.bad"
    bad.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        read_ner_file(bad)
    argv = ["--model_name_or_path", "unused", "--train_file", str(bad), "--do_train"]
    argv += ["--output_dir", str(tmp_path / "out")]
    with pytest.raises(UsageError, match=message):
        run(NerRecipe(), argv)
    assert not (tmp_path / "out").exists()  # refused before anything started
    json_bad = tmp_path / "bad.json"
    json_bad.write_bytes(b'{"words": ["K\xf6ln"], "ner": ["B-LOC"]}\n')
    with pytest.raises(UsageError, match=r"bad\.json:1: not UTF-8 text"):
        read_ner_file(json_bad)


def test_output_dir_that_is_a_file_fails_before_training(shared_data, tmp_path):
    from recipes.ner.recipe import NerRecipe
    from recipes.runner import run

    taken = tmp_path / "taken"
    taken.write_text("a file")
    fixture = str(shared_data / "fixtures" / "conll" / "sample.json")
    argv = ["--model_name_or_path", "unused", "--train_file", fixture, "--do_train"]
    with pytest.raises(UsageError, match=f"--output_dir {taken} is a file, not a folder"):
        run(NerRecipe(), [*argv, "--output_dir", str(taken)])
    with pytest.raises(UsageError, match=f"{taken} is a file, not a folder"):
        run(NerRecipe(), [*argv, "--output_dir", f"{taken}/x"])


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_dev_metrics(shared_data, tiny_model, tmp_path):
    """--save_strategy steps: a run that stopped after checkpoint-4 and resumes (`true` = the
    newest checkpoint) ends with the uninterrupted run's weights and dev metrics."""
    import shutil

    from safetensors.numpy import load_file

    fixture = str(shared_data / "fixtures" / "conll" / "sample.json")
    flags = dict(
        model_name_or_path=tiny_model, train_file=fixture, validation_file=fixture,
        do_train=True, do_eval=True, max_seq_length=16, num_train_epochs=4,
        per_device_train_batch_size=4, learning_rate=1e-3, save_strategy="steps", save_steps=4,
        save_total_limit=10,
        logging_steps=1, disable_tqdm=True, seed=5,
    )  # fmt: skip
    run_script("run_ner", **flags, output_dir=tmp_path / "full")
    full = json.loads((tmp_path / "full" / "eval_results.json").read_text())
    steps = json.loads((tmp_path / "full" / "trainer_state.json").read_text())["global_step"]
    assert steps > 6
    # what a run killed after step 5 leaves: checkpoint-4 and nothing else
    killed = tmp_path / "killed"
    killed.mkdir()
    shutil.copytree(tmp_path / "full" / "checkpoint-4", killed / "checkpoint-4")
    saved_state = killed / "checkpoint-4" / "trainer_state.json"
    state = json.loads(saved_state.read_text())
    state["log_history"][0]["marker"] = "from checkpoint-4"  # to see that it was read
    saved_state.write_text(json.dumps(state))
    run_script("run_ner", **flags, output_dir=killed, resume_from_checkpoint="true")
    resumed = json.loads((killed / "eval_results.json").read_text())
    for key in ("eval_f1", "eval_precision", "eval_recall", "eval_accuracy", "eval_loss"):
        assert resumed[key] == pytest.approx(full[key], abs=1e-6), key
    a = load_file(str(tmp_path / "full" / "model.safetensors"))
    b = load_file(str(killed / "model.safetensors"))
    assert all(np.allclose(a[k], b[k], atol=1e-6) for k in a)
    history = json.loads((killed / "trainer_state.json").read_text())["log_history"]
    assert history[0].get("marker") == "from checkpoint-4"  # it went on from there
    assert [h["step"] for h in history if "loss" in h] == list(range(1, steps + 1))
    with pytest.raises(UsageError, match="no checkpoint"):
        run_script("run_ner", **flags, output_dir=tmp_path / "none", resume_from_checkpoint="true")


@pytest.mark.slow
def test_seeds_grid_chooses_on_dev_f1_and_promotes_the_chosen_run(
    shared_data, tiny_model, tmp_path
):
    fixture = str(shared_data / "fixtures" / "conll" / "sample.json")
    out = tmp_path / "grid"
    run_script(
        "run_ner", model_name_or_path=tiny_model, train_file=fixture, validation_file=fixture,
        do_train=True, do_eval=True, max_seq_length=16, max_steps=2,
        per_device_train_batch_size=4, learning_rate_grid=[1e-3, 1e-2], seeds=[1, 2],
        save_strategy="no", disable_tqdm=True, output_dir=out,
    )  # fmt: skip
    summary = json.loads((out / "grid_results.json").read_text())
    assert len(summary["runs"]) == 4 and summary["metric"] == "eval_f1"
    chosen = summary["chosen_run"]
    best = max(summary["settings"], key=lambda s: s["eval_f1_median"])
    assert chosen["learning_rate"] == best["learning_rate"]
    assert chosen["eval_f1"] == best["eval_f1_best"]
    # the grid folder holds the chosen run: its model, metrics and conlleval file
    assert json.loads((out / "eval_results.json").read_text())["eval_f1"] == chosen["eval_f1"]
    cell = Path(chosen["output_dir"])
    assert (out / "dev_predictions.txt").read_text() == (cell / "dev_predictions.txt").read_text()
