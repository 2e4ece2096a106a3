"""Every fine-tuned ``output_dir`` loads in stock transformers, without this package.

The real recipes (GLUE through the grid path, NER, SQuAD) train a tiny BERT for two steps; the
folders they leave are then read in a subprocess where ``modeling`` and ``recipes`` cannot be
imported (tests/stock_env.py): stock ``AutoConfig``, ``AutoTokenizer``, ``AutoModel`` and the
task's Auto class give our ids and our outputs (fp32, eval, max abs difference <= 1e-5), and
the text- and token-classification pipelines give our labels and scores.
"""

import inspect
import json

import pytest
import torch
from stock_env import model_type_warnings, run_stock
from test_runner import glue_argv, make_tiny_model, run_glue, write_rte
from transformers import AutoTokenizer

from modeling import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from modeling.tokenizer_folder import RUNTIME_KWARGS

PAIRS = {
    "glue": [("the cat sat here", "yes cat"), ("a dog and a tree in the sun", "no dog tree")],
    "ner": [("Peter Blackburn visited the European Union in Brussels", None), ("EU rejects", None)],
    "squad": [("what is the secret code?", "filler1 the secret code is zebra00 and more text")],
}
TASK_CLASS = {
    "glue": ("AutoModelForSequenceClassification", BertForSequenceClassification),
    "ner": ("AutoModelForTokenClassification", BertForTokenClassification),
    "squad": ("AutoModelForQuestionAnswering", BertForQuestionAnswering),
}
CLS_TEXTS = ["the cat sat here", "a dog and a tree in the sun", "no"]
NER_TEXT = "Peter Blackburn visited the European Union in Brussels"


def encode(tokenizer, pairs):
    firsts = [a for a, _ in pairs]
    seconds = [b for _, b in pairs] if pairs[0][1] is not None else None
    return dict(tokenizer(firsts, seconds, padding=True, return_tensors="pt"))


def outputs_of(model, batch):
    """Tensor outputs (task logits, or the encoder's last hidden state), at real tokens only
    where per token (our unpadded encoder leaves zeros at padding)."""
    with torch.no_grad():
        out = model(**batch)
    real = batch["attention_mask"].bool()
    got = {k: v for k, v in out.items() if torch.is_tensor(v) and k != "pooler_output"}
    return {k: v[real] if tuple(v.shape[:2]) == tuple(real.shape) else v for k, v in got.items()}


STOCK_CODE = f"""
import torch, transformers
from transformers import AutoConfig, AutoModel, AutoTokenizer, pipeline
{inspect.getsource(encode)}
{inspect.getsource(outputs_of)}
result = {{}}
for kind, folder in FOLDERS.items():
    rec = result[kind] = {{"diff": {{}}}}
    config = AutoConfig.from_pretrained(folder)
    rec["config"] = [type(config).__module__, config.model_type]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    rec["tokenizer"] = type(tokenizer).__name__
    batch = encode(tokenizer, PAIRS[kind])
    expected = torch.load(folder + "/expected.pt")
    rec["same_ids"] = all(torch.equal(batch[k], expected["batch"][k]) for k in batch)
    for name in ("AutoModel", TASK[kind]):
        model = getattr(transformers, name).from_pretrained(folder).eval()
        rec[name] = type(model).__module__ + "." + type(model).__name__
        for key, got in outputs_of(model, expected["batch"]).items():
            if key in expected[name]:
                rec["diff"][f"{{name}}.{{key}}"] = float((got - expected[name][key]).abs().max())
result["text-classification"] = pipeline("text-classification", model=FOLDERS["glue"])(
    CLS_TEXTS, top_k=None)
result["token-classification"] = pipeline(
    "token-classification", model=FOLDERS["ner"], ignore_labels=[])(NER_TEXT)
"""


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    return AutoTokenizer.from_pretrained(minilm_path)


def train_glue(root, minilm_path):
    """RTE through the grid path (one seed = a one-cell grid, promoted to output_dir), with
    Trainer checkpoints in the cell."""
    tiny = make_tiny_model(root / "tiny", minilm_path)
    out = root / "glue"
    extra = ["--max_steps", 2, "--save_strategy", "steps", "--save_steps", 1, "--seeds", 42]
    run_glue(glue_argv(tiny, write_rte(root / "RTE"), out, *extra))
    return out


def train_ner(root, tokenizer, shared_data):
    from test_ner import run_script, tiny_checkpoint

    fixture = shared_data / "fixtures" / "conll" / "sample.json"
    out = root / "ner"
    run_script(
        "run_ner",
        model_name_or_path=tiny_checkpoint(root / "tiny-ner", tokenizer),
        train_file=fixture,
        validation_file=fixture,
        do_train=True,
        max_seq_length=32,
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        output_dir=out,
        save_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    return out


def train_squad(root, tokenizer):
    from test_squad import _squad_flags, _synthetic_squad, _tiny_qa_model

    from scripts.run_squad import main

    data_file = root / "squad2.json"
    data_file.write_text(json.dumps(_synthetic_squad()))
    out = root / "squad"
    flags = _squad_flags(_tiny_qa_model(root / "tiny-qa", tokenizer), data_file, out)
    main([*flags, "--max_steps", "2", "--report_to", "none"])
    return out


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tokenizer, minilm_path, shared_data):
    root = tmp_path_factory.mktemp("finetuned")
    paths = {
        "glue": train_glue(root, minilm_path),
        "ner": train_ner(root, tokenizer, shared_data),
        "squad": train_squad(root, tokenizer),
    }
    for kind, folder in paths.items():  # our classes' outputs, for the stock side to match
        batch = encode(tokenizer, PAIRS[kind])
        _, task_class = TASK_CLASS[kind]
        expected = {"batch": batch}
        expected["AutoModel"] = outputs_of(BertModel.from_pretrained(folder).eval(), batch)
        expected[TASK_CLASS[kind][0]] = outputs_of(task_class.from_pretrained(folder).eval(), batch)
        torch.save(expected, folder / "expected.pt")
    return paths


