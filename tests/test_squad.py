"""SQuAD recipe: windows and max-context marks, answer offsets, official metrics, tau, outputs."""

import json

import numpy as np
import pytest
from ports import free_port

from recipes.squad import metrics as sm
from recipes.squad.data import SquadFormatError, iter_rows, load_squad_file, split_file_spec
from recipes.squad.features import doc_spans, is_max_context, max_context_marks, prepare_features
from recipes.squad.postprocess import postprocess


def SquadExample(qas_id, question, context, answers, is_impossible=False):  # noqa: N802
    """A question row as recipes.squad.data writes it."""
    return {
        "id": qas_id,
        "question": question,
        "context": context,
        "answers": {
            "text": [a["text"] for a in answers],
            "answer_start": [a["answer_start"] for a in answers],
        },
        "is_impossible": is_impossible,
    }


def convert_examples_to_features(rows, tokenizer, max_seq, stride, max_q, is_training):
    """prepare_features over one batch, as a list of window dicts (numpy offsets/marks)."""
    batch = {k: [r[k] for r in rows] for k in rows[0]}
    out = prepare_features(batch, tokenizer, max_seq, stride, max_q, is_training)
    feats = [dict(zip(out, values)) for values in zip(*out.values())]
    for f in feats:
        if "offset_mapping" in f:
            f["offsets"] = np.asarray(f["offset_mapping"]).reshape(-1, 2)
            f["max_context"] = np.asarray(f["max_context"], dtype=bool)
    return feats


def read_examples(data, is_training, v2):
    return list(iter_rows(data, is_training, v2))


# -- windows and the max-context rule -----------------------------------------------------------


def test_doc_spans_follow_googles_loop():
    # starts doc_stride apart; the last window ends at the last token
    assert doc_spans(12, 5, 3) == [(0, 5), (3, 5), (6, 5), (9, 3)]
    assert doc_spans(5, 5, 3) == [(0, 5)]
    assert doc_spans(6, 5, 3) == [(0, 5), (3, 3)]
    # doc_stride larger than a window: windows do not overlap (step = window length)
    assert doc_spans(10, 4, 6) == [(0, 4), (4, 4), (8, 2)]
    assert doc_spans(0, 5, 3) == []


def test_max_context_on_googles_docstring_example():
    # "the man went to the store and bought a gallon of milk"
    # A: the man went to the / B: to the store and bought / C: and bought a gallon of
    spans = [(0, 5), (3, 5), (6, 5)]
    bought = 7  # B: left 4, right 0 -> 0.05; C: left 1, right 3 -> 1.05
    assert [is_max_context(spans, k, bought) for k in range(3)] == [False, False, True]
    to = 3  # A: left 3, right 1 -> 1.05; B: left 0 -> 0.05
    assert [is_max_context(spans, k, to) for k in range(3)] == [True, False, False]


def test_max_context_ties_and_length_term():
    # equal scores: the first window wins (strict >)
    spans = [(0, 5), (2, 5)]
    assert is_max_context(spans, 0, 3) and not is_max_context(spans, 1, 3)
    # equal min(left, right): the longer window wins through 0.01 * length
    spans = [(0, 5), (0, 6)]
    assert is_max_context(spans, 1, 2) and not is_max_context(spans, 0, 2)
    # every token has exactly one max-context window
    spans = doc_spans(50, 12, 5)
    marks = max_context_marks(spans)
    owner = np.zeros(50, dtype=int)
    for (start, length), m in zip(spans, marks):
        owner[start : start + length] += m
    assert (owner == 1).all()


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minilm_path)
    assert len(tok) == 30522
    return tok


def _doc_token_ids(feature):
    off = feature["offsets"]
    return [t for t, o in zip(feature["input_ids"], off) if o[0] >= 0]


