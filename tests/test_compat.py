"""Our checkpoints in stock `transformers`, run where this package cannot be imported
(tests/stock_env.py):

* every kind of folder the project writes (pretraining, and fine-tuned sequence
  classification, question answering, token classification, multiple choice, each saved
  the way a recipe saves it: ``model.save_pretrained(d); tokenizer.save_pretrained(d)``)
  loads with AutoConfig, AutoTokenizer, AutoModel, AutoModelForPreTraining,
  AutoModelForMaskedLM and the task's Auto class, without a model-type warning, and gives our
  classes' outputs (max abs difference <= 1e-5, fp32, eval); the pipelines give our
  predictions;
* a folder with remote code loads our classes with ``trust_remote_code=True`` and stock BERT
  without it;
* our classes load stock Hub folders (bert-base-uncased layout, safetensors and the legacy
  ``pytorch_model.bin``) and take ``revision``, ``cache_dir``, ``token``, ``local_files_only``;
* a process that imported this package still gets stock behaviour from stock names, and
  folders written with the former model type ``bert_toolkit`` still load.
"""

import inspect
import json
import shutil

import pytest
import torch
import transformers
from stock_env import model_type_warnings, run_stock
from transformers import AutoTokenizer

from modeling import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    hub,
)

TINY = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=128,
)
PAIRS = [
    ("The cat sat on the mat.", "It was warm there."),
    ("Paris is the capital of France.", "Berlin is in Germany."),
    ("A short one.", "And a much longer second segment that needs padding in the batch."),
    ("Stock tools should load this.", "Without our package installed."),
]
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
GLUE_LABELS = ["entailment", "neutral", "contradiction"]
FILL_TEXT = "paris is the [MASK] of france."
CLS_TEXTS = ["a gripping and moving film", "dull, overlong and pointless"]
NER_TEXT = "Angela Merkel visited Paris and Berlin last week."
QA = {"question": "Where is the Eiffel tower?", "context": "The Eiffel tower is in Paris."}

# What each kind of folder is, and the Auto classes whose heads it holds (outputs compared).
KINDS = {
    "pretrain": (BertForPreTraining, ["AutoModelForPreTraining", "AutoModelForMaskedLM"]),
    "glue": (BertForSequenceClassification, ["AutoModelForSequenceClassification"]),
    "squad": (BertForQuestionAnswering, ["AutoModelForQuestionAnswering"]),
    "ner": (BertForTokenClassification, ["AutoModelForTokenClassification"]),
    "swag": (BertForMultipleChoice, ["AutoModelForMultipleChoice"]),
}
ALWAYS = ["AutoModel", "AutoModelForPreTraining", "AutoModelForMaskedLM"]
OURS = {
    "AutoModel": BertModel,
    "AutoModelForPreTraining": BertForPreTraining,
    "AutoModelForMaskedLM": BertForMaskedLM,
    "AutoModelForSequenceClassification": BertForSequenceClassification,
    "AutoModelForQuestionAnswering": BertForQuestionAnswering,
    "AutoModelForTokenClassification": BertForTokenClassification,
    "AutoModelForMultipleChoice": BertForMultipleChoice,
}


def model_inputs(auto_name, batch):
    """Keyword inputs for a model of that Auto class (multiple choice: 2 questions x 2)."""
    kw = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    if auto_name == "AutoModelForMultipleChoice":
        kw = {k: v.view(2, 2, -1) for k, v in kw.items()}
    return kw


def outputs_of(model, auto_name, batch):
    """Tensor outputs plus the last hidden state; per-token ones at real positions only (our
    unpadded encoder leaves zeros at padding)."""
    kw = model_inputs(auto_name, batch)
    with torch.no_grad():
        out = model(**kw)  # the path users run (pooled heads compute [CLS] only)
        hidden = model(**kw, output_hidden_states=True).hidden_states[-1]
    tensors = {"hidden": hidden, **{k: v for k, v in out.items() if torch.is_tensor(v)}}
    real = batch["attention_mask"].bool()
    return {
        k: v[real] if tuple(v.shape[:2]) == tuple(real.shape) else v for k, v in tensors.items()
    }


