"""The model: parity with stock transformers on real weights, checkpoints both ways, remote code,
the sparse MLM head, the unpadded path, gradient checkpointing and input errors."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers

import modeling
from modeling import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)

TINY = dict(
    vocab_size=120,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
)


def padded_pair_batch(vocab_size=30522, seed=0):
    """Three sequences of different lengths, two segments each, right-padded."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(min(1000, vocab_size // 2), vocab_size, (3, 24), generator=g)
    lengths = [24, 17, 9]
    mask = torch.zeros_like(ids)
    types = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        types[row, n // 2 : n] = 1
        ids[row, 0], ids[row, n - 1] = 101 % vocab_size, 102 % vocab_size
        ids[row, n:] = 0
    return ids, mask, types


@pytest.fixture(scope="module")
def real_pretraining_pair(minilm_path, tmp_path_factory):
    """Our BertForPreTraining on the real encoder (heads randomly initialised, seeded), saved,
    and stock transformers' BertForPreTraining loaded from that folder."""
    torch.manual_seed(0)
    ours = BertForPreTraining.from_pretrained(minilm_path).eval()
    folder = tmp_path_factory.mktemp("ours")
    ours.save_pretrained(folder)
    stock, info = transformers.BertForPreTraining.from_pretrained(folder, output_loading_info=True)
    return ours, stock.eval(), folder, info


def test_config_matches_transformers_fields_and_defaults():
    ours, stock = BertConfig(), transformers.BertConfig()
    for field in (
        "vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
        "hidden_dropout_prob attention_probs_dropout_prob max_position_embeddings type_vocab_size "
        "initializer_range layer_norm_eps pad_token_id classifier_dropout tie_word_embeddings"
    ).split():
        assert getattr(ours, field) == getattr(stock, field), field
    # stock's model type: our folders are stock BERT checkpoints (see tests/test_compat.py)
    assert ours.model_type == stock.model_type == "bert"
    assert ours.to_dict()["model_type"] == "bert"


def test_auto_classes_are_registered():
    config = BertConfig(**TINY)
    for auto, cls in (
        (transformers.AutoModel, BertModel),
        (transformers.AutoModelForPreTraining, BertForPreTraining),
        (transformers.AutoModelForMaskedLM, BertForMaskedLM),
        (transformers.AutoModelForSequenceClassification, BertForSequenceClassification),
        (transformers.AutoModelForQuestionAnswering, BertForQuestionAnswering),
        (transformers.AutoModelForMultipleChoice, BertForMultipleChoice),
        (transformers.AutoModelForTokenClassification, BertForTokenClassification),
    ):
        assert type(auto.from_config(config)) is cls


def test_stock_checkpoint_loads_without_missing_or_unexpected_keys(minilm_path):
    model, info = BertModel.from_pretrained(minilm_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_parity_with_transformers_bert_model_on_real_weights(minilm_path, attn):
    ours = BertModel.from_pretrained(minilm_path, attn_implementation=attn).eval()
    stock = transformers.BertModel.from_pretrained(minilm_path, attn_implementation="eager").eval()
    assert ours.config._attn_implementation == attn
    ids, mask, types = padded_pair_batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types)
        b = stock(input_ids=ids, attention_mask=mask, token_type_ids=types)
    assert (a.last_hidden_state - b.last_hidden_state).abs().max() <= 1e-5
    assert (a.pooler_output - b.pooler_output).abs().max() <= 1e-5


def test_unpadded_path_matches_padded_on_real_tokens(minilm_path):
    stock = transformers.BertModel.from_pretrained(minilm_path).eval()
    ours = BertModel.from_pretrained(minilm_path, unpad_inputs=True).eval()
    assert ours.config.unpad_inputs
    ids, mask, types = padded_pair_batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        b = stock(input_ids=ids, attention_mask=mask, token_type_ids=types)
    real = mask.bool()
    assert (a.last_hidden_state - b.last_hidden_state)[real].abs().max() <= 1e-5
    assert (a.pooler_output - b.pooler_output).abs().max() <= 1e-5
    assert a.last_hidden_state[~real].abs().max() == 0  # padding positions are never computed
    assert len(a.hidden_states) == 7


def test_our_checkpoint_loads_in_stock_pretraining_model(real_pretraining_pair):
    ours, stock, _, info = real_pretraining_pair
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert stock.cls.predictions.decoder.weight is stock.bert.embeddings.word_embeddings.weight
    ids, mask, types = padded_pair_batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=types)
        b = stock(input_ids=ids, attention_mask=mask, token_type_ids=types)
    assert a.prediction_logits.shape == (3, 24, 30522)
    assert (a.prediction_logits - b.prediction_logits).abs().max() <= 1e-4
    assert (a.seq_relationship_logits - b.seq_relationship_logits).abs().max() <= 1e-5


