#!/usr/bin/env bash
# The TMA-store epilogue on the H100, from a carry built by `bench/prepare-carry.sh`.
# PART=check: the sm90 GPU tests (also with 3 persistent blocks), compute-sanitizer memcheck,
#   racecheck and synccheck on the TMA-store test, the whole GPU test binary.
# PART=ab: a quick A/B (TMA store on / off: `FERROTUNE_SM90_TMA_STORE=0`; the default tile
#   and the persistent ones forced) against cuBLAS in the same process.
# PART=final: the small-M check of the gemvfuse branch where its script is in the tree
#   (bench/device-gemvfuse.sh; the branch was reverted from main), the whole GPU test binary, the irregular suite (bf16, f16) with torch peers, TF32 rows (TMA store on, off)
#   with torch's TF32 matmul.
# PART=bench: torch peers first (alone on the GPU), then `bench --ops gemm` on the Hopper rows
#   and the medium-K class (bf16, f16, fused GELU) with the TMA store on and off, the
#   irregular suite (bf16, f16), each joined with the best of cuBLAS and torch.
# Every step is bounded by what is left of BUDGET seconds; results in $OUT/{check,bench}.tgz
# (everything) and the A/B and joined tables beside them.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-560}; PART=${PART:-check}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 10 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=.carry
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache TRITON_CACHE_DIR=/tmp/triton-cache
R=$(mktemp -d); T=$C/ferrotune_tests; X=$C/xtask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
HOPPER=8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,512x3072x768
CLASS=8192x8192x512,3072x3072x1536,16384x1024x1024,4096x1024x768,2048x8192x1024,6144x4096x1024
SUITE=1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768

if [ "$PART" = check ]; then
  stamp "=== sm90 GPU tests"
  timeout $(cap 120) $T --test-threads=2 sm90 > $R/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/sm90-tests.txt | head
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 150) $T --test-threads=2 sm90_tma_store sm90_every_tile > $R/sm90-3-blocks.txt 2>&1
  stamp "3 persistent blocks exit $?: $(grep 'test result' $R/sm90-3-blocks.txt)"; grep -E "panicked" $R/sm90-3-blocks.txt | head -3
  for tool in memcheck racecheck synccheck; do
    FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 90) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 sm90_tma_store_epilogue_edges \
      > $R/$tool-tma-store.txt 2>&1
    stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-tma-store.txt | tail -1) $(grep 'test result' $R/$tool-tma-store.txt)"
  done
  stamp "=== the whole GPU test binary"
  timeout $(cap 200) $T --test-threads=4 > $R/all-tests.txt 2>&1
  stamp "tests exit $?: $(grep 'test result' $R/all-tests.txt)"; grep -E "^test .*FAILED" $R/all-tests.txt | head
  tar -czf $OUT/check.tgz -C $R . && cp $R/all-tests.txt $OUT/ 2>/dev/null
  stamp done
  exit 0
fi

if [ "$PART" = ab ]; then
  stamp "=== quick A/B against cuBLAS (same process)"
  for s in 8192x3072x768 4096x4096x4096 8192x8192x512 512x3072x768 8192x8192x8192; do
    for cfg in "1 default" "0 default" "1 8" "0 8" "1 2" "1 3"; do
      set -- $cfg
      if [ $2 = default ]; then unset FERROTUNE_SM90_TILE; else export FERROTUNE_SM90_TILE=$2; fi
      FERROTUNE_SM90_TMA_STORE=$1 FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 40) $X bench --ops gemm --dtypes bf16 --shapes $s \
        --iters 30 --warmup 5 > /tmp/b.txt 2>&1
      echo "tma_store=$1 tile=$2 $(grep -m1 ' ours ' /tmp/b.txt | cut -c1-150)" | tee -a $R/ab-quick.txt
      grep -m2 "linear_bias_gelu" /tmp/b.txt | cut -c1-150 | sed "s/^/tma_store=$1 tile=$2 /" | tee -a $R/ab-quick.txt
    done
  done
  unset FERROTUNE_SM90_TILE
  cp $R/ab-quick.txt $OUT/
  stamp done
  exit 0
fi

