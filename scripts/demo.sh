#!/usr/bin/env bash
# The main job on an embedded default, CPU-friendly, a few minutes end to end, offline:
#   1. generate the demo corpus: a made-up world of 150 creatures with hidden attributes,
#      described in 900 short documents of facts and stories (recipes/synthetic_world.py,
#      deterministic),
#   2. pretrain BERT-tiny (L=2, H=128) on it with MLM + NSP (a WordPiece vocabulary is trained
#      on the corpus first) and report held-out MLM accuracy beside the unigram baseline,
#   3. fine-tune through the GLUE recipe on a task only pretraining can solve: is the creature
#      named in a sentence dangerous? Train and dev sentences name different creatures, and
#      never state the answer; only the pretraining corpus tells (through what happens around
#      each creature). Fine-tuned from our checkpoint and from random init of the same model,
#      3 seeds each.
# Everything lands in outputs/demo/; the summary in outputs/demo/summary.json and summary.png.
# DEMO_SEEDS (default "1 2 3") and DEMO_OUT change the seeds and the folder; DEMO_PYTHON runs
# with that Python instead of setting up .venv (the test suite runs the demo that way).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DEMO_PYTHON-}" ]; then
  EXTRAS=${EXTRAS-} bash scripts/setup_env.sh
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH=$PWD
PY=${DEMO_PYTHON:-.venv/bin/python}
OUT=${DEMO_OUT:-outputs/demo}
SEEDS=${DEMO_SEEDS:-1 2 3}
# a rerun replaces an earlier demo's folder, never anything else
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ] && [ ! -d "$OUT/world" ]; then
  echo "demo.sh: $OUT exists and does not hold an earlier demo; choose another DEMO_OUT" >&2
  exit 2
fi
rm -rf "$OUT"
start=$SECONDS

echo "== 1/3 generating the demo world"
$PY scripts/make_demo_world.py "$OUT/world"

echo "== 2/3 pretraining BERT-tiny on $OUT/world/corpus.txt"
$PY scripts/pretrain.py --config recipes/bert-tiny/pretrain.yaml \
  --train_data "$OUT/world/corpus.txt" --max_seq_length 64 --phase_fractions 1.0 \
  --train_batch_size 32 --max_predictions_per_seq 10 --tokenizer_vocab_size 1000 \
  --num_validation_docs 30 --max_steps 800 --warmup_steps 40 --eval_steps 100 \
  --logging_steps 50 --max_eval_samples 256 --max_time 2h \
  --output_dir "$OUT/pretrain" --disable_tqdm > "$OUT/pretrain.log" 2>&1 \
  || { tail -20 "$OUT/pretrain.log"; exit 1; }
echo "   done in $((SECONDS - start)) s (log: $OUT/pretrain.log)"

echo "== 3/3 fine-tuning on the dangerous-or-harmless task: pretrained vs random init, seeds $SEEDS"
for seed in $SEEDS; do
  $PY scripts/make_random_init.py "$OUT/pretrain/model" "$OUT/random-init/seed$seed" --seed "$seed" > /dev/null
  for init in pretrained random; do
    model="$OUT/pretrain/model"; [ "$init" = random ] && model="$OUT/random-init/seed$seed"
    $PY scripts/run_glue.py --model_name_or_path "$model" --task_name sst2 \
      --data_dir "$OUT/world/task" --output_dir "$OUT/finetune/$init-seed$seed" \
      --do_train --do_eval --learning_rate 3e-4 --per_device_train_batch_size 32 --num_train_epochs 3 \
      --seed "$seed" > "$OUT/finetune-$init-seed$seed.log" 2>&1 \
      || { tail -20 "$OUT/finetune-$init-seed$seed.log"; exit 1; }
    echo "   $init seed $seed done ($((SECONDS - start)) s)"
  done
done

$PY scripts/demo_report.py "$OUT" --seeds $SEEDS --seconds $((SECONDS - start))
