#!/bin/sh
# bench/typecheck.sh — flatkv's weight types against ggml's code, bit for bit (bench/typecheck.c), using the peer's
# libggml-base.so (bench/compare sets up bench/.peer). Usage: bench/typecheck.sh [BUILD_DIR] [ROWS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
lib=${GGML_BASE:-$here/.peer/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so}
[ -f "$lib" ] || { echo "typecheck: no $lib (set GGML_BASE, or run bench/compare --setup-only to set up bench/.peer)" >&2; exit 2; }
cmake --build "$build" --target flatkv_typecheck >/dev/null
exec "$build/flatkv_typecheck" "$lib" "${2:-200}"
