#!/usr/bin/env bash
# Issue 12's "build for classes": GEMM shapes no issue, suite or plan rule names (chosen on
# 2026-12-06 before any was run: small M against LLM weights, aligned and odd; long K with few
# tiles; tiny K; unaligned mid sizes; LLM layers; large non-power-of-two; skinny N), timed as
# the irregular suite is (ours and cuBLAS: single, queued, graph) and torch (`x @ w.T`,
# torch.compile, graphs, operands rotated past L2) in the same call, then joined per row.
# Usage on the device: BUDGET=560 bash bench/device-unseen.sh   (results under $OUT/unseen-*)
set -uo pipefail
source bench/device-lib.sh
UNSEEN=${UNSEEN:-2x5120x5120,4x13824x5120,12x5120x13824,24x3584x3584,48x8192x2048,1x6144x2048,1x11008x4096,5x3001x1999,40x7000x999,384x384x49152,192x640x30000,128x128x131072,768x256x20480,4096x6000x32,12000x3000x96,3000x3000x128,1023x4097x513,3001x2999x1001,777x1555x2333,5000x300x4000,2048x5120x5120,4096x13824x5120,1024x4096x11008,3072x768x3072,6000x6000x6000,3000x5000x2000,8192x96x4096,16384x64x8192}
join() { python3 bench/gemm_join.py "$@" 2>&1 | tail -1; }
timeout $(cap 150) python3 benches/torch_gemm.py --shapes $UNSEEN --dtypes ${DTYPES:-bf16,f16} --rotate --warmup 3 --iters 20 \
  --json $R/torch-unseen.json > $R/torch-unseen.txt 2>&1; stamp "torch exit $?"
for dt in $(echo ${DTYPES:-bf16,f16} | tr ',' ' '); do
  timeout $(cap 170) $X bench --ops gemm --shape-suite irregular --shapes $UNSEEN --dtypes $dt --warmup 3 --iters 20 \
    --json $R/unseen-$dt.json > $R/unseen-$dt.txt 2>&1; stamp "ours $dt exit $?"
  join $R/unseen-$dt.json $R/torch-unseen.json --markdown $R/unseen-$dt-vs-peers.md
done
mkdir -p $OUT/unseen; cp $R/* $OUT/unseen/ 2>/dev/null
stamp done
