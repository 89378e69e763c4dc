#!/usr/bin/env bash
# One device call for TF32 on the Hopper path (issue 11, item "tf32"): the TF32 GPU tests
# (sm90_tf32_* and the Hopper fallback test), tf32 `bench --ops gemm` on the issue's shapes
# (ours vs cuBLAS with CUBLAS_COMPUTE_32F_FAST_TF32, same process; every row names its path),
# plus the split-K rows of the long-K shapes; the same bench with the Hopper path off
# (FERROTUNE_SM90=0: the mma.sync TF32 tiles, the "before"), torch.matmul with allow_tf32
# (`x @ w.T`) in the background of the same call, joined by bench/gemm_join.py, then
# compute-sanitizer memcheck (racecheck and synccheck while time is left) on the TF32
# tile/split test. Run from the repository root with the carry in
# .carry/ (bench/prepare-carry.sh; this script, bench/gemm_join.py and benches/torch_gemm.py
# copied there). Every step is bounded by what is left of BUDGET seconds. Results land in
# $OUT/results/ and are packed into $OUT/tf32-results.tgz.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-240}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=${CARRY:-.carry}
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
R=$OUT/results; mkdir -p $R
T=$C/ferrotune_tests; X=$C/xtask
py() { if [ -f $C/$(basename $1) ]; then echo $C/$(basename $1); else echo $1; fi; }
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192,2048x2048x2048,8192x3072x768,512x3072x768}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
( timeout 150 python3 $(py benches/torch_gemm.py) --shapes $SHAPES --dtypes tf32 --json $R/torch-tf32.json \
    > $R/torch.txt 2>&1; echo "torch exit $?" >> $R/torch.txt ) &
TP=$!
stamp "=== tf32 tests"
timeout $(cap 90) $T --test-threads=1 sm90_tf32 sm90_falls_back > $R/tests-tf32.txt 2>&1
stamp "tests exit $?: $(grep 'test result' $R/tests-tf32.txt)"; grep -E "panicked|FAILED" $R/tests-tf32.txt | head -5
stamp "=== bench tf32 (Hopper path)"
timeout $(cap 60) $X bench --ops gemm --dtypes tf32 --shapes $SHAPES --json $R/gemm-tf32.json > $R/gemm-tf32.txt 2>&1
stamp "bench exit $?"; grep -E "^gemm" $R/gemm-tf32.txt | cut -c1-200
stamp "=== bench tf32, FERROTUNE_SM90=0 (mma.sync TF32 tiles: before)"
FERROTUNE_SM90=0 FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 50) $X bench --ops gemm --dtypes tf32 --shapes $SHAPES --json $R/gemm-tf32-mma.json \
  > $R/gemm-tf32-mma.txt 2>&1
stamp "bench (mma) exit $?"; grep -E "^gemm" $R/gemm-tf32-mma.txt | cut -c1-200
wait $TP; tail -1 $R/torch.txt
for b in gemm-tf32 gemm-tf32-mma; do
  [ -f $R/$b.json ] && [ -f $R/torch-tf32.json ] || continue
  python3 $(py bench/gemm_join.py) $R/$b.json $R/torch-tf32.json --json $R/$b-vs-peers.json --markdown $R/$b-vs-peers.md \
    > /dev/null 2>&1
  echo "$b: $(tail -1 $R/$b-vs-peers.md 2>/dev/null)"
done
stamp "=== sanitizer"
for tool in memcheck racecheck synccheck; do
  [ "$(left)" -lt 25 ] && { stamp "no time left for $tool"; break; }
  timeout $(cap 70) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 sm90_tf32_every_tile \
    > $R/sanitizer-tf32-$tool.txt 2>&1
  stamp "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer-tf32-$tool.txt | tail -1)"
done
tar -czf $OUT/tf32-results.tgz -C $OUT results
