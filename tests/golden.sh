#!/usr/bin/env bash
# Golden digests: the bits of a few fixed prompts, checked against tests/golden/digests.txt.
#
# usage: golden.sh FLATKV_BIN DATA_DIR [--write]
#   Runs every case under each kernel variant this CPU runs (FLATKV_KERNELS; the others are reported skipped, by
#   name and why), then — when qemu-x86_64 is installed — the same binary on emulated CPUs: Haswell-v4 (AVX2, no
#   AVX-512), where it must choose avx2, and Nehalem-v2 (no AVX), where it must choose ref. Every run must print the
#   committed digests, and so must a run with the mixtures' experts read from the file (FLATKV_EXPERTS=map; the others
#   pack them). --write records the reference variant's digests instead.
set -euo pipefail
bin=$1 data=$2 mode=${3:-check}
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/golden/digests.txt
work=$(mktemp -d)
[ -n "${GOLDEN_KEEP:-}" ] && echo "work dir: $work"
[ -n "${GOLDEN_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

# The models: the real tiny llama, and generated ones of each quantized type (rows of 256: K-quant super-blocks).
models=(stories260K=$data/models/stories260K.gguf)
for type in q8_0 q4_0 q4_k_m; do
  "$bin" gen-model --dim 256 --hidden 768 --layers 2 --heads 4 --kv-heads 2 --ctx 512 --seed 7 \
    --vocab-from "$data/models/stories260K.gguf" --type $type -o "$work/$type.gguf" >/dev/null
  models+=("$type=$work/$type.gguf")
done
# Mixtures of experts (Q8_0): rows grouped by expert, whose group sizes differ between the two turns' chunks.
"$bin" gen-model --arch qwen3moe --dim 256 --hidden 768 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ctx 512 \
  --seed 7 --experts 16 --experts-used 4 --expert-hidden 128 --vocab-from "$data/models/stories260K.gguf" \
  --type q8_0 -o "$work/qwen3moe.gguf" >/dev/null
"$bin" gen-model --arch glm4moe --dim 256 --hidden 768 --layers 3 --heads 4 --kv-heads 2 --rope-dims 32 --ctx 512 \
  --seed 7 --experts 16 --experts-used 4 --expert-hidden 128 --shared-experts 1 --dense-layers 1 --nextn 1 \
  --vocab-from "$data/models/stories260K.gguf" --type q8_0 -o "$work/glm4moe.gguf" >/dev/null
# gpt-oss as its files come (MXFP4 experts, Q8_0 elsewhere): sinks, YaRN, 32-position windows on even layers.
"$bin" gen-model --arch gpt-oss --dim 256 --hidden 768 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ctx 512 \
  --seed 7 --experts 16 --experts-used 4 --expert-hidden 128 --window 32 --vocab-from "$data/models/stories260K.gguf" \
  --type mxfp4_moe -o "$work/gpt-oss.gguf" >/dev/null
# A hybrid (Q8_0): gated DeltaNet layers 0-2 (8 value heads on 4 key heads), gated attention in layer 3; its lines
# carry the digest of the recurrent state after each turn.
"$bin" gen-model --arch qwen35 --dim 256 --hidden 768 --layers 4 --heads 4 --kv-heads 2 --head-dim 64 --ctx 512 \
  --seed 7 --ssm-k-heads 4 --vocab-from "$data/models/stories260K.gguf" --type q8_0 -o "$work/qwen35.gguf" >/dev/null
# Its mixture-of-experts twin: the same layers with routed experts and a gated shared one.
"$bin" gen-model --arch qwen35moe --dim 256 --hidden 768 --layers 4 --heads 4 --kv-heads 2 --head-dim 64 --ctx 512 \
  --seed 7 --ssm-k-heads 4 --experts 16 --experts-used 4 --expert-hidden 128 \
  --vocab-from "$data/models/stories260K.gguf" --type q8_0 -o "$work/qwen35moe.gguf" >/dev/null
models+=("qwen3moe=$work/qwen3moe.gguf" "glm4moe=$work/glm4moe.gguf" "gpt-oss=$work/gpt-oss.gguf" "qwen35=$work/qwen35.gguf"
         "qwen35moe=$work/qwen35moe.gguf")
# Two turns: a 150-token prompt (prefill chunks on the 128 grid, panels and direct tiles), then its extension (a
# resumed prefill), each with 16 greedy tokens.
story="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends."
printf '{"prompt": "%s", "n": 16}\n{"prompt": "%s %s", "n": 16}\n' "$story $story $story $story" \
  "$story $story $story $story" "She was happy." >"$work/session.jsonl"

# run LABEL PREFIX...: every case's digests as "case logits kv [state] kernels" lines (state: models with recurrent
# layers), the kernels it used last.
run() {
  local label=$1
  shift
  for m in "${models[@]}"; do
    kvs="f32 f16"
    case ${m%%=*} in
    stories260K) ;;           # quantized rows take heads of 32s: the generated models' 64
    *moe | gpt-oss | qwen35) kvs="f16" ;; # experts, recurrent layers: what is computed, not how K/V are stored
    *) kvs+=" q8_0 q4_0" ;;
    esac
    # glm4moe also with its NextN block drafting (--spec mtp): the block's rows in the K/V, its hidden state as a state
    [ "${m%%=*}" != glm4moe ] || kvs+=" f16-mtp"
    for kv in $kvs; do
      spec=lookup # the default, whose answer is every mode's
      [ "$kv" != f16-mtp ] || spec=mtp
      "$@" "$bin" replay -m "${m#*=}" --session "$work/session.jsonl" --kv-type ${kv%-mtp} --spec $spec --threads 2 \
        2> >(grep -v "TCG doesn.t support" >&2) |
        sed -E 's/.*"turn":([0-9]+).*"logits_digest":"([0-9a-f]+)","kv_digest":"([0-9a-f]+)","state_digest":"([0-9a-f]+)","kernels":"([a-z0-9]+)".*/\1 \2 \3 \4 \5/' |
        while read -r turn logits kvd state kernels; do
          [ "$state" != 0000000000000000 ] || state=
          echo "${m%%=*}-$kv-turn$turn $logits $kvd${state:+ $state} $kernels"
        done
    done
  done >"$work/$label.out"
}

