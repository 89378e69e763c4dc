#!/usr/bin/env bash
# The session's combined device run on the merged tree (one carry, `bench/prepare-carry.sh`),
# in two calls that fit the 600-second limit (the machine stays warm between them, so the
# driver's PTX cache under /tmp/ferrotune-nv-cache is paid once):
#   PART=1  GEMM: the sm90, small-M, pack and GEMM GPU tests; `bench --ops gemm` (bf16, f16;
#           every row names its plan path) with the torch peer and the joined table; the
#           irregular suite (bf16, f16) with the torch peer (rotated operands, as the suite);
#   PART=2  Clifford (tests, bench, torch peer, join), the runtime bench with its torch side,
#           the out-of-memory checks, and compute-sanitizer memcheck on the new GEMM families;
#   PART=3  the re-check after fixes: GEMM tests (sm90 edges also with the small-M family off),
#           the gemm bench and the suite with their torch peers, the whole GPU test suite.
# Every step is bounded by what is left of BUDGET seconds. Results: $OUT/session-<part>.tgz
# (everything) plus the main JSON files in $OUT.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-570}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 10 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=.carry
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache TRITON_CACHE_DIR=/tmp/triton-cache
R=$(mktemp -d); T=$C/ferrotune_tests; X=$C/xtask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
cat $R/nvidia-smi.txt
GEMM_SHAPES=8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,512x3072x768
SUITE=1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768

if [ "${PART:-1}" = 3 ]; then
  # The re-check after the fixes of part 1's failures: GEMM tests (and the Hopper kernel on
  # M <= 64 with the small-M family off), the gemm bench and the suite with their torch peers,
  # then the whole GPU suite in what time is left.
  ( timeout 100 python3 benches/torch_gemm.py --shapes $GEMM_SHAPES --dtypes bf16,f16 --gelu 8192x3072x768,512x3072x768 \
      --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; echo "torch gemm exit $?" >> $R/torch-gemm.txt ) &
  TP=$!
  timeout $(cap 200) $X info > $R/info.txt 2>&1; stamp "JIT warm-up (xtask info) exit $?"
  wait $TP
  stamp "=== GEMM GPU tests"
  timeout $(cap 150) $T --test-threads=1 sm90_ gemv:: pack:: gpu_gemm gpu_split_k ptx:: > $R/gemm-tests.txt 2>&1
  stamp "tests exit $?"; grep -E "test result|panicked|FAILED" $R/gemm-tests.txt | head -12
  FERROTUNE_SMALL_M=0 timeout $(cap 60) $T --test-threads=1 sm90_edge > $R/sm90-edge-small-m-off.txt 2>&1
  stamp "sm90 edges with small-M off: exit $? $(grep 'test result' $R/sm90-edge-small-m-off.txt)"
  stamp "=== bench --ops gemm"
  FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 100) $X bench --ops gemm --dtypes bf16,f16 --shapes $GEMM_SHAPES \
    --json $R/gemm-h100.json > $R/gemm.txt 2>&1
  stamp "gemm exit $?"
  python3 bench/gemm_join.py $R/gemm-h100.json $R/torch-gemm-h100.json --markdown $R/gemm-vs-peers-h100.md 2>&1 \
    | tail -12 | cut -c1-30,150-260
  for dt in bf16 f16; do
    timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --dtypes $dt --warmup 3 --iters 20 \
      --json $R/gemm-irregular-$dt-h100.json > $R/gemm-irregular-$dt.txt 2>&1
    stamp "suite $dt exit $?"; grep -E "geomean" $R/gemm-irregular-$dt.txt
  done
  timeout $(cap 60) python3 benches/torch_gemm.py --shapes $SUITE --dtypes bf16,f16 --rotate --warmup 3 --iters 20 \
    --json $R/torch-gemm-irregular-h100.json > $R/torch-gemm-irregular.txt 2>&1
  for dt in bf16 f16; do
    python3 bench/gemm_join.py $R/gemm-irregular-$dt-h100.json $R/torch-gemm-irregular-h100.json \
      --markdown $R/gemm-irregular-$dt-vs-peers.md 2>&1 | tail -1
  done
  stamp "=== the whole GPU suite ($(left) s left)"
  timeout $(cap 400) $T --test-threads=1 > $R/all-tests.txt 2>&1
  stamp "all tests exit $?"; grep -E "test result|panicked" $R/all-tests.txt | head -8; grep -E "^test .*FAILED" $R/all-tests.txt | head
  tar -czf $OUT/session-3.tgz -C $R .
  cp $R/gemm-h100.json $R/torch-gemm-h100.json $R/gemm-irregular-bf16-h100.json $R/gemm-irregular-f16-h100.json \
    $R/torch-gemm-irregular-h100.json $R/all-tests.txt $OUT/ 2>/dev/null