if [ "$PART" = final ]; then
  # The merged tree: the small-M x read (bench/device-gemvfuse.sh, its own budget), the whole
  # GPU test binary, then the irregular suite with torch peers.
  mkdir -p $R/gemvfuse
  if [ -f bench/device-gemvfuse.sh ]; then
    OUT=$R/gemvfuse BUDGET=${GEMVFUSE_S:-230} bash bench/device-gemvfuse.sh > $R/gemvfuse.log 2>&1
    stamp "gemvfuse exit $?"; tail -16 $R/gemvfuse.log
  fi
  stamp "=== the whole GPU test binary"
  timeout $(cap 150) $T --test-threads=4 > $R/all-tests.txt 2>&1
  stamp "tests exit $?: $(grep 'test result' $R/all-tests.txt)"; grep -E "^test .*FAILED" $R/all-tests.txt | head
  timeout $(cap 60) python3 benches/torch_gemm.py --shapes $SUITE --dtypes bf16,f16 --rotate --warmup 3 --iters 20 \
    --json $R/torch-gemm-irregular-h100.json > $R/torch-gemm-irregular.txt 2>&1; stamp "torch suite exit $?"
  for dt in bf16 f16; do
    timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --dtypes $dt --warmup 3 --iters 20 \
      --json $R/gemm-irregular-$dt-h100.json > $R/gemm-irregular-$dt.txt 2>&1; stamp "suite $dt exit $?"
    python3 bench/gemm_join.py $R/gemm-irregular-$dt-h100.json $R/torch-gemm-irregular-h100.json \
      --markdown $R/gemm-irregular-$dt-vs-peers.md 2>&1 | tail -1
  done
  TF32=8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,8192x8192x512
  timeout $(cap 60) python3 benches/torch_gemm.py --shapes $TF32 --dtypes tf32 --json $R/torch-tf32.json \
    > $R/torch-tf32.txt 2>&1; stamp "torch tf32 exit $?"
  for on in 1 0; do
    FERROTUNE_SM90_TMA_STORE=$on FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 60) $X bench --ops gemm --dtypes tf32 --shapes $TF32 \
      --json $R/gemm-tf32-tma$on.json > $R/gemm-tf32-tma$on.txt 2>&1; stamp "tf32 tma_store=$on exit $?"
    python3 bench/gemm_join.py $R/gemm-tf32-tma$on.json $R/torch-tf32.json --markdown $R/gemm-tf32-tma$on-vs-peers.md 2>&1 | tail -1
  done
  tar -czf $OUT/final.tgz -C $R . && cp $R/all-tests.txt $R/gemm-irregular-*-vs-peers.md $R/gemm-tf32-tma1-vs-peers.md $OUT/ 2>/dev/null
  stamp done
  exit 0
fi

stamp "=== torch peers, alone on the GPU"
timeout $(cap 90) python3 benches/torch_gemm.py --shapes $HOPPER,$CLASS --dtypes bf16,f16 --gelu 8192x3072x768,512x3072x768 \
  --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
timeout $(cap 70) python3 benches/torch_gemm.py --shapes $SUITE --dtypes bf16,f16 --rotate --warmup 3 --iters 20 \
  --json $R/torch-gemm-irregular-h100.json > $R/torch-gemm-irregular.txt 2>&1; stamp "torch suite exit $?"
stamp "=== bench --ops gemm, TMA store on, then off"
FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 90) $X bench --ops gemm --dtypes bf16,f16 --shapes $HOPPER,$CLASS \
  --json $R/gemm-h100.json > $R/gemm.txt 2>&1; stamp "gemm exit $?"
python3 bench/gemm_join.py $R/gemm-h100.json $R/torch-gemm-h100.json --markdown $R/gemm-vs-peers-h100.md 2>&1 | tail -2
FERROTUNE_SM90_TMA_STORE=0 FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 90) $X bench --ops gemm --dtypes bf16 --shapes $HOPPER,$CLASS \
  --json $R/gemm-staged-h100.json > $R/gemm-staged.txt 2>&1; stamp "gemm staged exit $?"
python3 bench/gemm_join.py $R/gemm-staged-h100.json $R/torch-gemm-h100.json --markdown $R/gemm-staged-vs-peers-h100.md 2>&1 | tail -2
stamp "=== the irregular suite (bf16, f16)"
for dt in bf16 f16; do
  timeout $(cap 80) $X bench --ops gemm --shape-suite irregular --dtypes $dt --warmup 3 --iters 20 \
    --json $R/gemm-irregular-$dt-h100.json > $R/gemm-irregular-$dt.txt 2>&1; stamp "suite $dt exit $?"
  python3 bench/gemm_join.py $R/gemm-irregular-$dt-h100.json $R/torch-gemm-irregular-h100.json \
    --markdown $R/gemm-irregular-$dt-vs-peers.md 2>&1 | tail -1
done
tar -czf $OUT/bench.tgz -C $R . && cp $R/*.md $OUT/ 2>/dev/null
stamp done