if [ "$mode" = --write ]; then
  FLATKV_KERNELS=ref run ref env
  { grep '^#' "$golden"; sed -E 's/ [a-z0-9]+$//' "$work/ref.out"; } >"$work/new" && mv "$work/new" "$golden"
  echo "wrote $(grep -vc '^#' "$golden") digests to $golden"
  exit 0
fi

want=$(grep -v '^#' "$golden")
[ -n "$want" ] || { echo "FAIL: $golden holds no digests"; exit 1; }
failed=0
check() { # label expected-kernels
  local got
  got=$(sed -E 's/ [a-z0-9]+$//' "$work/$1.out")
  if [ "$got" != "$want" ]; then
    echo "FAIL: $1: digests differ from $golden:"
    diff <(echo "$want") <(echo "$got") || true
    failed=1
  elif [ -n "$2" ] && awk '{print $NF}' "$work/$1.out" | grep -qv "^$2\$"; then
    echo "FAIL: $1: chose kernels $(awk '{print $NF}' "$work/$1.out" | sort -u | tr '\n' ' ')instead of $2"
    failed=1
  else
    echo "ok: $1 ($(echo "$want" | wc -l) digests)"
  fi
}
for kernels in ref avx2 avx512 amx; do
  if ! why=$(FLATKV_KERNELS=$kernels "$bin" generate -m "$data/models/stories260K.gguf" -p x -n 1 --json 2>&1 >/dev/null); then
    echo "skipped: kernels $kernels: ${why#*: }"
    continue
  fi
  FLATKV_KERNELS=$kernels run "$kernels" env
  check "$kernels" "$kernels"
done
# The mixtures' experts read from the mapped file in their own layout: the runs above pack them (FLATKV_EXPERTS=auto,
# and these models fit in memory), on the best variant here.
FLATKV_EXPERTS=map run experts-mapped env
check experts-mapped ""
if [ -n "${GOLDEN_NO_QEMU:-}" ]; then
  echo "skipped: emulated CPUs (GOLDEN_NO_QEMU set)"
elif command -v qemu-x86_64 >/dev/null; then
  for cpu in Haswell-v4:avx2 Nehalem-v2:ref; do
    run "qemu-${cpu%%:*}" qemu-x86_64 -cpu "${cpu%%:*}"
    check "qemu-${cpu%%:*}" "${cpu#*:}"
  done
else
  echo "skipped: qemu-x86_64 is not installed (apt-get install qemu-user): no emulated-CPU runs"
fi
exit $failed
