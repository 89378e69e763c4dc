#!/usr/bin/env bash
# The fused-GELU GEMM (issue 11's linear_bias_gelu rows) with each Hopper tile forced against
# the plan, cuBLAS and cuBLASLt GELU_BIAS in the same process (`bench --ops gemm` always adds
# the linear_bias_gelu rows of 8192x3072x768 and 512x3072x768), then (PART=ab,ncu) Nsight
# Compute on the fused kernel of the plan and of NCU_TILE.
# PART=check first runs the sm90 and elementwise GPU tests and memcheck on the TMA-store edge test (every
# activation, bias, ragged edges) with CHECK_TILES forced, racecheck with RACECHECK_TILES.
# Usage on the device: COLS="plan 4 6 7" PART=check,ab,ncu bash bench/device-gelu.sh
set -uo pipefail
source bench/device-lib.sh
SHAPES=${SHAPES:-8192x3072x768}
# The fused rows' shapes (`bench --gelu-shapes`); NO_SPLIT=1 skips the split-K rows.
GELU_SHAPES=${GELU_SHAPES:-8192x3072x768,512x3072x768}
COLS=${COLS:-plan 4 6 7 8}
if [[ "$PART" == *check* ]]; then
  timeout $(cap 170) $T --test-threads=2 sm90 > $R/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/sm90-tests.txt | head
  # The 16-bit GELU forms are shared with the elementwise kernels: their GPU tests too.
  timeout $(cap 120) $T --test-threads=2 elementwise > $R/elementwise-tests.txt 2>&1
  stamp "elementwise tests exit $?: $(grep 'test result' $R/elementwise-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/elementwise-tests.txt | head
  for tile in ${CHECK_TILES:-8 4}; do
    FERROTUNE_SM90_TILE=$tile FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 60) compute-sanitizer --tool memcheck \
      --error-exitcode 9 $T --test-threads=1 sm90_tma_store > $R/memcheck-t$tile.txt 2>&1
    stamp "memcheck (tile $tile) exit $?: $(grep -E 'ERROR SUMMARY' $R/memcheck-t$tile.txt | tail -1) $(grep 'test result' $R/memcheck-t$tile.txt)"
  done
  # RACECHECK_TILES: racecheck (shared-memory hazards) on the same test with those tiles forced.
  for tile in ${RACECHECK_TILES:-}; do
    FERROTUNE_SM90_TILE=$tile FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 120) compute-sanitizer --tool racecheck \
      --error-exitcode 9 $T --test-threads=1 sm90_tma_store > $R/racecheck-t$tile.txt 2>&1
    stamp "racecheck (tile $tile) exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/racecheck-t$tile.txt | tail -1) $(grep 'test result' $R/racecheck-t$tile.txt)"
  done
fi
if [[ "$PART" == *ab* ]]; then
  for col in $COLS; do
    if [ $col = plan ]; then unset FERROTUNE_SM90_TILE; else export FERROTUNE_SM90_TILE=$col; fi
    env ${NO_SPLIT:+FERROTUNE_BENCH_NO_SPLIT=1} timeout $(cap 90) $X bench --ops gemm --dtypes bf16 --shapes $SHAPES \
      --gelu-shapes $GELU_SHAPES --json $R/gemm-$col-bf16.json > $R/gemm-$col-bf16.txt 2>&1; stamp "$col exit $?"
    grep -E "linear_bias_gelu|^gemm" $R/gemm-$col-bf16.txt | grep -v "3 kernels" | cut -c1-150 | head -24
  done
  unset FERROTUNE_SM90_TILE
  COLS="$COLS" python3 bench/tile_table.py $R > $R/ab-table.md; cat $R/ab-table.md
fi
if [[ "$PART" == *host* ]]; then
  # The suite's few-microsecond rows: queued GPU time per call against the host's enqueue time
  # per call, ours and cuBLAS (bench/gemm_suite.rs `host_us`).
  for dt in bf16 f16; do
    timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --dtypes $dt --warmup 10 --iters 60 \
      --shapes ${HOST_SHAPES:-3x5x7,1x4097x777,33x1023x777,1x1x4099,8x3000x64,33x4096x64,17x33x9000,1x4096x4096} \
      --json $R/host-$dt.json > $R/host-$dt.txt 2>&1; stamp "host $dt exit $?"; cat $R/host-$dt.txt | cut -c1-250
  done
fi
if [[ "$PART" == *ncu* ]]; then
  # With the split-K rows off, the process's first ft_gemm90 launches are the plain GEMM's
  # (check, warm-up, timed), then the fused erf GEMM's: NCU_COUNT launches from the first.
  SECT="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --section InstructionStats"
  for t in ${NCU_TILES:-plan 4}; do
    if [ $t = plan ]; then E="FERROTUNE_BENCH_NO_SPLIT=1"; else E="FERROTUNE_BENCH_NO_SPLIT=1 FERROTUNE_SM90_TILE=$t"; fi
    timeout $(cap 150) env $E ncu -k "regex:ft_gemm90_" --launch-count ${NCU_COUNT:-6} $SECT \
      -o $R/gelu-$t $X bench --ops gemm --dtypes bf16 --iters 1 --warmup 1 --shapes 8192x3072x768 > $R/ncu-$t-run.txt 2>&1
    stamp "ncu $t exit $?"
    ncu -i $R/gelu-$t.ncu-rep --print-details all > $R/gelu-$t-details.txt 2>&1
    ncu -i $R/gelu-$t.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > $R/gelu-$t-sass.csv.xz
    grep -E "^  ft_gemm90|Duration|Executed Instructions  |Issue Slots Busy|Stall Long|Stall Math|Stall Wait|No Eligible" $R/gelu-$t-details.txt | head -60
  done
  rm -f $R/*.ncu-rep
fi
cp $R/ab-table.md $OUT/ 2>/dev/null
tar -czf $OUT/gelu-$(echo $PART | tr ',' '-').tgz -C $R .
stamp done
