#!/usr/bin/env bash
# bench/growth — per-turn wall of a conversation growing to ~4k tokens, with the prefix cache and cold,
# on a generated 110M-shape Q8_0 model (gen-model --ctx 4096). Prints the table, then the ratios last.
#   bench/growth.sh [max_context (default 4096)] [threads (default 2)]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target flatkv_cli flatkv_growth >/dev/null
models=bench/.peer/models
mkdir -p "$models"
model=$models/growth-110m-q8_0.gguf
[ -f "$model" ] || build/flatkv gen-model --dim 768 --hidden 2048 --layers 12 --heads 12 --kv-heads 12 --ctx 4096 \
  --vocab-from data/tokenizers/ggml-vocab-llama-spm.gguf --type q8_0 --seed 1 -o "$model"
build/flatkv_growth "$model" "${1:-4096}" "${2:-2}"
