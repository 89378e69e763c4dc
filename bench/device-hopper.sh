#!/usr/bin/env bash
# One device call for the Hopper GEMM path (issue 11): the sm90 GPU tests (heuristic tiles,
# then each forced tile), a tile sweep of `bench --ops gemm` (bf16), the full bench (bf16,
# f16; every row names its path) with the torch peer when main's tree has
# benches/torch_gemm.py, compute-sanitizer memcheck/racecheck/synccheck on the sm90 tests,
# and Nsight Compute on the 8192^3 bf16 kernel. Run from the repository root with the carry in
# .carry/ (bench/prepare-carry.sh, then copy this script). Results land in $OUT/results/ and
# are packed into $OUT/hopper-results.tgz.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export FERROTUNE_COMMIT=$(cat .carry/commit) FERROTUNE_REQUIRE_GPU=1
R=$OUT/results; mkdir -p $R
T=.carry/ferrotune_tests; X=.carry/xtask
SHAPES=${SHAPES:-8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,512x3072x768}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
echo "=== sm90 tests"
timeout 150 $T --test-threads=1 --nocapture sm90_ > $R/sm90-tests.txt 2>&1
echo "tests exit $?"; grep -E "^test |test result|panicked|skipped" $R/sm90-tests.txt | head -20
for t in ${FORCED_TILES-0 2 3}; do
  FERROTUNE_SM90_TILE=$t timeout 60 $T --test-threads=1 sm90_edge sm90_strided > $R/sm90-tests-tile$t.txt 2>&1
  echo "tile $t tests exit $?: $(grep 'test result' $R/sm90-tests-tile$t.txt)"
done
for t in ${SWEEP_TILES:-}; do
  echo "=== sweep: tile $t (bf16)"
  FERROTUNE_SM90_TILE=$t FERROTUNE_BENCH_NO_SPLIT=1 timeout 60 $X bench --ops gemm --dtypes bf16 --shapes $SHAPES \
    --iters 20 --warmup 5 > $R/sweep-tile$t.txt 2>&1
  echo "tile $t exit $?"; grep -E "^(gemm|linear_bias_gelu) " $R/sweep-tile$t.txt | cut -c1-150
done
echo "=== bench --ops gemm"
FERROTUNE_BENCH_NO_SPLIT=${BENCH_NO_SPLIT:-1} timeout ${BENCH_TIMEOUT:-120} $X bench --ops gemm --dtypes ${DTYPES:-bf16,f16} \
  --shapes $SHAPES --json $R/gemm-hopper.json > $R/gemm.txt 2>&1
echo "gemm exit $?"; cut -c1-190 $R/gemm.txt
if [ -f benches/torch_gemm.py ] && [ -z "${SKIP_TORCH:-}" ]; then
  echo "=== torch peer"
  timeout 90 python3 benches/torch_gemm.py --shapes $SHAPES --dtypes ${DTYPES:-bf16,f16} --gelu 8192x3072x768,512x3072x768 \
    --json $R/torch-gemm.json > $R/torch.txt 2>&1
  echo "torch exit $?"; tail -25 $R/torch.txt | cut -c1-160
fi
echo "=== sanitizer"
for tool in memcheck racecheck synccheck; do
  for t in ${SANITIZE_TILES-default 2}; do
    [ "$t" = default ] && unset FERROTUNE_SM90_TILE || export FERROTUNE_SM90_TILE=$t
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 sm90_strided sm90_falls_back \
      > $R/sanitizer-sm90-$tool-$t.txt 2>&1
    echo "$tool tile $t: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer-sm90-$tool-$t.txt | tail -1)"
  done
done
unset FERROTUNE_SM90_TILE
if [ -z "${SKIP_NCU:-}" ]; then
  echo "=== ncu 8192^3 bf16"
  FERROTUNE_BENCH_NO_SPLIT=1 timeout 90 ncu -k regex:ft_gemm90_bf16_rc_bf16 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis $X bench --ops gemm --dtypes bf16 --iters 1 --warmup 0 --shapes 8192x8192x8192 \
    > $R/ncu-sm90-8192.txt 2>&1
  echo "ncu exit $?"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers|Achieved Occupancy|Issue Slots" $R/ncu-sm90-8192.txt | head -12
fi
tar -czf $OUT/hopper-results.tgz -C $OUT results
