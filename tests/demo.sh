#!/usr/bin/env bash
# The README's main job (scripts/demo.mjs) on a small generated model and the transcript's first 5 turns: it must
# print every turn, each after the first reusing a prefix, and end with all answers equal to cold (its exit status
# says so).
set -euo pipefail
bin=$1 data=$2 repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" gen-model --dim 64 --hidden 192 --layers 2 --heads 4 --ctx 8192 --tied \
  --vocab-from "$data/tokenizers/ggml-vocab-llama-spm.gguf" -o "$dir/m.gguf" >/dev/null
out=$(node "$repo/scripts/demo.mjs" "$bin" "$dir/m.gguf" 5 2)
echo "$out"
grep -q "all equal" <<<"$out"
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ ' <<<"$out")" -eq 5 ]
# every turn after the first reuses the one before it
[ "$(awk '/^ +[0-9]+ +[0-9]+ +[0-9]+ / && $1 > 1 && $3 == 0' <<<"$out" | wc -l)" -eq 0 ]
