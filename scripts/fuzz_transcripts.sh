#!/usr/bin/env bash
# The csa fuzz runs docs/fuzzing.md quotes, run now and saved as transcripts under results/fuzz/:
#
#   scripts/fuzz_transcripts.sh   # writes results/fuzz/{broken_topk,project_topk,misbehaving,usage,self_test,
#                                 #   triton_store}.txt
#
# Each runs in a scratch directory holding a link to examples/, so paths print as the docs show them; `csa` in a
# transcript is `$PYTHON -m csa.cli`. Environment: PYTHON (default .venv/bin/python), ONLY (one transcript name).
# On a machine without a GPU, Triton runs interpreted. tests/test_docs.py checks that the docs quote these files.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
OUT=$ROOT/results/fuzz
mkdir -p "$OUT"
nvidia-smi -L >/dev/null 2>&1 || export TRITON_INTERPRET=1
export PYTHONPATH=$ROOT
unset CI
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
ln -s "$ROOT/examples" "$scratch/examples"

header() {
    echo "# saved by scripts/fuzz_transcripts.sh on $(git -C "$ROOT" log --format=%h -1) at $(date -u +%FT%TZ)"
    echo "# machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(uname -m);" \
        "$("$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)');" \
        "TRITON_INTERPRET=${TRITON_INTERPRET:-0}"
}

step() { # shown command, then the command run
    local shown=$1
    shift
    echo "\$ $shown"
    (cd "$scratch" && "$@" 2>&1)
    local status=$?
    echo "\$ echo \$?"
    echo "$status"
}

csa() { step "csa $*" "$PY" -m csa.cli "$@"; }

transcript() { # name function
    [ -n "${ONLY:-}" ] && [ "$ONLY" != "$1" ] && return
    rm -rf "$scratch/repro" "$scratch/report.json"
    { header; "$2"; } >"$OUT/$1.txt"
    echo "wrote $OUT/$1.txt"
}

broken_topk() {
    csa fuzz --op topk --impl examples/broken_topk.py:topk --convention v4.1 --report report.json
    local repro
    repro=$(cd "$scratch" && ls repro/repro_topk_*.py)
    step "python $repro" "$PY" "$repro"
    step "python $repro --in-process" "$PY" "$repro" --in-process
}

project_topk() {
    csa fuzz --op topk --impl fast.indexing.entry_points:topk_v41
}

misbehaving() {
    csa fuzz --op topk --impl examples/misbehaving.py:hangs --timeout 2 --shrink-seconds 10 --property topk_equals_reference
    csa fuzz --op topk --impl examples/misbehaving.py:segfaults --keep-going --shrink-seconds 5 \
        --property topk_equals_reference --property topk_lane_layout
    csa fuzz --op topk --impl examples/misbehaving.py:clears_garbage --property topk_equals_reference
    csa fuzz --op quantize_store --impl examples/misbehaving.py:store_past_end --convention v41_fp8_528 \
        --property quant_store_matches_reference
}

usage() {
    touch "$scratch/afile"
    csa fuzz --op topk --impl examples/broken_topk.py:topk --convention v4.1 --report afile/report.json
    csa fuzz --self-test --max-examples -5
    csa fuzz --list --op nope
    csa fuzz --list --op topk
}

self_test() {
    csa fuzz --self-test
}

triton_store() {
    csa fuzz --op quantize_store --impl examples/triton_index_store.py:store --convention index_fp8_132+f32_scale \
        --leave-out bad_input
}

transcript broken_topk broken_topk
transcript project_topk project_topk
transcript misbehaving misbehaving
transcript usage usage
transcript self_test self_test
transcript triton_store triton_store
