#!/usr/bin/env bash
# What the supervised worker costs a passing run: the project's Triton top-k under `csa fuzz`, before the
# isolation (the tree at BEFORE, extracted with git archive) and now, supervised and --in-process, ROUNDS times
# each, interleaved so that a change in the machine's load falls on all three alike.
#
#   scripts/fuzz_timing.sh                 # writes results/fuzz/timing.txt
#
# Environment: PYTHON (default .venv/bin/python), BEFORE (default 2b296f2, the commit before issue 16),
# ROUNDS (default 2), OUT (default results/fuzz/timing.txt), SUMMARY_ONLY=1 (only append the summary of the
# rounds already in OUT). On a machine without a GPU, Triton runs interpreted.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
BEFORE=${BEFORE:-2b296f2}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-results/fuzz/timing.txt}
mkdir -p "$(dirname "$OUT")"

summary() { # the mean wall time of each configuration over the rounds, and the supervised run's ratio to before
    awk -F'  +' '/^round/ { sub(/^round [0-9]+: /, "", $1); t[$1] += $3; n[$1]++ }
        END {
            for (k in t) if (k ~ /^before/) b = t[k] / n[k]; else if (k ~ /supervised/) s = t[k] / n[k]; else i = t[k] / n[k]
            printf "\nmean wall: before %.1f s, supervised worker %.1f s (%.2fx before), --in-process %.1f s (%.2fx)\n", b, s, s / b, i, i / b
        }' "$OUT"
}
if [ -n "${SUMMARY_ONLY:-}" ]; then
    summary | tee -a "$OUT"
    exit 0
fi
nvidia-smi -L >/dev/null 2>&1 || export TRITON_INTERPRET=1
old=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$old" "$work"' EXIT
git archive "$BEFORE" | tar -x -C "$old"
ARGS=(--op topk --impl fast.indexing.entry_points:topk_v41)

run() { # label tree extra-args...
    local label=$1 tree=$2
    shift 2
    local start end
    start=$(date +%s.%N)
    (cd "$work" && PYTHONPATH="$tree" "$PY" -m csa.cli fuzz "${ARGS[@]}" "$@" >"$work/log" 2>&1) || {
        cat "$work/log"
        exit 1
    }
    end=$(date +%s.%N)
    printf '%-44s wall %6.1f s   %s\n' "$label" "$(echo "$end - $start" | bc)" "$(grep '^PASS' "$work/log")"
}

{
    echo "csa fuzz ${ARGS[*]} (profile dev, seed 0), each run in a fresh process"
    echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores" \
        "$(lscpu | sed -n 's/^Hypervisor vendor: *\(.*\)/(\1 guest)/p'); $(uname -sm)"
    "$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
    echo "TRITON_INTERPRET=${TRITON_INTERPRET:-0}; measured $(date -u +%FT%TZ) on $(git log --oneline -1 | cut -c1-60)"
    echo
    for round in $(seq "$ROUNDS"); do
        run "round $round: before ($BEFORE, in process)" "$old"
        run "round $round: now, supervised worker" "$PWD"
        run "round $round: now, --in-process (guards only)" "$PWD" --in-process
    done
} | tee "$OUT"
summary | tee -a "$OUT"