def test_tokenizer_windows_equal_googles_windows(tokenizer):
    context = " ".join(f"word{i} is-{i % 7}" for i in range(60))
    question = "what is the value of the word number seventeen here?"
    ex = SquadExample("q1", question, context, [], False)
    max_seq, stride, max_q = 40, 9, 20
    feats = convert_examples_to_features([ex], tokenizer, max_seq, stride, max_q, False)
    full = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True)
    q_len = len(tokenizer(question, add_special_tokens=False)["input_ids"])
    spans = doc_spans(len(full["input_ids"]), max_seq - q_len - 3, stride)
    assert len(feats) == len(spans) > 3
    owners = np.zeros(len(full["input_ids"]), dtype=int)
    for k, ((start, length), f) in enumerate(zip(spans, feats)):
        assert f["doc_span_index"] == k and len(f["input_ids"]) <= max_seq
        assert _doc_token_ids(f) == full["input_ids"][start : start + length]
        doc = f["offsets"][:, 0] >= 0
        assert (
            f["offsets"][doc].tolist()
            == [list(o) for o in full["offset_mapping"]][start : start + length]
        )
        assert f["token_type_ids"][q_len + 2] == 1 and f["token_type_ids"][q_len + 1] == 0
        expected = [is_max_context(spans, k, start + i) for i in range(length)]
        assert f["max_context"][doc].tolist() == expected
        assert not f["max_context"][~doc].any()
        owners[start : start + length] += f["max_context"][doc]
    assert (owners == 1).all()


def test_question_truncated_to_max_query_length(tokenizer):
    question = " ".join(["unbelievably"] * 30)  # 'unbelievably' is several word pieces
    ex = SquadExample("q", question, "short context here.", [], False)
    (feat,) = convert_examples_to_features([ex], tokenizer, 64, 16, 10, False)
    assert feat["token_type_ids"].count(0) == 10 + 2  # [CLS] + 10 question tokens + [SEP]
    assert tokenizer.convert_ids_to_tokens(feat["input_ids"][:12])[-1] == "[SEP]"


def _train_feature_answers(tokenizer, context, answer, start, max_seq=64, stride=16, **kw):
    ex = SquadExample("q", "where?", context, [{"text": answer, "answer_start": start}], **kw)
    feats = convert_examples_to_features([ex], tokenizer, max_seq, stride, 20, True)
    texts = [
        tokenizer.decode(f["input_ids"][f["start_positions"] : f["end_positions"] + 1])
        if f["start_positions"]
        else None
        for f in feats
    ]
    return feats, texts


def test_answer_offsets_at_passage_edges(tokenizer):
    context = "Saint Bernadette Soubirous saw her in Lourdes"
    feats, texts = _train_feature_answers(tokenizer, context, "Saint", 0)
    assert texts == ["saint"]
    assert feats[0]["start_positions"] == feats[0]["token_type_ids"].index(1)  # first doc token
    feats, texts = _train_feature_answers(tokenizer, context, "Lourdes", context.index("Lourdes"))
    assert texts == ["lourdes"]
    assert feats[0]["end_positions"] == len(feats[0]["input_ids"]) - 2  # last before [SEP]
    # punctuation around the answer is left out; a sub-word answer takes the whole token
    context = "John Smith (1895-1943). The Japanese industry."
    _, texts = _train_feature_answers(tokenizer, context, "1895", context.index("1895"))
    assert texts == ["1895"]
    _, texts = _train_feature_answers(tokenizer, context, "Japan", context.index("Japan"))
    assert texts == ["japanese"]


def test_answer_across_windows_and_impossible(tokenizer):
    words = [f"w{i}" for i in range(80)]
    context = " ".join(words)
    start = context.index("w60 w61")
    feats, texts = _train_feature_answers(tokenizer, context, "w60 w61", start)
    assert len(feats) > 3
    with_answer = [t for t in texts if t]
    assert with_answer and all(t == "w60 w61" for t in with_answer)
    # windows that do not hold the whole answer target [CLS]
    assert texts[0] is None and feats[0]["start_positions"] == feats[0]["end_positions"] == 0
    ex = SquadExample("q", "where?", context, [], is_impossible=True)
    feats = convert_examples_to_features([ex], tokenizer, 64, 16, 20, True)
    assert all(f["start_positions"] == f["end_positions"] == 0 for f in feats)


# -- the official metrics -----------------------------------------------------------------------


def test_normalize_answer_official_rules():
    assert sm.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert sm.normalize_answer("an apple a day") == "apple day"
    assert sm.normalize_answer("A.B.C") == "abc"
    assert sm.normalize_answer("theater") == "theater"  # \b: not an article
    assert sm.normalize_answer("the") == ""
    # punctuation goes before articles: "the-end" -> "theend", kept
    assert sm.normalize_answer("the-end") == "theend"


