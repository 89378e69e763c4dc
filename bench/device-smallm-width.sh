#!/usr/bin/env bash
# Issue 12: the small-M family's block widths (slabs of 16 weight rows per block, `gemv::WIDTHS`)
# on the H100, from a carry built by `bench/prepare-carry.sh`.
# PART=check: the small-M GPU tests (every width forced, unaligned rows, the K split) and
#   compute-sanitizer memcheck on the every-width test.
# PART=ab: bf16 shapes of 1-64 rows with the plan, each width forced on the small-M family
#   (FERROTUNE_SMALL_M_WIDTH, small-M up to 64 rows), and the Hopper path from one row; cuBLAS
#   in the same process, then torch's `x @ w.T` (eager and CUDA graph); one table
#   (`bench/tile_table.py`). Columns (COLS_AB): plan, w1/w2/w4, hopper, xcopies (interleaved
#   slabs read x from shifted copies: FERROTUNE_SMALL_M_X_COPIES=1), pack32 (unaligned weights
#   in place up to 32 rows only).
# PART=check,ab runs both. Every step is bounded by what is left of BUDGET seconds; results in
# $OUT/smallm-width.tgz and the table beside it.
set -uo pipefail
source bench/device-lib.sh
SH=${SHAPES:-1x4096x4096,8x4096x4096,16x4096x4096,16x11008x4096,9x14336x4096,17x4096x4096,24x2048x8192,32x4096x4096,24x5120x5120,20x8192x8192,32x8192x8192,32x14336x4096,28x4096x11008,30x5120x13824,40x4096x4096,48x8192x8192,64x4096x4096,64x14336x4096,33x8191x4099,24x8191x4099,33x1023x777,1x4097x777,32x1000x3000}
COLS_AB=${COLS_AB:-plan w1 w2 w4 hopper}

if [[ $PART == *check* ]]; then
  timeout $(cap 150) $T --test-threads=2 gemv:: > $R/gemv-tests.txt 2>&1
  stamp "small-M tests exit $?: $(grep 'test result' $R/gemv-tests.txt)"; grep -E "^test .*FAILED|panicked|skipped" $R/gemv-tests.txt | head
  timeout $(cap 150) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 gpu_small_m_every_width \
    > $R/memcheck-every-width.txt 2>&1
  stamp "memcheck exit $?: $(grep -E 'ERROR SUMMARY' $R/memcheck-every-width.txt | tail -1) $(grep 'test result' $R/memcheck-every-width.txt)"
  timeout $(cap 120) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 gpu_small_m_unaligned_rows \
    > $R/memcheck-unaligned-rows.txt 2>&1
  stamp "memcheck (unaligned rows) exit $?: $(grep -E 'ERROR SUMMARY' $R/memcheck-unaligned-rows.txt | tail -1) $(grep 'test result' $R/memcheck-unaligned-rows.txt)"
fi

if [[ $PART == *ab* ]]; then
  for col in $COLS_AB; do
    case $col in
      plan) envs=() ;;
      w*) envs=(FERROTUNE_SMALL_M_WIDTH=${col#w} FERROTUNE_SMALL_M_BESIDE_HOPPER=64) ;;
      hopper) envs=(FERROTUNE_SMALL_M_BESIDE_HOPPER=0) ;;
      xcopies) envs=(FERROTUNE_SMALL_M_X_COPIES=1) ;;
      pack32) envs=(FERROTUNE_SMALL_M_BESIDE_HOPPER=32) ;;
    esac
    env "${envs[@]}" FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 90) $X bench --ops gemm --dtypes bf16 --shapes $SH \
      --json $R/gemm-$col-bf16.json > $R/gemm-$col-bf16.txt 2>&1; stamp "$col exit $?"
  done
  timeout $(cap 100) python3 benches/torch_gemm.py --shapes $SH --dtypes bf16 \
    --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
  COLS="$COLS_AB" python3 bench/tile_table.py $R > $R/ab-table.md
  cat $R/ab-table.md; cp $R/ab-table.md $OUT/
fi
tar -czf $OUT/smallm-width.tgz -C $R .
stamp done
