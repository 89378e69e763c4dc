#!/usr/bin/env bash
# One device call for the Clifford layer ops (issue 15), from an unpacked carry: the binaries in
# $BIN (default .carry, as `bench/prepare-carry.sh` packs them; the script unpacks
# bins.tar.xz there if needed) and the torch peer beside this script or in benches/.
#   1. GPU tests (forward/backward/FCGP against the f64 reference and the CPU, every compiled
#      variant, N = 100,000, FCGP TF32 against exact f32, the PTX entry check);
#   2. our bench: fwd and fwd+bwd (2D, 3D, f32, norm on) at the issue's sizes and N = 100,000
#      with the copy ceiling, then `fwd_sweep` / `fwdbwd_sweep` (every forward / backward
#      config checked and timed, the fastest kept, all listed in the JSON) at B4096;
#   3. the torch peers in the same call (started first, in the background, so that they overlap
#      our PTX JIT, which is CPU work; our tests and timings wait for them): eager,
#      torch.compile default (static shapes) and mode max-autotune-no-cudagraphs at B4096 N512,
#      eager + compile at N 777 and 1024 (each timed per call and back-to-back, the better kept);
#   4. `profile explain --op clifford` for a few shapes (the config the heuristic gives here);
#   5. compute-sanitizer memcheck and racecheck on the Clifford GPU tests (SKIP_SAN=1 skips).
# Knobs: TEST_FILTER (test names), SHAPES, SWEEP_SHAPES, T_* timeouts, SKIP_TORCH2, TORCH1_IMPLS
# (add compile_max for torch.compile mode max-autotune-no-cudagraphs; it timed out at 110 s),
# SKIP_TORCH (no torch peer), SWEEP_ROWS, SAN_FILTER, FULL=1 (also the second torch call, the sweeps and the
# sanitizers; without it, the default for the final combined run, the call takes about 2 minutes:
# torch at B4096 N512, the tests, the bench rows, FCGP beside our plain GEMM, `profile explain`).
# The FCGP step times `fcgp_gemm` (our plain GEMM on the FCGP's GEMM shape) in the same call and
# prints each FCGP forward's rate as a share of it.
# Results: $OUT/clifford-results.tgz (everything) and $OUT/results/ (the JSON, which carry
# device, driver, date and commit, the tests' log and the markdown table printed last).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-.carry}
if [ ! -x $BIN/ferrotune_tests ] && [ -f $BIN/bins.tar.xz ]; then xz -dc $BIN/bins.tar.xz | tar -C $BIN -xf -; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FERROTUNE_COMMIT=$(cat $BIN/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCHINDUCTOR_CACHE_DIR=$PWD/.inductor-cache TRITON_CACHE_DIR=$PWD/.triton-cache
# The embedded PTX (~25 MB, every family) is JIT-compiled at the first module load of each
# process, for a minute or more: a cache large enough for the result makes the later
# processes (bench, sweep, sanitizer) load it in a second. The first one must be let finish.
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-$PWD/.nv-cache}
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
TORCH_PY=$HERE/torch_clifford.py; [ -f $TORCH_PY ] || TORCH_PY=benches/torch_clifford.py
JOIN_PY=$HERE/clifford_join.py; [ -f $JOIN_PY ] || JOIN_PY=bench/clifford_join.py
# Everything goes to $R; at the end it is packed into $OUT/clifford-results.tgz and the main
# files are copied to $OUT/results/ (at most 8 files come back from a device call).
R=$(mktemp -d); mkdir -p $OUT/results
# After each step the main files so far go to $OUT/results (a call cut off at its limit still
# brings back what finished).
save() { cp $R/clifford-h100.json $R/clifford-sweep-h100.json $R/clifford-vs-torch-h100.md $R/clifford-tests.txt \
  $R/torch-clifford-h100.json $R/clifford-fcgp-h100.json $R/clifford-sanitizer.txt $OUT/results/ 2>/dev/null; true; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > $R/clifford-nvidia-smi.txt
# The torch peers start first, in the background, while one small test of ours pays the PTX
# JIT (CPU only: the GPU is idle but for that test's few launches); everything of ours that
# runs on the GPU at length (the tests, the timings) waits until torch is done.
stamp "=== torch peers (background) + PTX JIT"
[ -n "${FULL:-}" ] || { SKIP_TORCH2=1; T_TORCH1=${T_TORCH1:-65}; }
if [ -n "${SKIP_TORCH:-}" ]; then echo "torch skipped (SKIP_TORCH)" > $R/torch-clifford.txt; ( true ) & else
( timeout ${T_TORCH1:-110} python3 $TORCH_PY --no-check --sizes 4096x512 --ops fwd,fwdbwd \
    --impls ${TORCH1_IMPLS:-eager,compile} --compile-mode per-shape --out $R/torch-clifford-h100.json \
    > $R/torch-clifford.txt 2>&1; echo "torch exit $?" >> $R/torch-clifford.txt
  [ -n "${SKIP_TORCH2:-}" ] || timeout ${T_TORCH2:-60} python3 $TORCH_PY --no-check --sizes 4096x777,4096x1024 \
    --ops fwd,fwdbwd --impls eager,compile --compile-mode per-shape --out $R/torch-clifford-2-h100.json \
    >> $R/torch-clifford.txt 2>&1 ) &
fi
TORCH_PID=$!
timeout ${T_JIT:-150} $BIN/ferrotune_tests --test-threads=1 gpu_clifford_fcgp_tf32 > $R/clifford-jit.txt 2>&1
echo "JIT warm-up exit $?"
stamp "=== waiting for torch"
wait $TORCH_PID
grep -E "^[23]D|exit" $R/torch-clifford.txt | head -40
stamp "=== Clifford GPU tests"
timeout ${T_TESTS:-120} $BIN/ferrotune_tests --test-threads=1 --nocapture ${TEST_FILTER:-gpu_clifford every_entry} > $R/clifford-tests.txt 2>&1
echo "tests exit $?"; grep -E "test result|cases|panicked|N = 100000|skipped" $R/clifford-tests.txt | head; save
stamp "=== Clifford bench"
SHAPES=${SHAPES:-4096x512,4096x777,4096x1024,8192x1024,16x100000}
timeout ${T_BENCH:-60} $BIN/xtask bench --ops clifford --clifford-rows fwd,fwdbwd --shapes $SHAPES \
  --json $R/clifford-h100.json > $R/clifford-bench.txt 2>&1
echo "bench exit $?"; grep -E "copy ceiling|d[23] " $R/clifford-bench.txt; save
stamp "=== FCGP forward (tensor cores: TF32 for f32, bf16 natively)"
timeout ${T_FCGP:-40} $BIN/xtask bench --ops clifford --clifford-rows fcgp_fwd,fcgp_gemm --dtypes f32,bf16 \
  --shapes ${FCGP_SHAPES:-4096x512,4096x1024} --json $R/clifford-fcgp-h100.json > $R/clifford-fcgp.txt 2>&1
echo "fcgp exit $?"; grep -E "d[23] |error" $R/clifford-fcgp.txt; save
if [ -n "${FULL:-}" ]; then
stamp "=== Clifford sweep"
timeout ${T_SWEEP:-150} $BIN/xtask bench --ops clifford --clifford-rows ${SWEEP_ROWS:-fwd_sweep,fwdbwd_sweep} \
  --shapes ${SWEEP_SHAPES:-4096x512,4096x1024} \
  --json $R/clifford-sweep-h100.json > $R/clifford-sweep.txt 2>&1
echo "sweep exit $?"; grep -E "d[23] " $R/clifford-sweep.txt; save
SUM_PY=$HERE/clifford_sweep_summary.py; [ -f $SUM_PY ] || SUM_PY=bench/clifford_sweep_summary.py
[ -f $R/clifford-sweep-h100.json ] && python3 $SUM_PY $R/clifford-sweep-h100.json --heuristic $R/clifford-h100.json \
  --out $R/clifford-sweep-summary.md | cut -c1-400
fi
stamp "=== what the heuristic gives (profile explain)"
for sh in 2x4096x512 2x4096x777 3x4096x512 3x4096x1024; do
  $BIN/xtask profile explain --op clifford --dtype f32 --shape $sh 2>&1 | grep -v "^warning"
done > $R/clifford-explain.txt; cat $R/clifford-explain.txt
if [ -n "${SKIP_SAN:-}" ] || [ -z "${FULL:-}" ]; then SKIP_RACE=1; echo "sanitizers skipped (SKIP_SAN, or no FULL)"; else
stamp "=== compute-sanitizer"
FERROTUNE_TEST_SMALL=1 timeout ${T_SAN:-60} compute-sanitizer --tool memcheck --error-exitcode 9 $BIN/ferrotune_tests \
  --test-threads=1 ${SAN_FILTER:-gpu_clifford_forward gpu_clifford_backward} > $R/clifford-memcheck.txt 2>&1
echo "memcheck: exit $? $(grep -E 'ERROR SUMMARY' $R/clifford-memcheck.txt | tail -1)"
[ -n "${SKIP_RACE:-}" ] || FERROTUNE_TEST_SMALL=1 timeout ${T_SAN2:-40} compute-sanitizer --tool racecheck --error-exitcode 9 $BIN/ferrotune_tests \
  --test-threads=1 ${SAN_FILTER:-gpu_clifford_forward gpu_clifford_backward} > $R/clifford-racecheck.txt 2>&1
echo "racecheck: exit $? $(grep -E 'RACECHECK SUMMARY' $R/clifford-racecheck.txt 2>/dev/null | tail -1)"
{ grep -E "ERROR SUMMARY|test result" $R/clifford-memcheck.txt; grep -E "RACECHECK SUMMARY|test result" $R/clifford-racecheck.txt; } \
  > $R/clifford-sanitizer.txt 2>/dev/null; save
fi
stamp "=== ours vs torch"
python3 $JOIN_PY $R/clifford-h100.json $R/torch-clifford-h100.json $(ls $R/torch-clifford-2-h100.json 2>/dev/null) \
  --out $R/clifford-vs-torch-h100.md 2>&1 | tail -25
tar -czf $OUT/clifford-results.tgz -C $R .
cp $R/clifford-h100.json $R/clifford-sweep-h100.json $R/clifford-vs-torch-h100.md $R/clifford-tests.txt \
  $R/torch-clifford-h100.json $R/clifford-fcgp-h100.json $OUT/results/ 2>/dev/null
ls $OUT/results