elif [ "${PART:-1}" = 1 ]; then
  stamp "=== torch GEMM peers (background, while the driver JIT-compiles our PTX: CPU work)"
  ( timeout 100 python3 benches/torch_gemm.py --shapes $GEMM_SHAPES --dtypes bf16,f16 --gelu 8192x3072x768,512x3072x768 \
      --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; echo "torch gemm exit $?" >> $R/torch-gemm.txt ) &
  TP=$!
  timeout $(cap 200) $X info > $R/info.txt 2>&1; stamp "JIT warm-up (xtask info) exit $?"
  wait $TP; tail -14 $R/torch-gemm.txt | cut -c1-150
  stamp "=== GEMM GPU tests (sm90, small-M, pack, tiles, split-K)"
  timeout $(cap 170) $T --test-threads=1 sm90_ gemv:: pack:: gpu_gemm_matches gpu_split_k gpu_gemm_edge > $R/gemm-tests.txt 2>&1
  stamp "tests exit $?"; grep -E "^test .*(FAILED|ok)$|test result|panicked" $R/gemm-tests.txt | grep -v " ok$" | head -20
  grep -cE "^test .* ok$" $R/gemm-tests.txt
  stamp "=== bench --ops gemm (bf16, f16)"
  FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 100) $X bench --ops gemm --dtypes bf16,f16 --shapes $GEMM_SHAPES \
    --json $R/gemm-h100.json > $R/gemm.txt 2>&1
  stamp "gemm exit $?"; grep -E "^(gemm|linear|batched)" $R/gemm.txt | cut -c1-150
  python3 bench/gemm_join.py $R/gemm-h100.json $R/torch-gemm-h100.json --json $R/gemm-vs-peers-h100.json \
    --markdown $R/gemm-vs-peers-h100.md 2>&1 | tail -16
  for dt in bf16 f16; do
    stamp "=== irregular suite ($dt)"
    timeout $(cap 110) $X bench --ops gemm --shape-suite irregular --dtypes $dt --warmup 3 --iters 20 \
      --json $R/gemm-irregular-$dt-h100.json > $R/gemm-irregular-$dt.txt 2>&1
    stamp "suite $dt exit $?"; tail -32 $R/gemm-irregular-$dt.txt | cut -c1-170
  done
  stamp "=== torch on the suite (rotated operands)"
  timeout $(cap 120) python3 benches/torch_gemm.py --shapes $SUITE --dtypes bf16,f16 --rotate --warmup 3 --iters 20 \
    --json $R/torch-gemm-irregular-h100.json > $R/torch-gemm-irregular.txt 2>&1
  stamp "torch suite exit $?"
  tar -czf $OUT/session-1.tgz -C $R .
  cp $R/gemm-h100.json $R/torch-gemm-h100.json $R/gemm-irregular-bf16-h100.json $R/gemm-irregular-f16-h100.json \
    $R/torch-gemm-irregular-h100.json $R/gemm-vs-peers-h100.md $OUT/ 2>/dev/null
else
  timeout $(cap 200) $X info > $R/info.txt 2>&1; stamp "JIT warm-up (cached?) exit $?"
  stamp "=== out of memory checks"
  BIN=$C OUT=$R bash bench/device-cpu.sh 2>&1 | tail -8
  stamp "=== Clifford GPU tests"
  timeout $(cap 120) $T --test-threads=1 --nocapture gpu_clifford every_entry > $R/clifford-tests.txt 2>&1
  stamp "tests exit $?"; grep -E "test result|panicked|FAILED" $R/clifford-tests.txt | head
  stamp "=== Clifford bench"
  timeout $(cap 70) $X bench --ops clifford --clifford-rows fwd,fwdbwd \
    --shapes 1024x128,4096x512,4096x777,4096x1000,4096x1024,4096x1536,8192x1024,16x100000 \
    --json $R/clifford-h100.json > $R/clifford-bench.txt 2>&1
  stamp "bench exit $?"; grep -E "copy ceiling|d[23] " $R/clifford-bench.txt | cut -c1-160
  stamp "=== torch Clifford peers"
  timeout $(cap 100) python3 benches/torch_clifford.py --no-check --sizes 4096x512,4096x1024 --ops fwd,fwdbwd \
    --impls eager,compile,compile_max --compile-mode per-shape --out $R/torch-clifford-h100.json > $R/torch-clifford.txt 2>&1
  stamp "torch exit $?"
  python3 bench/clifford_join.py $R/clifford-h100.json $R/torch-clifford-h100.json --out $R/clifford-vs-torch-h100.md 2>&1 | tail -20
  stamp "=== runtime bench + torch side"
  timeout $(cap 60) python3 benches/torch_runtime.py --json $R/torch-runtime-h100.json > $R/torch-runtime.txt 2>&1
  timeout $(cap 80) $X bench --ops runtime --json $R/runtime-h100.json > $R/runtime-bench.txt 2>&1
  stamp "runtime exit $?"
  python3 benches/torch_runtime.py --join --json $R/torch-runtime-h100.json --ours $R/runtime-h100.json 2>&1 \
    | tee $R/runtime-vs-torch.txt | tail -16
  stamp "=== memcheck on the new GEMM families"
  FERROTUNE_TEST_SMALL=1 timeout $(cap 90) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 \
    gpu_small_m_split_k gpu_small_m_odd_view pack:: sm90_strided > $R/memcheck-gemm-families.txt 2>&1
  stamp "memcheck exit $? $(grep -E 'ERROR SUMMARY' $R/memcheck-gemm-families.txt | tail -1)"
  tar -czf $OUT/session-2.tgz -C $R .
  cp $R/clifford-h100.json $R/torch-clifford-h100.json $R/clifford-vs-torch-h100.md $R/runtime-h100.json \
    $R/torch-runtime-h100.json $R/runtime-vs-torch.txt $OUT/ 2>/dev/null
fi
stamp "done"