def test_exact_and_f1_hand_computed():
    assert sm.compute_exact("The Cat", "cat") == 1
    # gold: cat sat on mat (4), pred: cat on mat (3): P=1, R=3/4 -> F1 = 6/7
    assert sm.compute_f1("The cat sat on the mat", "cat on a mat") == pytest.approx(6 / 7)
    assert sm.compute_f1("cat cat dog", "cat") == pytest.approx(2 * 1 * (1 / 3) / (1 + 1 / 3))
    # empty answers: v2.0 gives 1 when both are empty, v1.1 gives 0
    assert sm.compute_f1("", "") == 1.0 and sm.compute_f1("", "x") == 0.0
    assert sm.f1_score_v1("", "") == 0.0
    assert sm.compute_f1("the", "") == 1.0  # 'the' normalises to nothing


def _dataset(qas):
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


def test_evaluate_v1_max_over_golds_and_missing_counts_zero():
    data = _dataset(
        [
            {
                "id": "a",
                "question": "?",
                "answers": [{"text": "Denver Broncos"}, {"text": "Denver"}],
            },
            {"id": "b", "question": "?", "answers": [{"text": "the cat sat"}]},
            {"id": "c", "question": "?", "answers": [{"text": "x"}]},
        ]
    )
    out = sm.evaluate_v1(data, {"a": "Denver", "b": "cat"})
    # a: EM 1, F1 1; b: EM 0, F1 2*(1)(1/2)/(1.5) = 2/3; c missing: 0 and counted
    assert out == pytest.approx({"exact_match": 100 / 3, "f1": 100 * (1 + 2 / 3) / 3})


def test_evaluate_v2_breakdown_threshold_and_best_thresh():
    data = _dataset(
        [
            {"id": "a", "question": "?", "answers": [{"text": "Paris"}]},
            {"id": "b", "question": "?", "answers": []},
            {"id": "c", "question": "?", "answers": [{"text": "big red dog"}, {"text": "a"}]},
            {"id": "d", "question": "?", "answers": []},
        ]
    )
    preds = {"a": "Paris", "b": "London", "c": "red dog", "d": "x"}
    out = sm.evaluate_v2(data, preds)
    f1_c = 2 * 1 * (2 / 3) / (1 + 2 / 3)  # gold 'a' normalises to '' and is dropped
    assert out["total"] == 4 and out["HasAns_total"] == 2 and out["NoAns_total"] == 2
    assert out["exact"] == pytest.approx(25.0)
    assert out["f1"] == pytest.approx(100 * (1 + f1_c) / 4)
    assert out["NoAns_f1"] == 0.0 and out["HasAns_exact"] == 50.0
    assert list(out) == [
        "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
        "NoAns_exact", "NoAns_f1", "NoAns_total",
    ]  # fmt: skip
    odds = {"a": -2.0, "b": -1.0, "c": 0.5, "d": 3.0}
    # walk in increasing odds from "all ''" (2 NoAns right): a +1 -> 3 (best, thresh -2),
    # b -1 -> 2, c +f1_c -> 2.8, d -1 -> 1.8
    best_f1, thresh = sm.find_best_thresh(preds, sm.get_raw_scores(data, preds)[1], odds,
                                          sm.make_qid_to_has_ans(data))  # fmt: skip
    assert (best_f1, thresh) == (pytest.approx(75.0), -2.0)
    out = sm.evaluate_v2(data, preds, odds, na_prob_thresh=-2.0)
    assert out["f1"] == pytest.approx(75.0) and out["exact"] == pytest.approx(75.0)
    assert out["best_f1"] == pytest.approx(75.0) and out["best_f1_thresh"] == -2.0
    # ties keep the earlier threshold: c fully right ties the best score 3 and does not move it
    preds["c"] = "big red dog"
    out = sm.evaluate_v2(data, preds, odds, na_prob_thresh=1.0)
    assert out["best_f1_thresh"] == -2.0 and out["best_f1"] == pytest.approx(75.0)
    assert out["f1"] == pytest.approx(75.0)  # d (odds 3 > 1) scored as '' -> right; b wrong
    with pytest.raises(ValueError, match="missing"):
        sm.evaluate_v2(data, {"a": "Paris"})