# Code run in the stock subprocess: the same functions, then every folder x Auto class.
STOCK_CODE = f"""
import torch, transformers
from transformers import AutoConfig, AutoTokenizer, pipeline
{inspect.getsource(model_inputs)}
{inspect.getsource(outputs_of)}
batch = torch.load(INPUTS)
result = {{}}
for kind, folder in FOLDERS.items():
    rec = result[kind] = {{"classes": {{}}, "loading": {{}}, "diff": {{}}}}
    config = AutoConfig.from_pretrained(folder)
    rec["config"] = [type(config).__module__, config.model_type]
    rec["extra"] = {{k: getattr(config, k, None) for k in
                    ("unpad_inputs", "sparse_prediction_head", "null_score_diff_threshold")}}
    tokenizer = AutoTokenizer.from_pretrained(folder)
    enc = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True,
                    return_tensors="pt")
    rec["same_ids"] = torch.equal(enc["input_ids"], batch["input_ids"])
    expected = torch.load(folder + "/expected.pt")
    for auto_name in AUTOS[kind]:
        model, info = getattr(transformers, auto_name).from_pretrained(
            folder, output_loading_info=True)
        model.eval()
        rec["classes"][auto_name] = type(model).__module__ + "." + type(model).__name__
        rec["loading"][auto_name] = {{k: sorted(info[k]) for k in
                                     ("missing_keys", "unexpected_keys", "mismatched_keys")}}
        got = outputs_of(model, auto_name, batch)
        for key, want in expected[auto_name].items():
            rec["diff"][f"{{auto_name}}.{{key}}"] = float((got[key] - want).abs().max())
preds = result["pipelines"] = {{}}
preds["fill-mask"] = pipeline("fill-mask", model=FOLDERS["pretrain"])(FILL_TEXT, top_k=3)
preds["text-classification"] = pipeline("text-classification", model=FOLDERS["glue"])(
    CLS_TEXTS, top_k=None)
preds["token-classification"] = pipeline("token-classification", model=FOLDERS["ner"])(NER_TEXT)
try:
    preds["question-answering"] = pipeline("question-answering", model=FOLDERS["squad"])(**QA)
except Exception as err:  # transformers 5 removed this pipeline
    preds["question-answering"] = {{"error": str(err)}}
"""


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def batch(tokenizer):
    return dict(
        tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    )


def build_folder(kind, root, tokenizer, batch, seed=0):
    """A folder saved the way the project saves it, with our classes' expected outputs."""
    torch.manual_seed(seed)
    extra = {}
    if kind == "glue":
        extra = dict(
            num_labels=3,
            id2label=dict(enumerate(GLUE_LABELS)),
            label2id={k: i for i, k in enumerate(GLUE_LABELS)},
        )
    elif kind == "ner":
        extra = dict(
            num_labels=len(NER_LABELS),
            id2label=dict(enumerate(NER_LABELS)),
            label2id={k: i for i, k in enumerate(NER_LABELS)},
        )
    config = BertConfig(vocab_size=len(tokenizer), **TINY, **extra)
    if kind == "squad":
        config.null_score_diff_threshold = -1.25  # what the SQuAD recipe saves
    cls, heads = KINDS[kind]
    model = cls(config).eval()
    # non-zero biases and LayerNorm parameters, so that a dropped or misnamed one shows
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                param.add_(torch.randn_like(param) * 0.1)
    folder = root / kind
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    expected = {}
    for auto_name in ALWAYS + heads:
        ours = OURS[auto_name].from_pretrained(folder).eval()
        got = outputs_of(ours, auto_name, batch)
        if auto_name in heads or (kind == "pretrain" and auto_name == "AutoModel"):
            expected[auto_name] = got  # this folder holds every weight of that class
        elif auto_name == "AutoModel" and kind in ("glue", "swag"):
            expected[auto_name] = got  # pooler included
        else:
            expected[auto_name] = {"hidden": got["hidden"]}  # encoder only; heads are new
    torch.save(expected, folder / "expected.pt")
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tokenizer, batch):
    root = tmp_path_factory.mktemp("saved")
    torch.save(batch, root / "inputs.pt")
    return root, {kind: build_folder(kind, root, tokenizer, batch) for kind in KINDS}


