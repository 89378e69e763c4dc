#!/usr/bin/env bash
# The TF32 tile sweep behind the Hopper tile choice for f32 inputs: `bench --ops gemm --dtypes
# tf32` with each TF32 tile forced (FERROTUNE_SM90_TILE = 0, 1, 9: 128 x 256, 128 x 128,
# 64 x 128 two blocks per SM; no split rows), torch.matmul with allow_tf32 in the background of
# the same call, each sweep joined with it (bench/gemm_join.py). Carry in .carry/ as for
# bench/device-tf32.sh. Results in $OUT/results/, packed into $OUT/tf32-sweep.tgz.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-120}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=${CARRY:-.carry}
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1 FERROTUNE_BENCH_NO_SPLIT=1
R=$OUT/results; mkdir -p $R
X=$C/xtask
py() { if [ -f $C/$(basename $1) ]; then echo $C/$(basename $1); else echo $1; fi; }
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192,2048x2048x2048,8192x3072x768,512x3072x768}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
( timeout 100 python3 $(py benches/torch_gemm.py) --shapes $SHAPES --dtypes tf32 --json $R/torch-tf32.json \
    > $R/torch.txt 2>&1; echo "torch exit $?" >> $R/torch.txt ) &
TP=$!
for t in ${TILES-0 1 9}; do
  FERROTUNE_SM90_TILE=$t timeout $(cap 40) $X bench --ops gemm --dtypes tf32 --shapes $SHAPES \
    --json $R/sweep-tile$t.json > $R/sweep-tile$t.txt 2>&1
  stamp "tile $t exit $?"; grep -E "^gemm " $R/sweep-tile$t.txt | cut -c1-150
done
wait $TP; tail -1 $R/torch.txt
for t in ${TILES-0 1 9}; do
  python3 $(py bench/gemm_join.py) $R/sweep-tile$t.json $R/torch-tf32.json --markdown $R/sweep-tile$t-vs-peers.md > /dev/null 2>&1
  echo "tile $t: $(tail -1 $R/sweep-tile$t-vs-peers.md 2>/dev/null)"
done
tar -czf $OUT/tf32-sweep.tgz -C $OUT results