def test_tuned_tau_reproduces_best_f1_even_when_answering_nothing_is_best():
    from recipes.squad.postprocess import SquadPredictions, evaluate_predictions, tune_tau

    data = _dataset(
        [
            {"id": "a", "question": "?", "answers": [{"text": "Paris"}]},
            {"id": "b", "question": "?", "answers": []},
            {"id": "c", "question": "?", "answers": []},
        ]
    )
    # every non-null answer is wrong: answering nothing (2/3) is best; the official search
    # never improves on it and reports its initial threshold 0.0, which would answer a and b
    odds = {"a": -1.0, "b": -2.0, "c": 1.0}
    non_null = {"a": "Rome", "b": "x", "c": "y"}
    preds = SquadPredictions({}, {}, odds, non_null, 0.0)
    results = evaluate_predictions(data, preds, True)
    assert results["eval"]["best_f1_thresh"] == 0.0
    assert results["eval"]["best_f1"] == pytest.approx(200 / 3)
    assert results["eval"]["f1"] == pytest.approx(100 / 3)  # tau 0 answers a and b
    assert results["tuned_tau"] == -3.0  # below every null odds
    assert results["tuned"]["f1"] == pytest.approx(200 / 3)
    # a real optimum is kept as the official script reports it
    official = {"best_f1_thresh": -1.5, "best_f1": 80.0, "NoAns_total": 2, "total": 3}
    assert tune_tau(official, odds) == -1.5


# -- post-processing ----------------------------------------------------------------------------


def _feature(example_id, offsets, max_ctx):
    return {"example_id": example_id, "offset_mapping": offsets, "max_context": max_ctx}


def test_postprocess_windows_null_score_and_tau():
    context = "alpha beta gamma delta"
    ex = SquadExample("q", "?", context, [], False)
    no = [-1, -1]
    # two windows over the 4 words; position 0 = [CLS], 1 = question, 2.. = passage
    f0 = _feature("q", [no, no, [0, 5], [6, 10], [11, 16]], [0, 0, 1, 1, 0])  # gamma not max here
    f1 = _feature("q", [no, no, [11, 16], [17, 22]], [0, 0, 1, 1])
    s0 = np.array([1.0, 9.0, 2.0, 0.0, 8.0])  # question token and non-max-context gamma ignored
    e0 = np.array([1.0, 9.0, 0.0, 3.0, -5.0])  # ends need not be max-context (as Google)
    s1 = np.array([3.0, 0.0, 4.0, 1.0])
    e1 = np.array([0.5, 0.0, 0.0, 2.0])
    pred = postprocess([ex], [f0, f1], [s0, s1], [e0, e1], n_best_size=20, max_answer_length=30)
    # candidates: 'gamma delta' 4+2=6, 'alpha beta' 2+3=5, 'gamma' 4+0, 'beta' 0+3, 'delta' 1+2,
    # 'alpha' 2+0, 'alpha beta gamma' 2-5 (spans from both windows compete)
    assert pred.predictions["q"] == "gamma delta"
    assert [n["text"] for n in pred.nbest["q"]][:2] == ["gamma delta", "alpha beta"]
    assert sum(n["probability"] for n in pred.nbest["q"]) == pytest.approx(1.0)
    assert not pred.null_odds
    v2 = dict(version_2_with_negative=True, n_best_size=20, max_answer_length=30)
    pred = postprocess([ex], [f0, f1], [s0, s1], [e0, e1], **v2)
    # null score = min over windows of [CLS] start+end: min(2.0, 3.5) = 2.0; best span 6
    assert pred.null_odds["q"] == pytest.approx(2.0 - 6.0)
    assert pred.predictions["q"] == "gamma delta" and pred.non_null["q"] == "gamma delta"
    (null,) = [n for n in pred.nbest["q"] if n["text"] == ""]
    assert (null["start_logit"], null["end_logit"]) == (1.0, 1.0)  # the min-null window's
    pred = postprocess([ex], [f0, f1], [s0, s1], [e0, e1], null_score_diff_threshold=-4.5, **v2)
    assert pred.predictions["q"] == ""  # -4 > -4.5
    # a length limit of 1 token removes both two-word spans
    pred = postprocess([ex], [f0, f1], [s0, s1], [e0, e1], n_best_size=20, max_answer_length=1)
    assert pred.predictions["q"] == "gamma"
    assert pred.spans["q"] == (11, 16)


# -- files, real data, end to end ---------------------------------------------------------------


