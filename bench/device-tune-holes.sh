#!/usr/bin/env bash
# The unseen shapes' holes (bench/results/unseen-*/): every GEMM tuner point (tile family,
# tile, split) timed on each, exhaustive, against what the built-in plan picks, to see which
# plan rule is missing. Usage on the device: BUDGET=560 bash bench/device-tune-holes.sh
set -uo pipefail
source bench/device-lib.sh
HOLES=${HOLES:-5000x300x4000,16384x64x8192,2048x5120x5120,3072x768x3072,12x5120x13824,12000x3000x96,8192x96x4096,192x640x30000}
mkdir -p $OUT/tune-holes
timeout $(cap 520) $X tune --ops gemm --dtypes bf16 --layouts rc --sizes $HOLES --strategy exhaustive \
  --profile $OUT/tune-holes/holes.toml --json $OUT/tune-holes/holes.json > $OUT/tune-holes/holes.log 2>&1
stamp "tune exit $?"; sed -n '/op \/ shape/,$p' $OUT/tune-holes/holes.log | head -40
cp $R/device.txt $OUT/tune-holes/
