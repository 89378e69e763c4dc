#!/usr/bin/env bash
# Issue 12: the small-M width rule for 1-16 rows (`ops::gemv::wave_width`: two slabs per block
# where one slab per block makes 1 to 1.5 waves) on the H100, from a carry built by
# `bench/prepare-carry.sh`: shapes inside that band and outside it (aligned and odd K), the plan
# against width 1 and 2 forced (`bench/device-m1.sh PART=sweep`), cuBLAS in the same process,
# then torch's `x @ w.T` on the same shapes joined with the plan's rows (`bench/gemm_join.py`:
# ours / the best peer), then the small-M GPU tests.
# Results: $OUT/m1-summary.txt, $OUT/wave-vs-peers.md, $OUT/m1.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
IN=1x4352x4096,1x4608x4608,1x5120x5120,1x5632x4096,1x6144x6144,1x5120x13824,1x6144x2048,4x4608x4608,8x5120x5120,12x5632x4096,16x5120x5120,16x6144x6144,2x5120x3072,1x5121x4099,8x6143x4097
OUTSIDE=1x4096x4096,1x6400x4096,1x8192x4096,16x8192x4096,1x3072x3072,1x11008x4096,17x5120x5120
export SHAPES=${SHAPES:-$IN,$OUTSIDE}
BUDGET=${BUDGET:-210} PART=check,sweep COLS="plan w1 w2" bash bench/device-m1.sh 2>&1 | grep -vE "^\s*$" | tail -30
R=$(mktemp -d); tar -xzf $OUT/m1.tgz -C $R
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
timeout 120 python3 benches/torch_gemm.py --shapes $SHAPES --dtypes bf16 --rotate --warmup 3 --iters 20 \
  --json $R/torch-wave.json > $R/torch-wave.txt 2>&1
echo "torch exit $?"
python3 bench/gemm_join.py $R/m1-plan.json $R/torch-wave.json --markdown $OUT/wave-vs-peers.md > /dev/null 2>&1
echo "join exit $?"; grep -E "geomean" $OUT/wave-vs-peers.md
tar -czf $OUT/m1.tgz -C $R .
