#!/usr/bin/env bash
# The main job on an embedded default, CPU-friendly, a few minutes end to end:
#   1. pretrain BERT-tiny (L=2, H=128) with MLM + NSP on the small corpus shipped in
#      recipes/bert-tiny/corpus.txt (a WordPiece vocabulary is trained on it first, then the
#      128 -> 512 two-phase schedule runs),
#   2. fine-tune the saved checkpoint on a sentence-pair task generated from the same corpus,
#      through the GLUE recipe (MRPC format: is sentence B the continuation of sentence A?).
# Everything lands in outputs/demo/. Set up .venv first (scripts/setup_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=${EXTRAS-} bash scripts/setup_env.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=outputs/demo
CORPUS=recipes/bert-tiny/corpus.txt
rm -rf "$OUT"

echo "== 1/2 pretraining BERT-tiny on $CORPUS"
.venv/bin/accelerate launch --num_processes 1 --num_machines 1 --mixed_precision no --dynamo_backend no \
  scripts/pretrain.py --config recipes/bert-tiny/pretrain.yaml \
  --train_data "$CORPUS" "$CORPUS" --tokenizer_vocab_size 1000 --num_validation_docs 2 \
  --output_dir "$OUT/pretrain" --disable_tqdm

echo "== 2/2 fine-tuning the checkpoint on a generated sentence-pair task"
.venv/bin/python scripts/make_demo_pairs.py "$CORPUS" "$OUT/pairs"
.venv/bin/python scripts/run_glue.py --model_name_or_path "$OUT/pretrain/model" \
  --task_name mrpc --data_dir "$OUT/pairs" --output_dir "$OUT/finetune" \
  --do_train --do_eval --learning_rate 1e-4 --per_device_train_batch_size 8 --num_train_epochs 10 \
  --disable_tqdm true

echo "== results"
echo "pretraining (held-out):"; .venv/bin/python -c "import json; print(json.dumps(json.load(open('$OUT/pretrain/train_results.json')).get('last_eval'), indent=1))"
echo "fine-tuning (dev):"; cat "$OUT/finetune/eval_results.json"
echo "checkpoint: $OUT/pretrain/model (loads with modeling.BertForPreTraining or transformers.BertForPreTraining)"
