#!/usr/bin/env bash
# Issue 12 (irregular GEMM shapes) on the device, from the binaries `bench/prepare-carry.sh`
# packed into .carry/ (run from the repository root: `bash .carry/device-irregular.sh` with
# this script copied into the carry folder, or `bash bench/device-irregular.sh`):
#   tests   the small-M, pack, GEMM and split-K GPU tests (a skip fails), with
#           compute-sanitizer memcheck and racecheck on the small-M kernels beside them
#   suite   `bench --ops gemm --shape-suite irregular` (bf16, f16) against cuBLAS, JSON
#   torch   benches/torch_gemm.py on the suite's shapes (when the file exists), JSON
# PARTS picks (default all). Results land in $OUT/ (at most 8 files).
set -uo pipefail
C=${CARRY:-.carry}
if [ -f $C/bins.tar.xz ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export FERROTUNE_COMMIT=$(cat $C/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
PARTS=${PARTS:-tests,suite,torch}
OUT=${OUT:-/tmp/irregular-out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# The driver JIT-compiles the whole PTX module on first load (about 85 s on the H100 for this
# module size) and caches it: load it once, alone, before anything with a timeout runs (a
# process killed mid-JIT caches nothing, and the next one starts over).
t0=$(date +%s); timeout ${JIT_TIMEOUT:-300} $C/xtask info > /dev/null 2>&1; echo "JIT warm-up exit $? after $(( $(date +%s) - t0 )) s"
if [[ $PARTS == *tests* ]]; then
  # The sanitizers (correctness only) run beside the tests; timings come after, alone.
  for tool in memcheck racecheck; do
    timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool $tool --error-exitcode 9 $C/ferrotune_tests --test-threads=1 \
      gpu_small_m_split_k gpu_small_m_odd_view > $OUT/irregular-sanitizer-$tool.txt 2>&1 &
  done
  echo "=== GPU tests (small-M, pack, GEMM, split-K)"
  timeout ${TESTS_TIMEOUT:-150} $C/ferrotune_tests --test-threads=1 gemv:: pack:: ${MORE_TESTS-gpu_gemm_matches gpu_split_k} \
    > $OUT/irregular-tests.txt 2>&1
  echo "tests exit $?"; grep -E "test result|cases|panicked|FAILED" $OUT/irregular-tests.txt | head -20
  wait
  for tool in memcheck racecheck; do
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $OUT/irregular-sanitizer-$tool.txt | tail -2 | tr '\n' ' ')"
  done
fi
SHAPES="1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768"
if [[ $PARTS == *suite* ]]; then
  for dt in bf16 f16; do
    echo "=== irregular suite vs cuBLAS ($dt)"
    timeout ${SUITE_TIMEOUT:-150} $C/xtask bench --ops gemm --shape-suite irregular --dtypes $dt --warmup ${WARMUP:-3} \
      --iters ${ITERS:-20} --json $OUT/gemm-irregular-$dt-h100.json > $OUT/gemm-irregular-$dt.txt 2>&1
    echo "suite $dt exit $?"; cut -c1-190 $OUT/gemm-irregular-$dt.txt
  done
fi
if [[ $PARTS == *torch* ]] && [ -f benches/torch_gemm.py ]; then
  echo "=== torch x @ w.T on the suite"
  timeout ${TORCH_TIMEOUT:-180} python3 benches/torch_gemm.py --shapes $SHAPES --dtypes bf16,f16 --rotate --warmup 3 --iters 20 \
    --json $OUT/torch-gemm-irregular.json > /tmp/torch-gemm-irregular.txt 2>&1
  echo "torch exit $?"; tail -5 /tmp/torch-gemm-irregular.txt | cut -c1-150
fi