@pytest.fixture(scope="module")
def stock_run(folders):
    root, paths = folders
    return run_stock(
        STOCK_CODE,
        FOLDERS={k: str(v) for k, v in paths.items()},
        AUTOS={k: ALWAYS + heads for k, (_, heads) in KINDS.items()},
        INPUTS=str(root / "inputs.pt"),
        PAIRS=PAIRS,
        FILL_TEXT=FILL_TEXT,
        CLS_TEXTS=CLS_TEXTS,
        NER_TEXT=NER_TEXT,
        QA=QA,
    )


def test_saved_config_is_stock_bert(folders):
    _, paths = folders
    for kind, folder in paths.items():
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == "bert", kind
        assert config["architectures"] == [KINDS[kind][0].__name__]
        assert hasattr(transformers, config["architectures"][0])  # a stock class name
        assert "auto_map" not in config
        assert {"unpad_inputs", "sparse_prediction_head", "check_inputs"} <= set(config)


@pytest.mark.parametrize("kind", list(KINDS))
def test_stock_auto_classes_load_every_folder_with_our_outputs(stock_run, kind):
    rec = stock_run["result"][kind]
    assert rec["config"] == ["transformers.models.bert.configuration_bert", "bert"]
    assert rec["same_ids"]  # AutoTokenizer reads the saved tokenizer as ours does
    _, heads = KINDS[kind]
    assert set(rec["classes"]) == set(ALWAYS + heads)
    for cls_name in rec["classes"].values():
        assert cls_name.startswith("transformers.models.bert.modeling_bert."), cls_name
    # the folder's own class loads every weight, nothing left over
    assert rec["loading"][heads[0]] == {
        "missing_keys": [],
        "unexpected_keys": [],
        "mismatched_keys": [],
    }
    for auto_name in heads[1:]:  # MaskedLM from a pretraining folder: all its weights there
        assert not rec["loading"][auto_name]["missing_keys"], auto_name
    assert rec["loading"]["AutoModel"]["missing_keys"] == (
        [] if kind in ("pretrain", "glue", "swag") else ["pooler.dense.bias", "pooler.dense.weight"]
    )
    n_compared = len(rec["diff"])
    assert n_compared >= len(ALWAYS) + len(heads)
    for key, diff in rec["diff"].items():
        assert diff <= 1e-5, (kind, key, diff)


def test_no_model_type_warnings_in_stock(stock_run):
    assert not model_type_warnings(stock_run["warnings"]), stock_run["warnings"]


def test_our_speed_fields_ride_along_as_extra_attributes(stock_run):
    extra = stock_run["result"]["squad"]["extra"]
    assert extra == {
        "unpad_inputs": False,
        "sparse_prediction_head": True,
        "null_score_diff_threshold": -1.25,
    }


def test_fill_mask_pipeline_gives_our_top_tokens(stock_run, folders, tokenizer):
    _, paths = folders
    ours = BertForMaskedLM.from_pretrained(paths["pretrain"]).eval()
    enc = tokenizer(FILL_TEXT, return_tensors="pt")
    position = int((enc["input_ids"][0] == tokenizer.mask_token_id).nonzero())
    with torch.no_grad():
        probs = ours(**enc).logits[0, position].softmax(-1)
    top = probs.topk(3)
    got = stock_run["result"]["pipelines"]["fill-mask"]
    assert [r["token"] for r in got] == top.indices.tolist()
    for r, p in zip(got, top.values.tolist()):
        assert abs(r["score"] - p) <= 1e-5


def test_text_classification_pipeline_gives_our_label_scores(stock_run, folders, tokenizer):
    _, paths = folders
    ours = BertForSequenceClassification.from_pretrained(paths["glue"]).eval()
    got = stock_run["result"]["pipelines"]["text-classification"]
    for text, scores in zip(CLS_TEXTS, got):
        with torch.no_grad():
            probs = ours(**tokenizer(text, return_tensors="pt")).logits[0].softmax(-1)
        assert sorted(s["label"] for s in scores) == sorted(GLUE_LABELS)
        for s in scores:
            assert abs(s["score"] - probs[GLUE_LABELS.index(s["label"])].item()) <= 1e-5


