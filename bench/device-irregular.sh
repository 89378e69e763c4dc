#!/usr/bin/env bash
# Issue 12 (irregular GEMM shapes) on the device, from the binaries `bench/prepare-carry.sh`
# packed into .carry/ (run from the repository root: `bash .carry/device-irregular.sh` with
# this script copied into the carry folder, or `bash bench/device-irregular.sh`):
#   tests    the Hopper split-K, small-M, pack, GEMM, Hopper and split-K GPU tests (a skip
#            fails), with compute-sanitizer memcheck and racecheck on the Hopper split-K and
#            the small-M split beside them
#   explore  A/B rows of the plan's choices (bf16, subsets of the suite): the Hopper split off
#            and forced, small-M off (M > 16 on the Hopper path), pack off (small-M on the
#            unaligned weight), the Hopper tiles on tiny K
#   suite    `bench --ops gemm --shape-suite irregular` (bf16, f16) against cuBLAS, JSON
#   torch    benches/torch_gemm.py on the suite's shapes in the same call, joined with the
#            suite by bench/gemm_join.py (best of cuBLAS and torch per row)
# PARTS picks (default tests,suite,torch). Results land in $OUT/ (at most 8 files).
set -uo pipefail
C=${CARRY:-.carry}
if [ -f $C/bins.tar.xz ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export FERROTUNE_COMMIT=$(cat $C/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
# The driver's JIT cache in an ignored folder of the tree (kept between calls on a warm
# machine): a second call with the same PTX skips the 85-120 s compile.
export CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-$PWD/.carry-jit-cache} CUDA_CACHE_MAXSIZE=4294967296
mkdir -p $CUDA_CACHE_PATH
PARTS=${PARTS:-tests,suite,torch}
OUT=${OUT:-/tmp/irregular-out}; mkdir -p $OUT
J=${JOIN:-bench/gemm_join.py}; [ -f $C/gemm_join.py ] && J=$C/gemm_join.py
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# Load the module once, alone, before anything with a timeout runs (a process killed mid-JIT
# caches nothing, and the next one starts over).
t0=$(date +%s); timeout ${JIT_TIMEOUT:-300} $C/xtask info > /dev/null 2>&1; echo "JIT warm-up exit $? after $(( $(date +%s) - t0 )) s"
if [[ $PARTS == *tests* ]]; then
  # The sanitizers (correctness only) run beside the tests; timings come after, alone.
  for tool in memcheck racecheck; do
    timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool $tool --error-exitcode 9 $C/ferrotune_tests --test-threads=1 \
      gpu_sm90_split_k_is_deterministic gpu_small_m_split_k > $OUT/irregular-sanitizer-$tool.txt 2>&1 &
  done
  echo "=== GPU tests (Hopper split-K, small-M, pack, Hopper, GEMM, split-K)"
  timeout ${TESTS_TIMEOUT:-150} $C/ferrotune_tests --test-threads=2 gemm_sm90_split:: gemv:: pack:: gemm_sm90:: \
    ${MORE_TESTS-gpu_gemm_matches gpu_split_k} > $OUT/irregular-tests.txt 2>&1
  echo "tests exit $?"; grep -E "test result|panicked|FAILED|skipped" $OUT/irregular-tests.txt | head -20
  wait
  for tool in memcheck racecheck; do
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $OUT/irregular-sanitizer-$tool.txt | tail -2 | tr '\n' ' ')"
  done
fi
suite() { # label, shapes, then env assignments
  local label=$1 shapes=$2; shift 2
  env "$@" timeout 120 $C/xtask bench --ops gemm --shape-suite irregular --shapes $shapes --dtypes bf16 --warmup 3 \
    --iters ${ITERS:-20} > /tmp/explore-$label.txt 2>&1
  echo "--- $label ($*): exit $?"; grep -E "^ *bf16" /tmp/explore-$label.txt | cut -c1-150
  cat /tmp/explore-$label.txt >> $OUT/irregular-explore.txt
}
SHAPES="1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768"
DTS=${DTYPES:-bf16 f16}
if [[ $PARTS == *suite* ]]; then
  for dt in $DTS; do
    echo "=== irregular suite vs cuBLAS ($dt)"
    timeout ${SUITE_TIMEOUT:-150} $C/xtask bench --ops gemm --shape-suite irregular --dtypes $dt --warmup ${WARMUP:-3} \
      --iters ${ITERS:-20} --json $OUT/gemm-irregular-$dt-h100.json > /tmp/gemm-irregular-$dt.txt 2>&1
    echo "suite $dt exit $?"; grep -E "^ *(bf16|f16)|geomean|copy ceiling" /tmp/gemm-irregular-$dt.txt | cut -c1-118
  done
fi
if [[ $PARTS == *torch* ]] && [ -f benches/torch_gemm.py ]; then
  echo "=== torch x @ w.T on the suite"
  timeout ${TORCH_TIMEOUT:-180} python3 benches/torch_gemm.py --shapes $SHAPES --dtypes ${DTS// /,} --rotate --warmup 3 --iters 20 \
    --json /tmp/torch-gemm-irregular.json > /tmp/torch-gemm-irregular.txt 2>&1
  echo "torch exit $?"; tail -3 /tmp/torch-gemm-irregular.txt | cut -c1-150
  for dt in $DTS; do
    [ -f $OUT/gemm-irregular-$dt-h100.json ] || continue
    python3 $J $OUT/gemm-irregular-$dt-h100.json /tmp/torch-gemm-irregular.json \
      --json /tmp/vs-peers-$dt.json --markdown /tmp/vs-peers-$dt.md > /dev/null 2>&1
    echo "join $dt exit $?"; grep -E "geomean" /tmp/vs-peers-$dt.md
    cat /tmp/vs-peers-$dt.md >> $OUT/gemm-irregular-vs-peers.md; echo >> $OUT/gemm-irregular-vs-peers.md
  done
  cp /tmp/torch-gemm-irregular.json $OUT/torch-gemm-irregular-h100.json
fi
# Last, so a call cut short by its time limit still has the suite and torch rows.
if [[ $PARTS == *explore* ]]; then
  # Suite shapes, so the suite's own rows (the plan's defaults) are the other side of each A/B.
  LONGK=256x256x65536,512x512x32768,1024x1024x16384,128x8192x1024
  SMALLM=64x4096x4096,33x4096x64,17x33x9000,16x11008x4096
  UNAL=1x8193x4099,33x8191x4099,8x12288x4099,1x4097x777,33x1023x777
  suite longk-nosplit $LONGK FERROTUNE_SM90_SPLIT=1
  suite smallm-hopper16 $SMALLM FERROTUNE_SMALL_M_BESIDE_HOPPER=16
  suite unal-nopack $UNAL FERROTUNE_PACK=0
  suite unal-hopper16 $UNAL FERROTUNE_SMALL_M_BESIDE_HOPPER=16
  for t in 1 2 3; do suite tinyk-tile$t 8191x8193x64 FERROTUNE_SM90_TILE=$t; done
fi
