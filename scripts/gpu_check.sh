#!/usr/bin/env bash
# The one command for a CUDA machine whose python3 already has torch and Triton (no network needed):
# the whole test suite with the Triton kernels compiled (no TRITON_INTERPRET), then the benchmarks.
#
#   scripts/gpu_check.sh [all|tests|bench|fuzz|profile|peers]   # default: all (tests, then bench)
#
# peers: the engines' kernels of csa/peers/ judged by csa fuzz on the GPU, compiled (not part of all; docs/peers.md):
# needs the unpacked wheels, .peers/carry (make peers writes it; carry it to the machine) or .peers/src, and no
# network. Writes $OUT/peers.md (the results page), $OUT/peers/ (each kernel's log and JSON report) and
# $OUT/peers.log (with the output of results/peers/'s standalone reproducers, compiled); PEERS_ARGS: extra arguments of python -m csa.peers.run (its defaults: 20 examples a property, as on the CPU; about 7 minutes on two CPU cores); the kernels are judged half the cores at a time (--jobs).
#
# fuzz: `csa fuzz --device cuda --sanitize` on the project's Triton top-k and on one compression kernel (exit 0
# expected; not part of all). The GPU tests of the supervised worker, the guards and --sanitize (a kernel writing
# one byte past its output, a far out-of-bounds read reported with the run going on, memcheck's first error) are in
# tests/ and run in the tests phase.
#
# tests: the suite under the Hypothesis profile `gpu` (CSA_PROFILE; 20 examples a property, production shapes).
# One device command (10 minutes) does not hold the whole suite: run PYTEST_ARGS=tests (about 6 minutes on an
# H100, 14 workers) and the properties in two, PYTEST_ARGS="properties -k ladder" and PYTEST_ARGS="properties -k
# 'not ladder'" (the whole took over 7 minutes on an H100). outcomes.txt lists every test's outcome.
#
# profile: ncu (Nsight Compute) on one kernel launch of each benchmark case in PROFILE_CASES (space-separated
# "CASE:KERNEL_REGEX" pairs), the sections that show the limiting resource; output ncu.txt. PROFILE_SKIP (default 2)
# and PROFILE_COUNT (default 1): the matching launches skipped, then profiled (a case of several kernels: all of one call).
#
# Output under $OUT (default ./gpu_out): env.txt; tests: tests.log, failed.txt, outcomes.txt; bench: bench.log,
# bench.json, bench.md, headline.png, roofline.png; fuzz: fuzz.log, fuzz_topk.json, fuzz_compression.json. Wheels in .whl/ (e.g. hypothesis, pytest, pytest-xdist) are installed into /tmp/site first, if
# present; with pytest-xdist the suite runs on all cores but two.
# Environment: PYTHON (default python3), BENCH_BUDGET_S (seconds after which the benchmark skips further
# torch.compile baselines except those of the cases with targets, default 300), BENCH_ARGS (extra fast.bench arguments, e.g. "--only compression/"),
# TESTS_TIMEOUT_S (seconds after which the test run is stopped, its log kept; default 3600),
# PYTEST_ARGS (extra pytest arguments, split as a command line: e.g. "tests/test_fast_cache.py -k 'fp8 and not ladder'").
set -uo pipefail
cd "$(dirname "$0")/.."
PHASE=${1:-all}
case "$PHASE" in all | tests | bench | fuzz | profile | peers) ;; *) echo "usage: $0 [all|tests|bench|fuzz|profile|peers]" >&2; exit 2 ;; esac
PY=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
unset TRITON_INTERPRET
export CI=1
export CSA_PROFILE=${CSA_PROFILE:-gpu} # derandomized, 20 examples a property (properties/profiles.py)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