def test_file_spec_and_format_errors(tmp_path):
    assert split_file_spec("a/dev.json[0:17]") == ("a/dev.json", slice(0, 17))
    assert split_file_spec("dev.json[17:]") == ("dev.json", slice(17, None))
    assert split_file_spec("dev.json") == ("dev.json", slice(None))
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.1",\n "data": [\n  {"paragraphs": [}]}')
    with pytest.raises(SquadFormatError, match=r"bad.json: line 3"):
        load_squad_file(str(bad))
    bad.write_text(json.dumps({"data": [{"paragraphs": [{"context": "c", "qas": [{"id": "x"}]}]}]}))
    with pytest.raises(
        SquadFormatError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\]: missing 'question'"
    ):
        load_squad_file(str(bad))
    with pytest.raises(FileNotFoundError):
        load_squad_file(str(tmp_path / "none.json"))


@pytest.mark.slow
def test_real_squad_files_load_and_gold_scores_100(shared_data):
    data, version = load_squad_file(str(shared_data / "squad/dev-v1.1.json"))
    examples = read_examples(data, False, False)
    assert version == "1.1" and len(data) == 48 and len(examples) == 10570
    gold = {e["id"]: e["answers"]["text"][-1] for e in examples}
    # a faithful quirk of the v1.1 script: one gold answer normalises to nothing, so the same
    # text scores EM 1 but F1 0 (no common token)
    assert sm.evaluate_v1(data, gold) == {"exact_match": 100.0, "f1": 100.0 * 10569 / 10570}
    data, version = load_squad_file(str(shared_data / "squad/dev-v2.0.json[17:35]"))
    examples = read_examples(data, False, True)
    assert len(data) == 18 and len(examples) == 6425
    gold = {e["id"]: e["answers"]["text"][0] if e["answers"]["text"] else "" for e in examples}
    out = sm.evaluate_v2(data, gold, {q: 0.0 for q in gold}, 1.0)
    assert out["exact"] == 100.0 and out["NoAns_total"] + out["HasAns_total"] == 6425


@pytest.mark.slow
def test_real_train_answers_map_to_their_text(shared_data, tokenizer):
    data, _ = load_squad_file(str(shared_data / "squad/train-v1.1.json[0:1]"))
    examples = read_examples(data, True, False)
    feats = convert_examples_to_features(examples, tokenizer, 192, 64, 64, True)
    found = {}
    ids = [
        f["example_id"]
        for f in convert_examples_to_features(examples, tokenizer, 192, 64, 64, False)
    ]
    assert len(ids) == len(feats)  # training and prediction windows are the same windows
    by_id = {e["id"]: e for e in examples}
    for f, qid in zip(feats, ids):
        if f["start_positions"]:
            text = tokenizer.decode(f["input_ids"][f["start_positions"] : f["end_positions"] + 1])
            found[qid] = sm.normalize_answer(text).replace(" ", "") == (
                sm.normalize_answer(by_id[qid]["answers"]["text"][0]).replace(" ", "")
            )
    assert len(found) == len(examples)  # every question has a window with its answer
    assert sum(found.values()) / len(found) > 0.95  # the rest: accents and sub-word answers


def _synthetic_squad(n_articles=4, impossible_every=3):
    data = []
    for a in range(n_articles):
        paragraphs = []
        for p in range(3):
            filler = " ".join(f"filler{(a * 7 + p * 3 + i) % 23}" for i in range(40))
            code = f"zebra{a}{p}"
            context = f"{filler} the secret code is {code} and more text follows here."
            start = context.index(code)
            qas = [
                {"id": f"{a}-{p}-0", "question": "what is the secret code?",
                 "answers": [{"text": code, "answer_start": start}], "is_impossible": False},
                {"id": f"{a}-{p}-1", "question": "what is the colour of the moon?",
                 "answers": [], "is_impossible": True},
            ]  # fmt: skip
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": f"t{a}", "paragraphs": paragraphs})
    return {"version": "v2.0", "data": data}


