#!/usr/bin/env bash
# One device call for the host runtime (issue 13): `xtask bench --ops runtime` (JSON) and
# torch's side of it in the same call (benches/torch_runtime.py, joined table with the
# targets), the runtime GPU tests, and compute-sanitizer memcheck on the pool and graph tests.
# Run from an unpacked carry: binaries in .carry/ (bench/prepare-carry.sh; this script unpacks
# bins.tar.xz when needed); DIR (default .carry) holds torch_runtime.py. About 4 minutes.
set -uo pipefail
DIR=${DIR:-.carry}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export FERROTUNE_COMMIT=$(cat .carry/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1
R=${OUT:-.}/results; mkdir -p "$R"
if [ -f .carry/bins.tar.xz ] && [ ! -x .carry/xtask ]; then xz -dc .carry/bins.tar.xz | tar -C .carry -xf -; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "=== runtime bench"
timeout 70 .carry/xtask bench --ops runtime --json "$R/runtime-h100.json" > "$R/runtime-bench.txt" 2>&1
echo "bench exit $?"; tail -25 "$R/runtime-bench.txt"
echo "=== torch runtime (same call)"
timeout 60 python3 "$DIR/torch_runtime.py" --json "$R/torch-runtime-h100.json" --ours "$R/runtime-h100.json" \
  > "$R/torch-runtime.txt" 2>&1
echo "torch exit $?"; cat "$R/torch-runtime.txt"
echo "=== runtime GPU tests"
timeout 50 .carry/ferrotune_tests --test-threads=1 runtime:: > "$R/runtime-tests.txt" 2>&1
echo "tests exit $?"; grep -E "^test |test result|panicked" "$R/runtime-tests.txt" | tail -20
echo "=== compute-sanitizer memcheck (pool and graph tests)"
timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 .carry/ferrotune_tests --test-threads=1 \
  runtime::graph_replay runtime::allocations_inside runtime::steady_state runtime::overlap \
  > "$R/runtime-memcheck.txt" 2>&1
echo "memcheck exit $? $(grep -E 'ERROR SUMMARY' "$R/runtime-memcheck.txt" | tail -1)"
grep -E "test result" "$R/runtime-memcheck.txt" | tail -1
