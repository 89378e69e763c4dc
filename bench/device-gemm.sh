#!/usr/bin/env bash
# One device call for the GEMM work: GPU GEMM tests, every tile on the shapes,
# Nsight Compute on two tiles, the cuBLAS comparison, and compute-sanitizer on the GEMM tests.
# Results land in $OUT/results/ and are packed into $OUT/results.tgz.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FERROTUNE_COMMIT=$(cat .carry/commit) FERROTUNE_REQUIRE_GPU=1
R=$OUT/results; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
echo "=== GEMM tests"
timeout 300 .carry/ferrotune_tests --test-threads=1 --nocapture gemm split_k > $R/gemm-tests.txt 2>&1
echo "tests exit $?"; grep -E "test result|cases|panicked|FAILED" $R/gemm-tests.txt | head -20
echo "=== tiles"
timeout 240 .carry/xtask bench --ops gemm-tiles --dtypes ${TILE_DTYPES:-bf16,tf32} --iters 10 --warmup 2 \
  --shapes ${TILE_SHAPES:-8192x8192x8192,4096x4096x4096,1000x3000x700,512x3072x768,8192x3072x768} \
  --json $R/gemm-tiles.json > $R/gemm-tiles.txt 2>&1
echo "tiles exit $?"; grep -E "best|WRONG|rror" $R/gemm-tiles.txt | head -40
echo "=== GEMM vs cuBLAS"
timeout 200 .carry/xtask bench --ops gemm --dtypes f32,tf32,f16,bf16 --json $R/gemm-h100.json > $R/gemm.txt 2>&1
echo "gemm exit $?"; cat $R/gemm.txt | cut -c1-160
if [ -z "${SKIP_NCU:-}" ]; then
  echo "=== ncu"
  for t in ${NCU_TILES:-128x128x32w2x4s4 128x256x32w2x4s3}; do
    timeout 120 ncu -k regex:ft_gemm_bf16_rc_v16_bf16_$t --launch-count 1 --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      .carry/xtask bench --ops gemm-tiles --dtypes bf16 --iters 1 --warmup 0 --shapes 4096x4096x4096 > $R/ncu-$t.txt 2>&1
    echo "ncu $t exit $?"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers|Achieved Occupancy|Stall|Issue Slots|Bank" $R/ncu-$t.txt | head -20
  done
fi
echo "=== sanitizer"
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 .carry/ferrotune_tests --test-threads=1 \
    gpu_gemm_every_tile gemm_pointer_array gpu_split_k_random_shapes > $R/sanitizer-gemm-$tool.txt 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer-gemm-$tool.txt | tail -1)"
done
tar -czf $OUT/results.tgz -C $OUT results