def _tiny_qa_model(path, tokenizer):
    from modeling import BertConfig, BertForQuestionAnswering

    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
    )  # fmt: skip
    BertForQuestionAnswering(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _squad_flags(model_dir, data_file, out, *extra):
    return [
        "--model_name_or_path", str(model_dir), "--train_file", str(data_file),
        "--validation_file", f"{data_file}[2:4]", "--version_2_with_negative",
        "--max_seq_length", "48", "--doc_stride", "16", "--max_query_length", "16",
        "--num_train_epochs", "8", "--per_device_train_batch_size", "8", "--learning_rate", "3e-3",
        "--output_dir", str(out), "--disable_tqdm", "true", "--logging_steps", "5",
        "--do_train", "--do_eval", "--save_strategy", "no", *extra,
    ]  # fmt: skip


@pytest.mark.slow
def test_end_to_end_tiny_model_v2_writes_official_files_and_tau(tmp_path, tokenizer):
    from recipes.squad.pipeline import QuestionAnsweringPipeline
    from scripts.run_squad import main

    model_dir = _tiny_qa_model(tmp_path / "tiny", tokenizer)
    data_file = tmp_path / "squad2.json"
    data_file.write_text(json.dumps(_synthetic_squad()))
    out = tmp_path / "out"
    flags = _squad_flags(model_dir, data_file, out)
    metrics = main([*flags, "--do_predict", "--test_file", f"{data_file}[2:4]"])
    for name in ("predictions.json", "nbest_predictions.json", "null_odds.json",
                 "predictions_tuned_tau.json", "eval_results.json", "train_results.json",
                 "all_results.json", "trainer_state.json", "README.md", "config.json",
                 "model.safetensors", "tokenizer.json"):  # fmt: skip
        assert (out / name).is_file(), name
    results = json.loads((out / "eval_results.json").read_text())
    official = {
        "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
        "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
    }  # fmt: skip
    assert {f"eval_{k}" for k in official} | {"eval_tuned_tau", "eval_samples"} <= set(results)
    assert results["eval_total"] == results["eval_samples"] == 12
    preds = json.loads((out / "predictions.json").read_text())
    odds = json.loads((out / "null_odds.json").read_text())
    assert set(preds) == set(odds) and len(preds) == 12
    assert all((preds[q] == "") == (odds[q] > 0.0) for q in preds)  # tau = 0 in force
    # the metrics are the official v2.0 script's on the written files
    data, _ = load_squad_file(f"{data_file}[2:4]")
    assert sm.evaluate_v2(data, preds, odds, 1.0)["best_f1"] == pytest.approx(
        results["eval_best_f1"]
    )
    assert results["eval_tuned_f1"] == pytest.approx(results["eval_best_f1"])
    saved = json.loads((out / "config.json").read_text())
    assert saved["null_score_diff_threshold"] == results["eval_tuned_tau"]
    assert saved["version_2_with_negative"] is True
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    losses = [h["loss"] for h in history if "loss" in h]
    assert losses[-1] < losses[0]  # it learns something
    assert metrics["eval_f1"] == pytest.approx(results["eval_f1"])
    # --do_predict runs after the tuned tau is in the config: it answers as at the tuned tau
    predicted = json.loads((out / "predict_predictions.json").read_text())
    assert predicted == json.loads((out / "predictions_tuned_tau.json").read_text())
    assert json.loads((out / "predict_results.json").read_text())["predict_samples"] == 12
    # the pipeline: any context length, tau from the saved config
    qa = QuestionAnsweringPipeline.from_pretrained(out)
    assert qa.args.version_2_with_negative and qa.args.null_score_diff_threshold is None
    assert (qa.args.max_seq_length, qa.args.doc_stride) == (48, 16)  # saved with the model
    context = " ".join(["filler1 filler2"] * 40) + " the secret code is zebra77 and more."
    answer = qa("what is the secret code?", context)
    assert answer["tau"] == saved["null_score_diff_threshold"]
    assert (answer["answer"] == "") == (answer["null_odds"] > answer["tau"])
    if answer["answer"]:
        assert context[answer["start"] : answer["end"]] == answer["answer"]
    forced = QuestionAnsweringPipeline.from_pretrained(out, null_score_diff_threshold=-1e9)(
        "what is the secret code?", context
    )
    assert forced["answer"] == ""


def test_squad_eval_script_prints_official_json(tmp_path, capsys):
    from scripts.squad_eval import main

    data = {"version": "v2.0", "data": _dataset(
        [{"id": "a", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]},
         {"id": "b", "question": "?", "answers": []}]
    )}  # fmt: skip
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "p.json").write_text(json.dumps({"a": "paris!", "b": "x"}))
    (tmp_path / "n.json").write_text(json.dumps({"a": 0.5, "b": 2.0}))
    main([str(tmp_path / "d.json"), str(tmp_path / "p.json"), "-n", str(tmp_path / "n.json")])
    printed = json.loads(capsys.readouterr().out)
    # default threshold 1.0: b (2.0 > 1) is scored as '' -> right; a right
    assert printed["exact"] == 100.0 and printed["best_f1"] == 100.0
    assert printed["best_f1_thresh"] == 0.5  # answering a (odds 0.5) and not b is best
    data["version"] = "1.1"
    data["data"][0]["paragraphs"][0]["qas"].pop()
    (tmp_path / "d.json").write_text(json.dumps(data))
    main([str(tmp_path / "d.json"), str(tmp_path / "p.json")])
    assert json.loads(capsys.readouterr().out) == {"exact_match": 100.0, "f1": 100.0}