def test_token_classification_pipeline_gives_our_tags(stock_run, folders, tokenizer):
    _, paths = folders
    ours = BertForTokenClassification.from_pretrained(paths["ner"]).eval()
    enc = tokenizer(NER_TEXT, return_tensors="pt")
    with torch.no_grad():
        probs = ours(**enc).logits[0].softmax(-1)
    special = set(tokenizer.all_special_ids)
    expected = [
        (i, NER_LABELS[int(p.argmax())], float(p.max()))
        for i, (tid, p) in enumerate(zip(enc["input_ids"][0].tolist(), probs))
        if tid not in special and NER_LABELS[int(p.argmax())] != "O"
    ]
    got = stock_run["result"]["pipelines"]["token-classification"]
    assert expected, "the random head predicts only O: the test would prove nothing"
    assert [(r["index"], r["entity"]) for r in got] == [(i, e) for i, e, _ in expected]
    for r, (_, _, p) in zip(got, expected):
        assert abs(r["score"] - p) <= 1e-5


def test_question_answering_pipeline_state_is_known(stock_run):
    """transformers 5 removed the question-answering pipeline (the README and the model card
    say so); should it come back, it must run on our folder."""
    got = stock_run["result"]["pipelines"]["question-answering"]
    if "error" in got:
        assert "question-answering" in got["error"] and "removed" in got["error"].lower()
    else:
        assert got["answer"] in QA["context"]


# ------------------------------------------------------------------------------ remote code
REMOTE_CODE = """
import torch, transformers
batch = torch.load(INPUTS)
result = {}
for kind, (folder, auto_name) in FOLDERS.items():
    expected = torch.load(folder + "/expected.pt")[auto_name]
    for trust in (False, True):
        config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=trust)
        model = getattr(transformers, auto_name).from_pretrained(
            folder, trust_remote_code=trust).eval()
        got = outputs_of(model, auto_name, batch)
        result[f"{kind}.{trust}"] = {
            "config": type(config).__module__,
            "model": type(model).__module__ + "." + type(model).__name__,
            "diff": max(float((got[k] - v).abs().max()) for k, v in expected.items()),
        }
    # the default (no flag at all) is stock, with no prompt
    model = getattr(transformers, auto_name).from_pretrained(folder)
    result[f"{kind}.default"] = {"model": type(model).__module__}
"""


def test_remote_code_is_one_flag_away(folders, tmp_path):
    """``save_pretrained(remote_code=True)`` and ``hub.add_remote_code``: our classes with
    ``trust_remote_code=True``, stock BERT without it, the same outputs either way."""
    root, paths = folders
    targets = {}
    for kind, auto_name in (("pretrain", "AutoModelForPreTraining"),
                            ("glue", "AutoModelForSequenceClassification")):  # fmt: skip
        target = tmp_path / kind
        shutil.copytree(paths[kind], target)
        if kind == "pretrain":
            BertForPreTraining.from_pretrained(paths[kind]).save_pretrained(
                target, remote_code=True
            )
        else:
            hub.add_remote_code(target)
        assert json.loads((target / "config.json").read_text())["model_type"] == "bert"
        targets[kind] = (str(target), auto_name)
    code = inspect.getsource(model_inputs) + inspect.getsource(outputs_of) + REMOTE_CODE
    out = run_stock(code, FOLDERS=targets, INPUTS=str(root / "inputs.pt"))
    result = out["result"]
    for kind in targets:
        stock, remote = result[f"{kind}.False"], result[f"{kind}.True"]
        assert stock["config"] == "transformers.models.bert.configuration_bert"
        assert stock["model"].startswith("transformers.models.bert.modeling_bert.")
        assert remote["config"].startswith("transformers_modules.")
        assert remote["model"].startswith("transformers_modules.")
        assert remote["model"].endswith(".modeling." + KINDS[kind][0].__name__)
        assert stock["diff"] <= 1e-5 and remote["diff"] <= 1e-5
        assert result[f"{kind}.default"]["model"] == "transformers.models.bert.modeling_bert"
    assert not model_type_warnings(out["warnings"]), out["warnings"]


