# bench/models.sh — sourced by the bench scripts: the generated models more than one of them reads, made once.
# model_110m_q8_0 [CTX]: the 110M-shape Q8_0 model (dim 768, 12 layers, llama-spm's 32000 ids, seed 1) with a
# context of CTX (default 4096); prints its path.
model_110m_q8_0() {
  local ctx=${1:-4096} dir=bench/.peer/models file
  file=$dir/growth-110m-q8_0.gguf
  [ "$ctx" = 4096 ] || file=$dir/110m-q8_0-ctx$ctx.gguf
  mkdir -p "$dir"
  [ -f "$file" ] || build/flatkv gen-model --dim 768 --hidden 2048 --layers 12 --heads 12 --kv-heads 12 --ctx "$ctx" \
    --vocab-from data/tokenizers/ggml-vocab-llama-spm.gguf --type q8_0 --seed 1 -o "$file" >/dev/null
  echo "$file"
}
