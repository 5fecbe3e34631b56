#!/usr/bin/env bash
# bench/growth — per-turn wall of a conversation growing to ~4k tokens, with the prefix cache and cold,
# on a generated 110M-shape Q8_0 model (gen-model --ctx 4096). Prints the table, then the ratios last.
#   bench/growth.sh [max_context (default 4096)] [threads (default 2)]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target flatkv_cli flatkv_growth >/dev/null
. bench/models.sh
model=$(model_110m_q8_0)
build/flatkv_growth "$model" "${1:-4096}" "${2:-2}"
