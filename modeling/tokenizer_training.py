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
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        continuing_subword_prefix="##",
    )
    tok.train_from_iterator(_texts(files, input_format, text_field), trainer=trainer)
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
