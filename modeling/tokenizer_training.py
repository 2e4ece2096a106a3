"""Train a BERT WordPiece tokenizer with the ``tokenizers`` library."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from .corpus import read_documents

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _texts(files: Sequence[str | Path], input_format: str, text_field: str) -> Iterator[str]:
    for f in files:
        for doc in read_documents(
            [f], input_format=input_format, text_field=text_field, sentence_splitter="line"
        ):
            yield from doc


def train_wordpiece(
    files: Sequence[str | Path],
    output_dir: str | Path,
    vocab_size: int = 30522,
    min_frequency: int = 2,
    lowercase: bool = True,
    input_format: str = "auto",
    text_field: str = "text",
    model_max_length: int = 512,
):
    """Train WordPiece on ``files`` and save a folder ``AutoTokenizer`` loads; return it."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer
    from transformers import PreTrainedTokenizerFast

    if not files:
        raise ValueError("no input files")

    def fresh() -> Tokenizer:
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        return tok

    def train(vocab: int, special: list[str]) -> Tokenizer:
        tok = fresh()
        trainer = WordPieceTrainer(
            vocab_size=vocab,
            min_frequency=min_frequency,
            special_tokens=special,
            continuing_subword_prefix="##",
            show_progress=False,
        )
        tok.train_from_iterator(_texts(files, input_format, text_field), trainer=trainer)
        return tok

    # The trainer numbers the "##x" pieces in hash-map order, and ties between equally frequent
    # merges are broken by those numbers, so two runs on the same text give different
    # vocabularies. A first pass (no merges) finds the pieces; the second pass gets them,
    # sorted, before any merge, which fixes every number and every tie.
    pieces = sorted(t for t in train(1, SPECIAL_TOKENS).get_vocab() if t.startswith("##"))
    vocab = train(vocab_size, SPECIAL_TOKENS + pieces).get_vocab(with_added_tokens=False)
    if len(vocab) <= len(SPECIAL_TOKENS):
        raise ValueError(f"no text to train a tokenizer on in {[str(f) for f in files]}")
    tok = fresh()
    tok.model = models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix="##")
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.decoder = decoders.WordPiece(prefix="##")
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(output_dir))
    return fast
