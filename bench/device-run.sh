#!/usr/bin/env bash
# Runs on the GPU machine (see bench/NOTES.md): device info, the GPU test suite, compute-
# sanitizer on the kernels, the elementwise bench with the config sweep, torch peers.
# Expects .carry/ from bench/prepare-carry.sh; writes everything under $OUT.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FERROTUNE_COMMIT=$(cat .carry/commit)
export FERROTUNE_REQUIRE_GPU=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T="${TESTS:-gpu_ errors ptx public_wrappers}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/nvidia-smi.txt"
.carry/xtask info 2>&1 | tee "$OUT/info.txt"
[ "${TESTS_RUN:-1}" = 1 ] && echo "=== GPU tests" && timeout 300 .carry/ferrotune_tests --test-threads=1 $T 2>&1 | tee "$OUT/tests.txt" | tail -25
if [ "${SANITIZE:-1}" = 1 ]; then
  # Kernel launches under each tool: every elementwise entry (small sizes) and the reduction.
  echo "=== compute-sanitizer"
  for tool in memcheck racecheck synccheck; do
    FERROTUNE_TEST_SMALL=1 timeout 170 compute-sanitizer --tool $tool --error-exitcode 9 .carry/ferrotune_tests --test-threads=1 --nocapture gpu_ \
      > "$OUT/sanitizer-$tool.txt" 2>&1
    echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.txt" | tail -1)"
    grep -E "cases|test result" "$OUT/sanitizer-$tool.txt"
  done
fi
[ "${BENCH:-1}" = 1 ] || exit 0
echo "=== bench"
timeout 400 .carry/xtask bench ${BENCH_ARGS:---sweep} --json "$OUT/elementwise.json" 2>&1 | tee "$OUT/bench.txt" | tail -45
if [ "${TORCH:-1}" = 1 ]; then
  echo "=== torch"
  timeout 300 python3 benches/torch_elementwise.py --json "$OUT/torch-elementwise.json" 2>&1 | tail -45
fi
