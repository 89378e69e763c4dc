#!/usr/bin/env bash
# The persistent Hopper tiles with a whole tile of TMA-store buffers (15: 128 x 256, three
# stages, 4 boxes per warpgroup; 16: 128 x 192, four stages, 3 boxes) against their
# double-buffered forms (2: 128 x 256 s3, 8: 128 x 256 s4, 14: 128 x 192 s4), on the H100, from
# a carry built by `bench/prepare-carry.sh`.
# PART=check: the sm90 GPU tests (also with 3 persistent blocks), compute-sanitizer memcheck,
#   racecheck and synccheck (TOOLS) on the strided-batch test with tiles 15 and 16 (CHECK_TILES;
#   the ping-pong tiles with their TMA store: CHECK_TILES="4 6") forced.
# PART=ab: short-K, mid-size and square bf16 shapes with the plan and each tile forced, cuBLAS
#   in the same process, then torch's `x @ w.T`; one table (`bench/tile_table.py`).
# PART=ncu: Nsight Compute (speed of light, warp states, memory, and the per-instruction stall
#   samples of the SASS) on 8192x8192x512 bf16 for tile 8 and torch's kernel, and on the
#   small-M kernel at 33x8191x4099 and 16x11008x4096.
# Every step is bounded by what is left of BUDGET seconds; results in $OUT/storebufs-$PART.tgz
# and the tables beside it.
set -uo pipefail
source bench/device-lib.sh
MID=${SHAPES:-8192x8192x512,16384x1024x1024,6144x4096x1024,8192x3072x768,3072x3072x1536,4096x1024x768,2048x8192x1024,12288x4096x512,5120x5120x640,4096x4096x4096,8192x8192x8192,2048x2048x2048}

if [ "$PART" = check ]; then
  timeout $(cap 150) $T --test-threads=2 sm90 > $R/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/sm90-tests.txt | head
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 120) $T --test-threads=2 sm90_tma_store sm90_every_tile \
    > $R/sm90-3-blocks.txt 2>&1
  stamp "3 persistent blocks exit $?: $(grep 'test result' $R/sm90-3-blocks.txt)"; grep -E "panicked" $R/sm90-3-blocks.txt | head -3
  for tile in ${CHECK_TILES:-15 16}; do
    for tool in ${TOOLS:-memcheck racecheck synccheck}; do
      FERROTUNE_SM90_TILE=$tile FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 50) compute-sanitizer --tool $tool \
        --error-exitcode 9 $T --test-threads=1 sm90_strided_batches > $R/$tool-t$tile.txt 2>&1
      stamp "$tool (tile $tile) exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-t$tile.txt | tail -1) $(grep 'test result' $R/$tool-t$tile.txt)"
    done
  done
fi

if [ "$PART" = ab ]; then
  for col in ${COLS_AB:-plan 8 15 2 14 16}; do
    if [ $col = plan ]; then unset FERROTUNE_SM90_TILE; else export FERROTUNE_SM90_TILE=$col; fi
    FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 70) $X bench --ops gemm --dtypes bf16 --shapes $MID \
      --json $R/gemm-$col-bf16.json > $R/gemm-$col-bf16.txt 2>&1; stamp "$col bf16 exit $?"
  done
  unset FERROTUNE_SM90_TILE
  timeout $(cap 100) python3 benches/torch_gemm.py --shapes $MID --dtypes bf16 \
    --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
  COLS="${COLS_AB:-plan 8 15 2 14 16}" python3 bench/tile_table.py $R > $R/ab-table.md
  cat $R/ab-table.md; cp $R/ab-table.md $OUT/
fi

if [ "$PART" = ncu ]; then
  # Per-instruction stall samples (SourceCounters) of our planned kernel and torch's on
  # 8192x8192x512 bf16, and of the small-M kernel on 33x8191x4099 (forced beside Hopper).
  SECT="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
  prof() { # name, kernel regex, command...
    local name=$1 re=$2; shift 2
    timeout $(cap 120) ncu -k "regex:$re" --launch-skip 2 --launch-count 1 $SECT -o $R/$name "$@" > $R/ncu-$name-run.txt 2>&1
    stamp "ncu $name exit $?"
    ncu -i $R/$name.ncu-rep --print-details all > $R/$name-details.txt 2>&1
    ncu -i $R/$name.ncu-rep --page source --csv --print-source sass > $R/$name-sass.csv 2>&1
    stamp "$name source page exit $? ($(wc -l < $R/$name-sass.csv) lines)"
    grep -E "Duration|Pipe Tensor Cycles|Issue Slots Busy|Stall Barrier|Stall Long|Stall Wait|Stall GMMA|DRAM Throughput" $R/$name-details.txt | head -9
  }
  prof ours-t8 ft_gemm90_ env FERROTUNE_SM90_TILE=8 .carry/xtask bench --ops gemm --dtypes bf16 --iters 1 --warmup 2 --shapes 8192x8192x512
  [ -n "${OURS_ONLY:-}" ] && { rm -f $R/*.ncu-rep; tar -czf $OUT/storebufs-$PART.tgz -C $R .; exit 0; }
  prof torch "nvjet|sm90_xmma|cutlass" python3 bench/torch_one.py 8192x8192x512
  prof smallm ft_gemv_ env FERROTUNE_SMALL_M_BESIDE_HOPPER=64 .carry/xtask bench --ops gemm --dtypes bf16 --iters 1 --warmup 2 --shapes 33x8191x4099
  prof smallm-g2 ft_gemv_ .carry/xtask bench --ops gemm --dtypes bf16 --iters 1 --warmup 2 --shapes 16x11008x4096
  rm -f $R/*.ncu-rep
fi
tar -czf $OUT/storebufs-$PART.tgz -C $R .
stamp done