@pytest.fixture(scope="module")
def stock_run(folders):
    return run_stock(
        STOCK_CODE,
        FOLDERS={k: str(v) for k, v in folders.items()},
        TASK={k: auto for k, (auto, _) in TASK_CLASS.items()},
        PAIRS=PAIRS,
        CLS_TEXTS=CLS_TEXTS,
        NER_TEXT=NER_TEXT,
    )


def test_tokenizer_folders_are_complete_and_free_of_loading_options(folders):
    configs = []
    for folder in folders.values():
        for name in ("vocab.txt", "special_tokens_map.json", "tokenizer.json"):
            assert (folder / name).is_file(), folder / name
        configs += list(folder.rglob("tokenizer_config.json"))
    checkpoints = [c for c in configs if c.parent.name.startswith("checkpoint-")]
    assert len(checkpoints) == 2  # the GLUE cell's checkpoint-1 and checkpoint-2
    for path in configs:
        config = json.loads(path.read_text())
        assert not set(config) & set(RUNTIME_KWARGS), (path, set(config) & set(RUNTIME_KWARGS))
        assert config["tokenizer_class"] == "BertTokenizer", path
    vocab = (folders["glue"] / "vocab.txt").read_text().splitlines()
    assert len(vocab) == 30522 and vocab[101:103] == ["[CLS]", "[SEP]"]


@pytest.mark.parametrize("kind", list(TASK_CLASS))
def test_stock_auto_classes_give_our_outputs(stock_run, kind):
    rec = stock_run["result"][kind]
    assert rec["config"] == ["transformers.models.bert.configuration_bert", "bert"]
    assert rec["tokenizer"] == "BertTokenizer" and rec["same_ids"]
    auto_name, ours = TASK_CLASS[kind]
    assert rec[auto_name] == f"transformers.models.bert.modeling_bert.{ours.__name__}"
    assert rec["AutoModel"] == "transformers.models.bert.modeling_bert.BertModel"
    expected_keys = {"AutoModel.last_hidden_state"} | {
        f"{auto_name}.{k}"
        for k in {"glue": ["logits"], "ner": ["logits"], "squad": ["start_logits", "end_logits"]}[
            kind
        ]
    }
    assert set(rec["diff"]) == expected_keys
    for key, diff in rec["diff"].items():
        assert diff <= 1e-5, (kind, key, diff)


def test_no_model_type_warnings(stock_run):
    assert not model_type_warnings(stock_run["warnings"]), stock_run["warnings"]


def test_text_classification_pipeline_on_the_glue_folder(stock_run, folders, tokenizer):
    ours = BertForSequenceClassification.from_pretrained(folders["glue"]).eval()
    labels = ours.config.id2label
    assert sorted(labels.values()) == ["entailment", "not_entailment"]
    for text, scores in zip(CLS_TEXTS, stock_run["result"]["text-classification"]):
        with torch.no_grad():
            probs = ours(**tokenizer(text, return_tensors="pt")).logits[0].softmax(-1)
        assert scores[0]["label"] == labels[int(probs.argmax())]
        for s in scores:
            index = {v: k for k, v in labels.items()}[s["label"]]
            assert abs(s["score"] - probs[index].item()) <= 1e-5


def test_token_classification_pipeline_on_the_ner_folder(stock_run, folders, tokenizer):
    ours = BertForTokenClassification.from_pretrained(folders["ner"]).eval()
    enc = tokenizer(NER_TEXT, return_tensors="pt")
    with torch.no_grad():
        probs = ours(**enc).logits[0].softmax(-1)
    special = set(tokenizer.all_special_ids)
    expected = [
        (i, ours.config.id2label[int(p.argmax())], float(p.max()))
        for i, (tid, p) in enumerate(zip(enc["input_ids"][0].tolist(), probs))
        if tid not in special
    ]
    got = stock_run["result"]["token-classification"]
    assert len(expected) >= len(NER_TEXT.split())  # every piece, tags O included
    assert [(r["index"], r["entity"]) for r in got] == [(i, e) for i, e, _ in expected]
    for r, (_, _, p) in zip(got, expected):
        assert abs(r["score"] - p) <= 1e-5
    assert {"B-PER", "I-ORG", "O"} <= set(ours.config.id2label.values())


def test_our_loader_reads_the_folders_back_without_loading_options(folders, tokenizer):
    from recipes.runner import ModelArguments, load_tokenizer

    for kind, folder in folders.items():
        ours = load_tokenizer(ModelArguments(model_name_or_path=str(folder)))
        assert not set(ours.init_kwargs) & set(RUNTIME_KWARGS), kind
        got, want = encode(ours, PAIRS[kind]), encode(tokenizer, PAIRS[kind])
        assert all(torch.equal(got[k], want[k]) for k in want), kind
    assert (folders["glue"] / "grid_results.json").is_file()  # it went through the grid
