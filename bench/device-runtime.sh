#!/usr/bin/env bash
# One device call for the host runtime (issue 13): torch's side of the runtime bench
# (benches/torch_runtime.py) while the driver JIT-compiles our PTX into its cache (`xtask
# info`; the 23 MB module takes over a minute on a fresh machine), then `xtask bench --ops
# runtime` (JSON) and the joined table with the targets, the runtime GPU tests, and
# compute-sanitizer memcheck on the pool and graph tests while BUDGET seconds (default 230)
# last (BUDGET >= 300: torch waits for the warm-up and runs alone). Run from an unpacked carry: binaries in .carry/ (bench/prepare-carry.sh; this script
# unpacks bins.tar.xz when needed); DIR holds torch_runtime.py (default: .carry if it is
# there, else benches/ of the tree).
set -uo pipefail
START=$(date +%s)
left() { echo $(( ${BUDGET:-230} - ($(date +%s) - START) )); }
DIR=${DIR:-$( [ -f .carry/torch_runtime.py ] && echo .carry || echo benches )}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat .carry/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296
R=${OUT:-.}/results; mkdir -p "$R"
if [ -f .carry/bins.tar.xz ] && [ ! -x .carry/xtask ]; then xz -dc .carry/bins.tar.xz | tar -C .carry -xf -; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/runtime-nvidia-smi.txt"
( timeout 170 .carry/xtask info > "$R/runtime-jit-warmup.txt" 2>&1
  echo "JIT warm-up exit $? after $(( $(date +%s) - START )) s" >> "$R/runtime-jit-warmup.txt" ) &
WARM=$!
# With time to spare, torch runs alone (its pinned H2D dropped from 54 to 33 GB/s beside the
# JIT in the 230-second call); in a tight budget it overlaps the warm-up.
if [ "${BUDGET:-230}" -ge 300 ]; then wait $WARM; fi
echo "=== torch runtime"
timeout 70 python3 "$DIR/torch_runtime.py" --json "$R/torch-runtime-h100.json" > "$R/torch-runtime.txt" 2>&1
echo "torch exit $?"; cat "$R/torch-runtime.txt"
wait $WARM; tail -2 "$R/runtime-jit-warmup.txt"
echo "=== runtime bench ($(left) s left)"
timeout $(( $(left) > 90 ? 80 : $(left) - 10 )) .carry/xtask bench --ops runtime --json "$R/runtime-h100.json" \
  > "$R/runtime-bench.txt" 2>&1
echo "bench exit $?"; tail -28 "$R/runtime-bench.txt"
python3 "$DIR/torch_runtime.py" --join --json "$R/torch-runtime-h100.json" --ours "$R/runtime-h100.json" \
  | tee "$R/runtime-vs-torch.txt"
echo "=== runtime GPU tests ($(left) s left)"
timeout $(( $(left) - 3 )) .carry/ferrotune_tests --test-threads=1 runtime:: > "$R/runtime-tests.txt" 2>&1
echo "tests exit $?"; grep -E "^test |test result|panicked|assert" "$R/runtime-tests.txt" | tail -24
if [ "$(left)" -gt 40 ]; then
  echo "=== compute-sanitizer memcheck ($(left) s left)"
  timeout $(( $(left) - 3 )) compute-sanitizer --tool memcheck --error-exitcode 9 .carry/ferrotune_tests --test-threads=1 \
    runtime::graph_replay runtime::allocations_inside runtime::steady_state runtime::overlap \
    > "$R/runtime-memcheck.txt" 2>&1
  echo "memcheck exit $? $(grep -E 'ERROR SUMMARY' "$R/runtime-memcheck.txt" | tail -1)"
  grep -E "test result" "$R/runtime-memcheck.txt" | tail -1
else
  echo "memcheck skipped: $(left) s left (set BUDGET higher)"
fi