def test_plain_save_drops_an_inherited_auto_map(folders, tmp_path):
    _, paths = folders
    remote = tmp_path / "remote"
    BertForPreTraining.from_pretrained(paths["pretrain"]).save_pretrained(remote, remote_code=True)
    model = BertForPreTraining.from_pretrained(remote)
    assert model.config.auto_map  # read from the folder
    model.save_pretrained(tmp_path / "plain")  # no source files copied, so no auto_map
    assert "auto_map" not in json.loads((tmp_path / "plain" / "config.json").read_text())
    assert not (tmp_path / "plain" / "modeling.py").exists()
    assert model.config.auto_map  # the in-memory config is left as it was


# ----------------------------------------------------------- stock behaviour in our process
def test_importing_this_package_leaves_stock_names_stock(folders):
    _, paths = folders
    config = transformers.AutoConfig.from_pretrained(paths["glue"])
    assert type(config) is transformers.BertConfig
    assert type(transformers.AutoModel.from_config(config)) is transformers.BertModel
    model = transformers.AutoModelForSequenceClassification.from_pretrained(paths["glue"])
    assert type(model) is transformers.BertForSequenceClassification
    assert transformers.AutoConfig.for_model("bert").__class__ is transformers.BertConfig
    # our config class builds our models
    ours = BertConfig(vocab_size=100, **TINY)
    assert type(transformers.AutoModel.from_config(ours)) is BertModel


def test_legacy_model_type_folders_still_load(folders, tmp_path):
    _, paths = folders
    legacy = tmp_path / "legacy"
    shutil.copytree(paths["glue"], legacy)
    config = json.loads((legacy / "config.json").read_text())
    config["model_type"] = "bert_toolkit"
    (legacy / "config.json").write_text(json.dumps(config))
    model = BertForSequenceClassification.from_pretrained(legacy)
    assert model.config.model_type == "bert" and model.config.id2label[2] == "contradiction"
    assert type(transformers.AutoModelForSequenceClassification.from_pretrained(legacy)) is (
        BertForSequenceClassification
    )
    assert len(AutoTokenizer.from_pretrained(legacy)) == model.config.vocab_size
    model.save_pretrained(tmp_path / "resaved")  # and re-saving migrates it
    assert json.loads((tmp_path / "resaved" / "config.json").read_text())["model_type"] == "bert"


# -------------------------------------------------------------- Hub folders and arguments
def bert_base_uncased_layout(folder, tokenizer, seed, legacy_bin=False):
    """A folder laid out like google-bert/bert-base-uncased (tiny sizes): its config keys,
    stock weights (BertForPreTraining's, under architectures BertForMaskedLM), tokenizer
    files; ``legacy_bin``: ``pytorch_model.bin`` with the old LayerNorm ``gamma``/``beta``
    names instead of ``model.safetensors``."""
    torch.manual_seed(seed)
    stock = transformers.BertForPreTraining(
        transformers.BertConfig(vocab_size=len(tokenizer), **TINY)
    )
    state = {k: v.clone() for k, v in stock.state_dict().items()}
    folder.mkdir(parents=True)
    config = {
        "architectures": ["BertForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "model_type": "bert",
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "transformers_version": "4.6.0.dev0",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": len(tokenizer),
        **{k: v for k, v in TINY.items()},
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    if legacy_bin:
        renamed = {
            k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
            for k, v in state.items()
        }  # fmt: skip
        assert any(k.endswith("gamma") for k in renamed)
        torch.save(renamed, folder / "pytorch_model.bin")
    else:
        from safetensors.torch import save_file

        state.pop("cls.predictions.decoder.weight", None)  # tied: stored once
        save_file({k: v.contiguous() for k, v in state.items()}, folder / "model.safetensors")
    tokenizer.save_pretrained(folder)
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": True, "model_max_length": 512})
    )
    return stock.eval()


@pytest.mark.parametrize("legacy_bin", [False, True], ids=["safetensors", "pytorch_model.bin"])
def test_our_classes_load_stock_hub_folders(tmp_path, tokenizer, batch, legacy_bin):
    folder = tmp_path / "bert-base-uncased"
    stock = bert_base_uncased_layout(folder, tokenizer, seed=1, legacy_bin=legacy_bin)
    assert (
        AutoTokenizer.from_pretrained(folder)("hello world")["input_ids"]
        == tokenizer("hello world")["input_ids"]
    )
    with torch.no_grad():
        want = stock(**batch)
    for cls in (BertForPreTraining, BertForMaskedLM, BertModel):
        model, info = cls.from_pretrained(folder, output_loading_info=True)
        assert not info["missing_keys"] and not info["mismatched_keys"], (cls, info)
        model.eval()
        with torch.no_grad():
            got = model(**batch)
        real = batch["attention_mask"].bool()
        if cls is BertModel:
            hidden = stock.bert(**batch).last_hidden_state
            assert (got.last_hidden_state - hidden)[real].abs().max() <= 1e-5
        else:
            logits = got.logits if cls is BertForMaskedLM else got.prediction_logits
            assert (logits - want.prediction_logits)[real].abs().max() <= 1e-5
    model, info = BertForSequenceClassification.from_pretrained(
        folder, num_labels=2, output_loading_info=True
    )
    assert sorted(info["missing_keys"]) == ["classifier.bias", "classifier.weight"]
    assert torch.equal(
        model.bert.encoder.layer[1].output.LayerNorm.weight,
        stock.bert.encoder.layer[1].output.LayerNorm.weight,
    )


def _cache_repo(cache, tokenizer, commits):
    """A Hugging Face cache holding ``org/tiny-bert`` at several commits:
    ``models--org--tiny-bert/snapshots/<commit>/`` and ``refs/<branch>`` files."""
    repo = cache / "models--org--tiny-bert"
    models = {}
    for i, (branch, commit) in enumerate(commits.items()):
        models[branch] = bert_base_uncased_layout(repo / "snapshots" / commit, tokenizer, seed=i)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / branch).write_text(commit)
    return models


