#!/usr/bin/env bash
# The persistent Hopper tiles with a whole tile of TMA-store buffers (15: 128 x 256, three
# stages, 4 boxes per warpgroup; 16: 128 x 192, four stages, 3 boxes) against their
# double-buffered forms (2: 128 x 256 s3, 8: 128 x 256 s4, 14: 128 x 192 s4), on the H100, from
# a carry built by `bench/prepare-carry.sh`.
# PART=check: the sm90 GPU tests (also with 3 persistent blocks), compute-sanitizer memcheck,
#   racecheck and synccheck on the TMA-store test with tiles 15 and 16 forced.
# PART=ab: short-K, mid-size and square bf16 shapes with the plan and each tile forced, cuBLAS
#   in the same process, then torch's `x @ w.T`; one table (`bench/tile_table.py`).
# PART=ncu: Nsight Compute on 8192x8192x512 bf16 for tiles 8 and 15 (speed of light, warp
#   states, and the per-instruction stall samples of the SASS), plus f16 on the squares and
#   K = 512-1024 shapes with the plan and tile 15 against cuBLAS.
# Every step is bounded by what is left of BUDGET seconds; results in $OUT/storebufs-$PART.tgz
# and the tables beside it.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-560}; PART=${PART:-check}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 10 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
bash bench/unpack-carry.sh || exit 1
C=.carry
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
R=$(mktemp -d); T=$C/ferrotune_tests; X=$C/xtask
{ echo "commit $FERROTUNE_COMMIT, $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader; } | tee $R/device.txt
MID=${SHAPES:-8192x8192x512,16384x1024x1024,6144x4096x1024,8192x3072x768,3072x3072x1536,4096x1024x768,2048x8192x1024,12288x4096x512,5120x5120x640,4096x4096x4096,8192x8192x8192,2048x2048x2048}

if [ "$PART" = check ]; then
  timeout $(cap 150) $T --test-threads=2 sm90 > $R/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/sm90-tests.txt | head
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 120) $T --test-threads=2 sm90_tma_store sm90_every_tile \
    > $R/sm90-3-blocks.txt 2>&1
  stamp "3 persistent blocks exit $?: $(grep 'test result' $R/sm90-3-blocks.txt)"; grep -E "panicked" $R/sm90-3-blocks.txt | head -3
  for tile in 15 16; do
    for tool in memcheck racecheck synccheck; do
      FERROTUNE_SM90_TILE=$tile FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 50) compute-sanitizer --tool $tool \
        --error-exitcode 9 $T --test-threads=1 sm90_strided_batches > $R/$tool-t$tile.txt 2>&1
      stamp "$tool (tile $tile) exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-t$tile.txt | tail -1) $(grep 'test result' $R/$tool-t$tile.txt)"
    done
  done
fi

if [ "$PART" = ab ]; then
  for col in plan 8 15 2 14 16; do
    if [ $col = plan ]; then unset FERROTUNE_SM90_TILE; else export FERROTUNE_SM90_TILE=$col; fi
    FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 70) $X bench --ops gemm --dtypes bf16 --shapes $MID \
      --json $R/gemm-$col-bf16.json > $R/gemm-$col-bf16.txt 2>&1; stamp "$col bf16 exit $?"
  done
  unset FERROTUNE_SM90_TILE
  timeout $(cap 100) python3 benches/torch_gemm.py --shapes $MID --dtypes bf16 \
    --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
  COLS="plan 8 15 2 14 16" python3 bench/tile_table.py $R > $R/ab-table.md
  cat $R/ab-table.md; cp $R/ab-table.md $OUT/
fi

if [ "$PART" = ncu ]; then
  SECT="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis"
  for tile in 8 15; do
    FERROTUNE_SM90_TILE=$tile timeout $(cap 120) ncu -k "regex:ft_gemm90_" --launch-skip 2 --launch-count 1 $SECT \
      -o $R/t$tile .carry/xtask bench --ops gemm --dtypes bf16 --iters 1 --warmup 2 --shapes 8192x8192x512 \
      > $R/ncu-t$tile-run.txt 2>&1; stamp "ncu tile $tile exit $?"
    ncu -i $R/t$tile.ncu-rep --print-details all > $R/t$tile-details.txt 2>&1
    ncu -i $R/t$tile.ncu-rep --page source --csv --print-source sass > $R/t$tile-sass.csv 2>&1
    stamp "source page exit $? ($(wc -l < $R/t$tile-sass.csv) lines)"
    grep -E "Duration|Pipe Tensor Cycles|Issue Slots Busy|Stall Barrier|Stall Long|Stall Wait|Stall GMMA" $R/t$tile-details.txt | head -8
  done
  rm -f $R/*.ncu-rep
  F16=8192x8192x8192,4096x4096x4096,8192x8192x512,6144x4096x1024,16384x1024x1024,3072x3072x1536
  for col in plan 15; do
    if [ $col = plan ]; then unset FERROTUNE_SM90_TILE; else export FERROTUNE_SM90_TILE=$col; fi
    FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 60) $X bench --ops gemm --dtypes f16 --shapes $F16 \
      --json $R/gemm-$col-f16.json > $R/gemm-$col-f16.txt 2>&1; stamp "$col f16 exit $?"
  done
  unset FERROTUNE_SM90_TILE
  COLS="plan 15" python3 bench/tile_table.py $R > $R/f16-table.md; cat $R/f16-table.md; cp $R/f16-table.md $OUT/
fi
tar -czf $OUT/storebufs-$PART.tgz -C $R .
stamp done
