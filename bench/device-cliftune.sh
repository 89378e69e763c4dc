#!/usr/bin/env bash
# Issue 15's forward rows at B4096 (0.82-0.89x of copy single call, 0.88-0.91x queued): every
# Clifford forward config the tuner has, timed on each row (f32, norm on), against the built-in
# heuristic, to see whether a config (rather than the kernels) is what stands between them and
# 0.9x. Usage on the device: BUDGET=400 bash bench/device-cliftune.sh
set -uo pipefail
source bench/device-lib.sh
S=${S:-2x4096x512,2x4096x777,2x4096x1024,3x4096x512,3x4096x777,3x4096x1024}
timeout $(cap 360) $X tune --ops clifford_fwd --dtypes f32 --clifford-shapes $S --clifford-norm on \
  --strategy exhaustive --time-limit 330 --profile $R/cliftune.toml --json $R/cliftune.json > $R/cliftune.log 2>&1
stamp "tune exit $?"; sed -n '/op \/ shape/,$p' $R/cliftune.log | head -30
tar -czf $OUT/cliftune.tgz -C $R .; cp $R/device.txt $OUT/