def test_hub_arguments_pass_through(tmp_path, tokenizer, monkeypatch):
    """revision (branch or commit), cache_dir, token and local_files_only reach the Hub
    client, which serves the matching snapshot from the cache (HF_HUB_OFFLINE=1)."""
    import transformers.utils.hub as tf_hub

    commits = {"main": "a" * 40, "v2": "b" * 40}
    cache = tmp_path / "cache"
    stock = _cache_repo(cache, tokenizer, commits)
    seen = []
    real_cached_files = tf_hub.cached_files

    def recording_cached_files(path_or_repo_id, filenames, **kwargs):
        keys = ("revision", "cache_dir", "token", "local_files_only")
        seen.append({k: kwargs.get(k) for k in keys})
        return real_cached_files(path_or_repo_id, filenames, **kwargs)

    # every file lookup of from_pretrained goes through this function of transformers
    monkeypatch.setattr(tf_hub, "cached_files", recording_cached_files)

    def query_weight(model):
        return model.bert.encoder.layer[0].attention.self.query.weight

    def stock_weight(branch):
        return stock[branch].bert.encoder.layer[0].attention.self.query.weight

    assert not torch.equal(stock_weight("main"), stock_weight("v2"))
    for kwargs, branch in (
        ({}, "main"),
        ({"revision": "v2"}, "v2"),
        ({"revision": commits["v2"]}, "v2"),
        ({"local_files_only": True}, "main"),
        ({"token": "hf_dummy_token", "revision": "main"}, "main"),
    ):
        seen.clear()
        model = BertForMaskedLM.from_pretrained("org/tiny-bert", cache_dir=cache, **kwargs)
        assert torch.equal(query_weight(model), stock_weight(branch)), kwargs
        assert seen, kwargs
        for call in seen:
            assert str(call["cache_dir"]) == str(cache), call
            # transformers resolves a branch to its commit once, then asks for that commit
            revision = call["revision"]
            assert getattr(revision, "resolved", revision) == commits[branch], call
            assert getattr(revision, "initial", revision) == kwargs.get("revision", "main"), call
            assert call["token"] == kwargs.get("token"), call
            if "local_files_only" in kwargs:  # (HF_HUB_OFFLINE=1 turns it on anyway)
                assert call["local_files_only"] is True, call
    tok = AutoTokenizer.from_pretrained("org/tiny-bert", cache_dir=cache, revision="v2")
    assert len(tok) == len(tokenizer)
    with pytest.raises(OSError):
        BertForMaskedLM.from_pretrained("org/tiny-bert", cache_dir=cache, revision="nope")
    with pytest.raises(OSError):
        BertForMaskedLM.from_pretrained("org/absent", cache_dir=cache, local_files_only=True)
