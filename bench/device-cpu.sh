#!/usr/bin/env bash
# Issue 16 on the GPU machine: impossible sizes fail fast with an out-of-memory message (no
# backtrace, non-zero exit, well under 10 s), the library test of the same, the profile
# warnings, and the changed GELU maths on the GPU (tests and bench rows). Run from an unpacked
# carry: `xtask` and `ferrotune_tests` in $BIN (default: the directory of this script).
# Results: $OUT/oom-*.txt, $OUT/elementwise-*.{txt,json} and a summary table on stdout.
set -uo pipefail
BIN=${BIN:-$(cd "$(dirname "$0")" && pwd)}
OUT=${OUT:-/tmp}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 FERROTUNE_REQUIRE_GPU=1
fail=0
# name, then the command: must exit non-zero in < 10 s, say "out of memory", print no backtrace.
oom() {
    local name=$1
    shift
    local t0 t1 rc ms
    t0=$(date +%s%N)
    timeout 60 "$@" >"$OUT/oom-$name.txt" 2>&1
    rc=$?
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    local verdict=ok
    if [ "$rc" -eq 0 ] || ! grep -q "out of memory" "$OUT/oom-$name.txt" || grep -qi "backtrace\|panicked" "$OUT/oom-$name.txt" \
        || [ "$ms" -gt 10000 ]; then
        verdict=FAIL
        fail=1
    fi
    printf '%-24s rc %-3s %6d ms  %s  %s\n' "$name" "$rc" "$ms" "$verdict" "$(grep -m1 'out of memory' "$OUT/oom-$name.txt")"
}
oom bench-sizes-200000 "$BIN/xtask" bench --sizes 200000
oom gemm-300000 "$BIN/xtask" bench --ops gemm --shapes 300000x300000x300000 --dtypes bf16
oom cpu-bench-sizes-100000 "$BIN/xtask" bench --backend cpu --sizes 100000
"$BIN/ferrotune_tests" impossible_sizes_are_out_of_memory_errors profile_warnings 2>&1 | tail -3 | tee "$OUT/oom-tests.txt"
grep -q "test result: ok" "$OUT/oom-tests.txt" || fail=1
# The GELU maths changed (cut-offs, shorter fits): GPU against CPU against f64 on every variant,
# then the GELU rows beside the copy ceiling (they were 0.95-1.04 of copy before the change).
"$BIN/ferrotune_tests" elementwise 2>&1 | tail -3 | tee "$OUT/elementwise-tests.txt"
grep -q "test result: ok" "$OUT/elementwise-tests.txt" || fail=1
"$BIN/xtask" bench --ops copy,gelu_erf,gelu_tanh,add_mul_gelu_erf,add_mul_gelu_tanh --dtypes f32,f16,bf16 \
    --json "$OUT/elementwise-gelu-h100.json" 2>&1 | tail -20 | tee "$OUT/elementwise-gelu.txt"
exit $fail