def test_stock_pretraining_checkpoint_loads_into_ours(real_pretraining_pair, tmp_path):
    _, stock, _, _ = real_pretraining_pair
    stock.save_pretrained(tmp_path)
    ours, info = BertForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    for name, tensor in stock.state_dict().items():
        assert torch.equal(ours.state_dict()[name], tensor), name


def test_decoder_is_tied_with_separate_bias():
    model = BertForPreTraining(BertConfig(**TINY))
    decoder = model.cls.predictions.decoder
    assert decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert decoder.bias is model.cls.predictions.bias
    assert decoder.bias.shape == (TINY["vocab_size"],)


def _mlm_batch(vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (4, 16), generator=g)
    mask = torch.ones_like(ids)
    mask[2, 11:] = 0
    labels = torch.full_like(ids, -100)
    pick = torch.rand(ids.shape, generator=g) < 0.15
    pick[:, 1] = True
    pick &= mask.bool()
    labels[pick] = ids[pick]
    return ids, mask, labels, torch.tensor([0, 1, 1, 0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sparse_mlm_head_loss_equals_dense(dtype):
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(**TINY, hidden_dropout_prob=0.0)).to(dtype).eval()
    ids, mask, labels, nsp = _mlm_batch(TINY["vocab_size"])
    sparse = model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    model.config.sparse_prediction_head = False
    dense = model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    # The sparse logits are the dense logits at the labelled positions, in row-major order.
    assert sparse.prediction_logits.shape == (int((labels != -100).sum()), TINY["vocab_size"])
    assert torch.allclose(
        sparse.prediction_logits, dense.prediction_logits[labels != -100], atol=1e-5
    )
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    assert abs(sparse.mlm_loss.item() - dense.mlm_loss.item()) <= tol * max(
        1.0, dense.mlm_loss.item()
    )
    assert abs(sparse.loss.item() - dense.loss.item()) <= tol * max(1.0, dense.loss.item())
    # and the dense loss is what transformers computes
    stock = transformers.BertForPreTraining(transformers.BertConfig(**TINY)).to(dtype).eval()
    stock.load_state_dict(model.state_dict())
    ref = stock(input_ids=ids, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    assert abs(ref.loss.item() - dense.loss.item()) <= 10 * tol * ref.loss.item()


def test_sparse_head_gradients_match_dense():
    torch.manual_seed(0)
    model = BertForMaskedLM(
        BertConfig(**TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    )
    model = model.double()
    ids, mask, labels, _ = _mlm_batch(TINY["vocab_size"])
    model(ids, attention_mask=mask, labels=labels).loss.backward()
    sparse_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.config.sparse_prediction_head = False
    model(ids, attention_mask=mask, labels=labels).loss.backward()
    for g, p in zip(sparse_grads, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-12)


def test_loss_is_mlm_only_without_nsp_label():
    model = BertForPreTraining(BertConfig(**TINY)).eval()
    ids, mask, labels, _ = _mlm_batch(TINY["vocab_size"])
    out = model(ids, attention_mask=mask, labels=labels)
    assert out.nsp_loss is None and torch.equal(out.loss, out.mlm_loss)


def test_gradient_checkpointing_gives_same_gradients():
    torch.manual_seed(0)
    config = BertConfig(**TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForPreTraining(config).double().train()
    ids, mask, labels, nsp = _mlm_batch(TINY["vocab_size"])
    model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp).loss.backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert model.bert.encoder.gradient_checkpointing
    model(ids, attention_mask=mask, labels=labels, next_sentence_label=nsp).loss.backward()
    for g, p in zip(plain, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-12)


def test_task_heads_shapes_and_losses():
    torch.manual_seed(0)
    ids, mask, _, _ = _mlm_batch(TINY["vocab_size"])
    cls = BertForSequenceClassification(BertConfig(**TINY, num_labels=3)).eval()
    out = cls(ids, attention_mask=mask, labels=torch.tensor([0, 2, 1, 1]))
    assert out.logits.shape == (4, 3)
    assert torch.isclose(
        out.loss, torch.nn.functional.cross_entropy(out.logits, torch.tensor([0, 2, 1, 1]))
    )
    reg = BertForSequenceClassification(BertConfig(**TINY, num_labels=1)).eval()
    target = torch.tensor([0.5, 4.0, 2.5, 1.0])
    out = reg(ids, attention_mask=mask, labels=target)
    assert out.logits.shape == (4, 1)
    assert torch.isclose(out.loss, ((out.logits.squeeze(-1) - target) ** 2).mean())
    qa = BertForQuestionAnswering(BertConfig(**TINY)).eval()
    out = qa(
        ids,
        attention_mask=mask,
        start_positions=torch.tensor([1, 2, 3, 4]),
        end_positions=torch.tensor([2, 3, 4, 5]),
    )
    assert out.start_logits.shape == out.end_logits.shape == (4, 16) and out.loss > 0
    tok = BertForTokenClassification(BertConfig(**TINY, num_labels=5)).eval()
    labels = torch.full_like(ids, -100)
    labels[:, 1] = 3
    out = tok(ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (4, 16, 5)
    assert torch.isclose(
        out.loss, torch.nn.functional.cross_entropy(out.logits[:, 1], labels[:, 1])
    )
    mc = BertForMultipleChoice(BertConfig(**TINY)).eval()
    out = mc(ids.view(2, 2, 16), attention_mask=mask.view(2, 2, 16), labels=torch.tensor([1, 0]))
    assert out.logits.shape == (2, 2)
    assert torch.isclose(
        out.loss, torch.nn.functional.cross_entropy(out.logits, torch.tensor([1, 0]))
    )


def test_task_models_match_stock_on_shared_weights():
    """Same weights in our and stock's task models give the same logits (padded, two segments)."""
    ids, mask, types = padded_pair_batch(vocab_size=TINY["vocab_size"])
    for ours_cls, stock_cls, field in (
        (BertForSequenceClassification, transformers.BertForSequenceClassification, "logits"),
        (BertForTokenClassification, transformers.BertForTokenClassification, "logits"),
        (BertForQuestionAnswering, transformers.BertForQuestionAnswering, "start_logits"),
        (BertForMaskedLM, transformers.BertForMaskedLM, "logits"),
    ):
        ours = ours_cls(BertConfig(**TINY, num_labels=2)).eval()
        stock = stock_cls(transformers.BertConfig(**TINY, num_labels=2)).eval()
        missing, unexpected = stock.load_state_dict(ours.state_dict(), strict=False)
        assert not unexpected and all("position_ids" in k or "token_type_ids" in k for k in missing)
        with torch.no_grad():
            a = getattr(ours(ids, attention_mask=mask, token_type_ids=types), field)
            b = getattr(stock(input_ids=ids, attention_mask=mask, token_type_ids=types), field)
        assert (a - b).abs().max() <= 1e-5, ours_cls.__name__


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(input_ids=torch.tensor([[1, 2, 500]])), "input_ids contains 500, outside [0, 120)"),
        (dict(input_ids=torch.tensor([[1, -3]])), "input_ids contains -3"),
        (
            dict(input_ids=torch.ones(1, 65, dtype=torch.long)),
            "sequence length 65 exceeds max_position_embeddings=64",
        ),
        (
            dict(input_ids=torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(2, 4)),
            "attention_mask has shape (2, 4) but input_ids has (2, 5)",
        ),
        (
            dict(
                input_ids=torch.ones(1, 3, dtype=torch.long),
                token_type_ids=torch.tensor([[0, 1, 2]]),
            ),
            "token_type_ids contains 2, outside [0, 2)",
        ),
        (dict(input_ids=torch.ones(5, dtype=torch.long)), "shape (batch, sequence)"),
    ],
)
def test_bad_inputs_raise_clear_errors(kwargs, message):
    model = BertModel(BertConfig(**TINY)).eval()
    with pytest.raises(ValueError) as err:
        model(**kwargs)
    assert message in str(err.value)


def test_remote_code_folder_loads_without_this_package(real_pretraining_pair, tmp_path):
    ours = real_pretraining_pair[0]
    ours.save_pretrained(tmp_path, remote_code=True)
    assert (
        json.loads((tmp_path / "config.json").read_text())["auto_map"]["AutoModel"]
        == "modeling.BertModel"
    )
    ids, mask, types = padded_pair_batch()
    with torch.no_grad():
        expected = ours.bert(ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    torch.save({"ids": ids, "mask": mask, "types": types, "expected": expected}, tmp_path / "io.pt")
    script = textwrap.dedent(
        f"""
        import sys, torch
        sys.path = [p for p in sys.path if p not in ("", {str(os.getcwd())!r})]
        sys.modules["modeling"] = None  # this package must not be importable here
        from transformers import AutoModel, AutoModelForPreTraining
        folder = {str(tmp_path)!r}
        model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
        assert type(model).__name__ == "BertModel", type(model)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        io = torch.load(folder + "/io.pt")
        with torch.no_grad():
            out = model(io["ids"], attention_mask=io["mask"], token_type_ids=io["types"]).last_hidden_state
        print("MAXDIFF", float((out - io["expected"]).abs().max()))
        pre = AutoModelForPreTraining.from_pretrained(folder, trust_remote_code=True)
        print("CLASS", type(pre).__name__)
        """
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    diff = float(result.stdout.split("MAXDIFF")[1].split()[0])
    assert diff <= 1e-6
    assert "CLASS BertForPreTraining" in result.stdout


def test_package_exports():
    for name in modeling.__all__:
        assert hasattr(modeling, name)


@pytest.mark.parametrize("unpad", [False, True])
def test_cls_only_last_layer_keeps_pooled_output_and_gradients(minilm_path, unpad):
    """Classification heads compute the last layer at [CLS] only: same logits, same gradients."""
    ids, mask, types = padded_pair_batch()
    model = BertForSequenceClassification.from_pretrained(
        minilm_path, num_labels=3, unpad_inputs=unpad
    )
    model = model.double().eval()
    labels = torch.tensor([0, 2, 1])
    full = model.bert(ids, attention_mask=mask, token_type_ids=types).pooler_output
    cls = model.bert(ids, attention_mask=mask, token_type_ids=types, cls_only=True)
    assert cls.last_hidden_state.shape == (3, 1, 384)
    assert (cls.pooler_output - full).abs().max() <= 1e-10
    out = model(ids, attention_mask=mask, token_type_ids=types, labels=labels)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    logits = model.classifier(model.dropout(full))
    torch.nn.functional.cross_entropy(logits, labels).backward()
    for name, param in model.named_parameters():
        assert torch.allclose(grads[name], param.grad, atol=1e-10), name