# -- processes, bad inputs, cache ---------------------------------------------------------------

AUDIT = """
import os, sys
_out, _log = os.environ.get("WRITE_AUDIT_DIR"), os.environ.get("WRITE_AUDIT_LOG")
if _out and _log:
    _fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    _rank = os.environ.get("RANK", "0")
    def _hook(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
        elif event in ("os.rename", "os.replace"):
            path, writing = args[1], True
        else:
            return
        if writing and isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(_out):
            os.write(_fd, f"{_rank}\\t{os.fspath(path)}\\n".encode())
    sys.addaudithook(_hook)
"""


@pytest.mark.slow
def test_two_cpu_processes_count_every_dev_question_once(tmp_path, tokenizer):
    """accelerate launch, 2 gloo processes: each dev question counted once, the metrics of a
    single-process evaluation of the saved model, one writer per file, lr 0 at the end."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from scripts.run_squad import main

    repo = Path(__file__).resolve().parents[1]
    model_dir = _tiny_qa_model(tmp_path / "tiny", tokenizer)
    data_file = tmp_path / "squad2.json"
    data_file.write_text(json.dumps(_synthetic_squad(n_articles=5)))
    out = tmp_path / "out"
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "sitecustomize.py").write_text(AUDIT)
    log = tmp_path / "writes.log"
    env = {
        **os.environ,
        "ACCELERATE_USE_CPU": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "audit"), str(repo)]),
        "WRITE_AUDIT_DIR": str(out),
        "WRITE_AUDIT_LOG": str(log),
        "HF_DATASETS_CACHE": str(tmp_path / "cache"),
    }
    flags = _squad_flags(model_dir, data_file, out, "--per_device_eval_batch_size", "5")
    flags += ["--logging_steps", "1", "--null_score_diff_threshold", "0", "--seed", "3"]
    launcher = Path(sys.executable).with_name("accelerate")
    proc = subprocess.run(
        [str(launcher), "launch", "--config_file", "accelerate_configs/cpu.yaml",
         "--main_process_port", str(free_port()), "scripts/run_squad.py", *flags],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "all_results.json").read_text())
    state = json.loads((out / "trainer_state.json").read_text())
    assert results["train_final_learning_rate"] == 0.0
    # two processes really ran (one would take twice the steps), the schedule counted them
    steps_per_epoch = -(-results["train_samples"] // (8 * 2))
    assert results["train_samples"] > 16
    assert state["global_step"] == 8 * steps_per_epoch
    # Trainer logs the rate each step used: the linear decay is one decrement above 0 at the
    # last step, so the schedule reaches 0 right after the last optimiser step
    rates = [h["learning_rate"] for h in state["log_history"] if "learning_rate" in h]
    assert len(rates) == state["global_step"]
    assert rates[-1] > 0 and rates[-1] == pytest.approx(rates[-2] - rates[-1], rel=1e-6)
    # every dev question counted once, windows too (accelerate pads the last batch with copies)
    assert results["eval_samples"] == results["eval_total"] == 12
    preds = json.loads((out / "predictions.json").read_text())
    assert len(preds) == 12
    # one writer per file
    writers: dict[str, set] = {}
    for line in log.read_text().splitlines():
        rank, path = line.split("\t")
        writers.setdefault(path, set()).add(rank)
    assert str(out / "predictions.json") in writers
    assert {p: r for p, r in writers.items() if len(r) > 1} == {}
    assert writers[str(out / "predictions.json")] == {"0"}
    assert writers[str(out / "config.json")] == {"0"}  # (safetensors writes from Rust: unseen)
    # the saved model loads and a single process scores it the same
    single = main(
        ["--model_name_or_path", str(out), "--validation_file", f"{data_file}[2:4]",
         "--version_2_with_negative", "--max_seq_length", "48", "--doc_stride", "16",
         "--max_query_length", "16", "--do_eval", "--null_score_diff_threshold", "0",
         "--output_dir", str(tmp_path / "single"), "--per_device_eval_batch_size", "7",
         "--disable_tqdm", "true"]
    )  # fmt: skip
    assert single["eval_windows"] == results["eval_windows"]
    for key, value in results.items():
        if key.startswith("eval_") and not key.endswith(("runtime", "per_second")):
            assert single[key] == pytest.approx(value, abs=1e-4), key
    assert json.loads((tmp_path / "single" / "predictions.json").read_text()) == preds


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "content,message",
    [
        (
            b'{"version": "1.1",\n "data": [\n"caf\xe9"]}',
            r"bad\.json:3: not UTF-8 text \(byte 0xe9",
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"bad\.json:3: binary data \(NUL byte\)"),
        (b'{"data": [\n 1\n]}', r"bad\.json: data\[0\]: expected an object"),
    ],
)
def test_bad_squad_file_is_one_line_before_training(tmp_path, content, message):
    from modeling.cli import UsageError
    from scripts.run_squad import main

    bad = _write(tmp_path / "bad.json", content)
    with pytest.raises(UsageError, match=message) as err:
        main(["--model_name_or_path", "unused", "--train_file", str(bad), "--do_train",
              "--output_dir", str(tmp_path / "out")])  # fmt: skip
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing started


@pytest.mark.slow
def test_output_dir_that_is_a_file_is_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    data_file = tmp_path / "squad.json"
    data_file.write_text(json.dumps(_synthetic_squad(n_articles=1)))
    target = _write(tmp_path / "taken", b"a file")
    script = Path(__file__).resolve().parents[1] / "scripts" / "run_squad.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--model_name_or_path", "unused", "--do_train",
         "--train_file", str(data_file), "--version_2_with_negative", "--output_dir", str(target)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --output_dir {target} is a file, not a folder"
    ]


def test_second_launch_reads_the_windows_from_the_cache(tmp_path, tokenizer, monkeypatch):
    import os

    from recipes import runner
    from recipes.squad.recipe import SquadRecipe

    data_file = tmp_path / "squad.json"
    data_file.write_text(json.dumps(_synthetic_squad(n_articles=2)))
    flags = [
        "--model_name_or_path", "unused", "--train_file", str(data_file), "--do_train",
        "--version_2_with_negative", "--max_seq_length", "48", "--doc_stride", "16",
        "--max_query_length", "16", "--cache_dir", str(tmp_path / "cache"),
        "--output_dir", str(tmp_path / "out"),
    ]  # fmt: skip

    def launch(*extra):
        task = SquadRecipe()
        args = runner.parse_args(task, [*flags, *extra])
        task.check(args)
        data = runner.load_data(task, args, tokenizer, runner.read_raw(task, args))
        return data.get("train")["squad"][1]

    first = launch()
    files = {f["filename"]: os.stat(f["filename"]).st_mtime_ns for f in first.cache_files}
    assert files and all(name.startswith(str(tmp_path / "cache")) for name in files)
    assert first.features["input_ids"].feature.dtype == "int32"  # compact Arrow types

    def no_tokenising(*args, **kwargs):
        raise AssertionError("re-tokenised")

    monkeypatch.setattr(SquadRecipe, "featurise", no_tokenising)
    again = launch()
    assert {f["filename"]: os.stat(f["filename"]).st_mtime_ns for f in again.cache_files} == files
    assert again["input_ids"][:] == first["input_ids"][:]
    # other settings, or an edited file, are featurised anew
    with pytest.raises(AssertionError, match="re-tokenised"):
        launch("--doc_stride", "8")
    data_file.write_text(json.dumps(_synthetic_squad(n_articles=3)))
    with pytest.raises(AssertionError, match="re-tokenised"):
        launch()
