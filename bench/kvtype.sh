#!/usr/bin/env bash
# bench/kvtype — decode tokens/s at ~4k context with f16, q8_0 and q4_0 K/V rows, side by side, and the logits'
# distance from f16, on bench/growth.sh's generated 110M-shape Q8_0 model (written here if missing); then the agent
# transcript replayed turn by turn to ~11k positions with each type (bench/agent-kv.mjs, a 16k-context copy of it).
#   bench/kvtype.sh [prompt (default 4032)] [decode steps (default 64)] [repetitions (default 5)] [threads (default 2)]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target flatkv_cli flatkv_kvtype >/dev/null
. bench/models.sh
model=$(model_110m_q8_0)
build/flatkv_kvtype "$model" "${1:-4032}" "${2:-64}" "${3:-5}" "${4:-2}"
agent=$(model_110m_q8_0 16384)
node bench/agent-kv.mjs build/flatkv "$agent"