{
    date -u +%FT%TZ
    nvidia-smi -L
    "$PY" -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'
    git log --oneline -1 2>/dev/null || true
    # the tree this run saw (tracked and untracked files git does not ignore), which a copied checkout's HEAD may not
    # be: equal to `git rev-parse COMMIT^{tree}` of the commit whose files these are
    index=$(mktemp) && cp .git/index "$index" 2>/dev/null && GIT_INDEX_FILE=$index git add -A 2>/dev/null &&
        echo "working tree: $(GIT_INDEX_FILE=$index git write-tree)"
    rm -f "${index:-}"
    echo "phase: $PHASE"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

status=0
if [ "$PHASE" = peers ]; then
    start=$SECONDS
    if [ -d .peers/carry ]; then export CSA_PEERS_DIR="$PWD/.peers/carry"; fi
    # shellcheck disable=SC2086
    "$PY" -m csa.peers.run --device cuda --jobs "$(($(nproc) / 2 > 1 ? $(nproc) / 2 : 1))" --out "$OUT/peers.md" \
        ${PEERS_ARGS:-} >"$OUT/peers.log" 2>&1
    status=$?
    for script in results/peers/repro_*.py results/peers/check_*.py; do # the verdicts' standalone scripts, compiled
        echo "== python $script" >>"$OUT/peers.log"
        "$PY" "$script" >>"$OUT/peers.log" 2>&1
        echo "exit status $?" >>"$OUT/peers.log"
    done
    echo "peers phase: status $status after $((SECONDS - start)) s" >>"$OUT/peers.log"
    tail -n 40 "$OUT/peers.log"
    exit "$status"
fi
if [ "$PHASE" = fuzz ]; then
    start=$SECONDS
    {
        sanitized() { # op impl: the whole run, then the first two examples of each property under memcheck
            echo "== csa fuzz --op $1 --impl $2 --device cuda --sanitize 2 --profile ci"
            "$PY" -m csa.cli fuzz --op "$1" --impl "$2" --device cuda --sanitize 2 --profile ci \
                --repro-dir "$OUT/repro" --report "$OUT/fuzz_$3.json"
            echo "csa fuzz exit status $?"
        }
        sanitized topk fast.indexing.entry_points:topk_v41 topk
        sanitized compression_decode 'registry:compression_decode:triton[read_then_write]' compression
    } >"$OUT/fuzz.log" 2>&1
    rm -rf "$OUT/repro"
    [ "$(grep -c 'csa fuzz exit status 0' "$OUT/fuzz.log")" = 2 ] || status=1
    echo "fuzz phase: status $status after $((SECONDS - start)) s" >>"$OUT/fuzz.log"
    tail -n 40 "$OUT/fuzz.log"
    exit "$status"
fi
if [ "$PHASE" = profile ]; then
    for pair in ${PROFILE_CASES:-}; do
        echo "== ncu ${pair%%:*} (kernel ${pair#*:})"
        ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis \
            -k "regex:${pair#*:}" --launch-skip "${PROFILE_SKIP:-2}" --launch-count "${PROFILE_COUNT:-1}" "$PY" -m fast.profile "${pair%%:*}" 2>&1 |
            grep -v "^==PROF==" || status=1
    done >"$OUT/ncu.txt"
    tail -n 20 "$OUT/ncu.txt"
    exit "$status"
fi
if [ "$PHASE" != bench ]; then
    start=$SECONDS
    # shellcheck disable=SC2086
    workers=()
    "$PY" -c "import xdist" 2>/dev/null && workers=(-n "$(($(nproc) > 2 ? $(nproc) - 2 : 1))")
    # PYTEST_ARGS split as the shell splits a command line, so a quoted -k expression stays one argument
    eval "pytest_args=(${PYTEST_ARGS:-})"
    # SIGINT at the time limit: pytest stops and still prints its summary; -v names every test as it ends, and
    # failed.txt keeps the names of those that failed or errored.
    timeout -s INT -k 30 "${TESTS_TIMEOUT_S:-3600}" "$PY" -m pytest -v -rfE --tb=short -p no:cacheprovider \
        ${workers[@]+"${workers[@]}"} ${pytest_args[@]+"${pytest_args[@]}"} >"$OUT/tests.full" 2>&1
    status=$?
    echo "pytest exit status $status after $((SECONDS - start)) s" >>"$OUT/tests.full"
    grep -E "^(FAILED|ERROR) |\] (FAILED|ERROR) " "$OUT/tests.full" | sort -u >"$OUT/failed.txt"
    # test ids may hold spaces (parametrized names): an outcome line is the outcome, then the whole id
    sed -n -E 's/^\[gw[0-9]+\] \[ *[0-9]+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.*[^ ]) *$/\1 \2/p; s/^(.+::.+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)( \[ *[0-9]+%\])? *$/\2 \1/p' \
        "$OUT/tests.full" | sort -u >"$OUT/outcomes.txt"
    grep -v -E "\] (PASSED|SKIPPED|XFAIL|XPASS) |PytestBenchmarkWarning|warner\(" "$OUT/tests.full" | tail -n 600 >"$OUT/tests.log"
    rm -f "$OUT/tests.full"
    tail -n 15 "$OUT/tests.log"
fi
if [ "$PHASE" != tests ]; then
    start=$SECONDS
    # shellcheck disable=SC2086
    "$PY" -m fast.bench --out "$OUT" --budget-s "${BENCH_BUDGET_S:-300}" ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
    bench_status=$?
    echo "fast.bench exit status $bench_status after $((SECONDS - start)) s" >>"$OUT/bench.log"
    tail -n 60 "$OUT/bench.log"
    [ "$bench_status" -ne 0 ] && status=$bench_status
fi
exit "$status"
