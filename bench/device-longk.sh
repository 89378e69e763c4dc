#!/usr/bin/env bash
# Forced Hopper tiles and K splits against the plan on the long-K, few-tile class, cuBLAS in
# the same process and torch (`x @ w.T`, eager and CUDA graph) in the same call: first the
# streaming tile in clusters (tiles 17: 2 blocks along M, 18: 4; B multicast), then tiles and
# splits for the split rule. A column is `plan`, a tile (`10`), a tile and a split (`10:2`), or
# `sm0` (the plan with the small-M family off).
# PART=check: the sm90, plan and small-M GPU tests, then compute-sanitizer memcheck, racecheck and synccheck on
# the clustered split and unsplit tests. PART=ab: `bench --ops gemm --shape-suite irregular`
# on SHAPES with each column of COLS forced, then torch, then a table
# ($OUT/longk-table.md). PART=suite: the irregular suite with torch (bench/device-irregular.sh).
# Usage on the device: PART=check,ab,suite bash bench/device-longk.sh
set -uo pipefail
source bench/device-lib.sh
SHAPES=${SHAPES:-256x256x65536,512x512x32768,256x1024x16384,1024x1024x16384,128x4096x8192,64x4096x4096,384x384x40000,200x600x30000,768x512x24576,1000x1000x20000}
COLS=${COLS:-plan 17 18}
if [[ "$PART" == *check* ]]; then
  timeout $(cap 260) $T --test-threads=2 sm90 gemm_plan gemv > $R/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/sm90-tests.txt | head
  for tool in memcheck racecheck synccheck; do
    timeout $(cap 90) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
      gpu_sm90_split_k_cluster_tiles sm90_cluster_tiles > $R/$tool.txt 2>&1
    stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/$tool.txt | tr '\n' ' ')"
  done
fi
if [[ "$PART" == *ab* ]]; then
  for col in $COLS; do
    unset FERROTUNE_SM90_TILE FERROTUNE_SM90_SPLIT FERROTUNE_SMALL_M
    if [ $col = sm0 ]; then export FERROTUNE_SMALL_M=0  # the plan with the small-M family off
    elif [ $col != plan ]; then export FERROTUNE_SM90_TILE=${col%%:*}; fi
    if [[ $col == *:* ]]; then export FERROTUNE_SM90_SPLIT=${col#*:}; fi
    timeout $(cap 90) $X bench --ops gemm --shape-suite irregular --shapes $SHAPES --dtypes ${DTYPES:-bf16} \
      --warmup 5 --iters 30 --json $R/suite-$col.json > $R/suite-$col.txt 2>&1
    stamp "column $col exit $?"
  done
  unset FERROTUNE_SM90_TILE FERROTUNE_SM90_SPLIT FERROTUNE_SMALL_M
  timeout $(cap 120) python3 benches/torch_gemm.py --shapes $SHAPES --dtypes ${DTYPES:-bf16} --rotate --warmup 5 --iters 30 \
    --json $R/torch.json > $R/torch.txt 2>&1
  stamp "torch exit $?"
  COLS="$COLS" python3 bench/longk_table.py $R > $R/longk-table.md; cat $R/longk-table.md
  cp $R/longk-table.md $OUT/
fi
if [[ "$PART" == *suite* ]]; then
  # The irregular suite (bf16 and f16) with torch in the same call: bench/device-irregular.sh.
  PARTS=torch,suite BUDGET=$(cap 240) OUT=$R/irregular bash bench/device-irregular.sh > $R/irregular.txt 2>&1
  stamp "irregular suite exit $?"; grep -E "geomean|worst|below" $R/irregular.txt | head -12
fi
cp $R/device.txt $OUT/
tar -czf $OUT/longk-$(echo $PART | tr ',' '-').tgz -C $R .
stamp done
