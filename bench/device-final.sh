#!/usr/bin/env bash
# The device calls that produce the committed H100 results (see bench/NOTES.md), from the
# binaries `bench/prepare-carry.sh` packed into .carry/. PARTS picks what runs (two calls fit
# the 10-minute limit: PARTS=tests,gemm,clifford then PARTS=tune,torch,elementwise):
#   tests      GPU test suite (a skip fails), compute-sanitizer memcheck/racecheck/synccheck
#   gemm       GEMM vs cuBLAS / cuBLAS strided-batched / cuBLASLt GELU_BIAS, all-tiles sweep
#   clifford   Clifford bench (ours, copy ceiling)
#   tune       GEMM autotuning demos (bench/device-tune-gemm.sh)
#   torch      torch eager/compile peers of the Clifford ops and the elementwise ops
#   elementwise the elementwise report (JSON, markdown, trace)
# Everything lands in $OUT/results/ and is packed into $OUT/results.tgz.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FERROTUNE_COMMIT=$(cat .carry/commit) FERROTUNE_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
PARTS=${PARTS:-tests,gemm,clifford}
R=$OUT/results; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
if [[ $PARTS == *tests* ]]; then
  echo "=== GPU tests"
  timeout 300 .carry/ferrotune_tests --test-threads=1 --nocapture gpu_ errors ptx public_wrappers gemm split_k clifford \
    every_entry > $R/tests.txt 2>&1
  echo "tests exit $?"; grep -E "test result|cases|panicked" $R/tests.txt | head -20
  echo "=== compute-sanitizer"
  for tool in memcheck racecheck synccheck; do
    FERROTUNE_TEST_SMALL=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 .carry/ferrotune_tests \
      --test-threads=1 gpu_matches gpu_sum gpu_gemm_matches gpu_gemm_every_tile gemm_pointer_array gpu_split_k_random \
      gpu_clifford_forward gpu_clifford_backward > $R/sanitizer-$tool.txt 2>&1
    echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer-$tool.txt | tail -1)"
  done
fi
if [[ $PARTS == *gemm* ]]; then
  echo "=== GEMM vs cuBLAS"
  timeout 200 .carry/xtask bench --ops gemm --dtypes f32,tf32,f16,bf16 --json $R/gemm-h100.json > $R/gemm.txt 2>&1
  echo "gemm exit $?"; cut -c1-170 $R/gemm.txt
  echo "=== GEMM tiles"
  timeout 150 .carry/xtask bench --ops gemm-tiles --dtypes bf16,tf32 --iters 10 --warmup 2 \
    --shapes 8192x8192x8192,4096x4096x4096,512x3072x768,8192x3072x768 --json $R/gemm-tiles-h100.json > $R/gemm-tiles.txt 2>&1
  echo "tiles exit $?"; grep -E "best|WRONG" $R/gemm-tiles.txt | cut -c1-120
fi
if [[ $PARTS == *clifford* ]]; then
  echo "=== Clifford bench"
  timeout 240 .carry/xtask bench --ops clifford --json $R/clifford-h100.json > $R/clifford-bench.txt 2>&1
  echo "clifford exit $?"; cut -c1-160 $R/clifford-bench.txt
fi
if [[ $PARTS == *tune* ]]; then
  PARTS=a,b,c bash bench/device-tune-gemm.sh
  cp -r $OUT/tune-gemm $R/ && rm -rf $OUT/tune-gemm $OUT/tune-gemm.tgz
fi
if [[ $PARTS == *torch* ]]; then
  echo "=== torch Clifford peers"
  timeout 300 python3 benches/torch_clifford.py --compile-mode dynamic --out $R/torch-clifford-h100.json > $R/torch-clifford.txt 2>&1
  echo "torch exit $?"; tail -40 $R/torch-clifford.txt | cut -c1-160
fi
if [[ $PARTS == *elementwise* ]]; then
  echo "=== elementwise bench"
  timeout 300 .carry/xtask bench --json $R/elementwise-h100.json --markdown $R/elementwise-h100.md \
    --trace $R/elementwise-h100-trace.json > $R/bench.txt 2>&1
  echo "bench exit $?"; tail -3 $R/bench.txt
fi
tar -czf $OUT/results.tgz -C $OUT results
rm -rf $R
