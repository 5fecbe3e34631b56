#!/usr/bin/env bash
# bench/kvtype — decode tokens/s at ~4k context with f16, q8_0 and q4_0 K/V rows, side by side, and the logits'
# distance from f16, on bench/growth.sh's generated 110M-shape Q8_0 model (written here if missing).
#   bench/kvtype.sh [prompt (default 4032)] [decode steps (default 64)] [repetitions (default 5)] [threads (default 2)]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target flatkv_cli flatkv_kvtype >/dev/null
models=bench/.peer/models
mkdir -p "$models"
model=$models/growth-110m-q8_0.gguf
[ -f "$model" ] || build/flatkv gen-model --dim 768 --hidden 2048 --layers 12 --heads 12 --kv-heads 12 --ctx 4096 \
  --vocab-from data/tokenizers/ggml-vocab-llama-spm.gguf --type q8_0 --seed 1 -o "$model"
build/flatkv_kvtype "$model" "${1:-4032}" "${2:-64}" "${3:-5}" "${4:-2}"
