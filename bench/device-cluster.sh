#!/usr/bin/env bash
# The Hopper cluster tiles (12: persistent 128 x 256 in 2x1 clusters, 13: one-tile 128 x 256 in
# 2x1 clusters; B multicast) on the H100, from a carry built by `bench/prepare-carry.sh`.
# PART=check: the sm90 GPU tests (also with 3 persistent blocks), compute-sanitizer memcheck,
#   racecheck and synccheck on `sm90_cluster_tiles`.
# PART=ab: the Hopper shapes (bf16; f16 on the squares) with the plan's tile, tiles 8 and 0
#   (their unclustered forms) and 12 and 13 forced, each against cuBLAS in the same process;
#   then torch's `x @ w.T` on the same shapes, and a table of all of them.
# PART=rows: the row split (`ops::gemm_sm90_rows`) and the persistent 128 x 192 (tile 14):
#   their GPU tests (and the sanitizers on tile 14), then shapes whose last wave of 128 x 256
#   tiles is at most half full (and controls) with the plan, the split off
#   (`FERROTUNE_SM90_ROWS=0`), tiles 14 and 8 forced, against cuBLAS and torch, in the same
#   table form.
# Every step is bounded by what is left of BUDGET seconds; results in $OUT/cluster-$PART.tgz
# and the tables beside it.
set -uo pipefail
source bench/device-lib.sh

if [ "$PART" = check ]; then
  timeout $(cap 150) $T --test-threads=2 sm90 > $R/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/sm90-tests.txt | head
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 150) $T --test-threads=2 sm90_cluster sm90_tma_store sm90_every_tile \
    > $R/sm90-3-blocks.txt 2>&1
  stamp "3 persistent blocks exit $?: $(grep 'test result' $R/sm90-3-blocks.txt)"; grep -E "panicked" $R/sm90-3-blocks.txt | head -3
  for tool in memcheck racecheck synccheck; do
    FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 80) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
      sm90_cluster_tiles > $R/$tool-cluster.txt 2>&1
    stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-cluster.txt | tail -1) $(grep 'test result' $R/$tool-cluster.txt)"
  done
fi

if [ "$PART" = ab ]; then
  HOPPER=${SHAPES:-8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,512x3072x768,8192x8192x512,3072x3072x1536,16384x1024x1024,6144x4096x1024}
  SQUARES=8192x8192x8192,4096x4096x4096,2048x2048x2048
  for tile in plan 8 12 0 13; do
    if [ $tile = plan ]; then unset FERROTUNE_SM90_TILE; else export FERROTUNE_SM90_TILE=$tile; fi
    FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 60) $X bench --ops gemm --dtypes bf16 --shapes $HOPPER \
      --json $R/gemm-$tile-bf16.json > $R/gemm-$tile-bf16.txt 2>&1; stamp "tile $tile bf16 exit $?"
    if [ $tile = plan ] || [ $tile = 12 ]; then
      FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 40) $X bench --ops gemm --dtypes f16 --shapes $SQUARES \
        --json $R/gemm-$tile-f16.json > $R/gemm-$tile-f16.txt 2>&1; stamp "tile $tile f16 exit $?"
    fi
  done
  unset FERROTUNE_SM90_TILE
  timeout $(cap 90) python3 benches/torch_gemm.py --shapes $HOPPER --dtypes bf16,f16 --gelu 8192x3072x768,512x3072x768 \
    --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
fi

if [ "$PART" = rows ]; then
  timeout $(cap 120) $T --test-threads=2 sm90_row_split sm90_every_tile sm90_tma_store > $R/rows-test.txt 2>&1
  stamp "row split, every tile, TMA store tests exit $?: $(grep 'test result' $R/rows-test.txt)"
  grep -E "panicked" $R/rows-test.txt | head -3
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 100) $T --test-threads=2 sm90_tma_store sm90_every_tile > $R/rows-3-blocks.txt 2>&1
  stamp "3 persistent blocks exit $?: $(grep 'test result' $R/rows-3-blocks.txt)"; grep -E "panicked" $R/rows-3-blocks.txt | head -3
  for tool in memcheck racecheck synccheck; do
    FERROTUNE_SM90_TILE=14 FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 60) compute-sanitizer --tool $tool --error-exitcode 9 \
      $T --test-threads=1 sm90_strided_batches > $R/$tool-t14.txt 2>&1
    stamp "$tool (tile 14) exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-t14.txt | tail -1) $(grep 'test result' $R/$tool-t14.txt)"
  done
  ROWS=${SHAPES:-3072x3072x1536,3072x3072x4096,4096x2560x2048,2560x4096x1024,5120x5120x1024,1664x3072x1536,3000x3070x1536,4096x4100x4096,4096x4096x4096,3072x3072x768}
  # The plan (row split on), the split off, and the persistent 128 x 192 (tile 14) and 128 x 256
  # (tile 8) forced (a forced tile never splits rows).
  for on in plan 0 t14 t8; do
    for dt in bf16 f16; do
      unset FERROTUNE_SM90_ROWS FERROTUNE_SM90_TILE
      case $on in 0) export FERROTUNE_SM90_ROWS=0;; t*) export FERROTUNE_SM90_TILE=${on#t};; esac
      FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 60) $X bench --ops gemm --dtypes $dt --shapes $ROWS \
        --json $R/gemm-rows$on-$dt.json > $R/gemm-rows$on-$dt.txt 2>&1; stamp "rows=$on $dt exit $?"
    done
  done
  unset FERROTUNE_SM90_ROWS FERROTUNE_SM90_TILE
  timeout $(cap 90) python3 benches/torch_gemm.py --shapes $ROWS --dtypes bf16,f16 \
    --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
fi

if [ "$PART" = ab ] || [ "$PART" = rows ]; then
  COLS=$([ "$PART" = ab ] && echo "plan 8 12 0 13" || echo "rowsplan rows0 rowst14 rowst8") \
    python3 bench/tile_table.py $R > $R/$PART-table.md
  cat $R/$PART-table.md; cp $R/$PART-table.md $OUT/
fi
tar -czf $OUT/cluster-$PART.tgz -C $R . 
stamp done
