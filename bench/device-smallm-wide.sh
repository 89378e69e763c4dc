#!/usr/bin/env bash
# The small-M family's wide variant (`kernels-gpu/src/gemv_wide.rs`: a slab per warp, x shared
# by the block's warps through L1) against the slab-per-block variant, on the H100, from a
# carry built by `bench/prepare-carry.sh`.
# PART=check: the small-M GPU tests with the wide variant on (FERROTUNE_SMALL_M_WIDE=1) and
#   with the default plan; compute-sanitizer memcheck and racecheck on the wide variant.
# PART=ab: small-M shapes (1 to 64 rows against weights of 4 to 117 M elements, aligned and
#   odd K) in columns: `old` (slab per block), `wide` (built-in K split), `wide1`/`wide2`/`wide4`
#   (forced K splits), `hop` (rows above 32 on the Hopper tiles, the plan before this work),
#   `plan` (the environment's plan), `b<r>` (rows above r on the Hopper tiles where they can run);
#   cuBLAS in the same process, then torch's `x @ w.T`; one table (`bench/tile_table.py`).
# PART=suite: the irregular suite (bf16, f16) with the wide variant (WIDE, default 1) and up to
#   BESIDE (default 64) rows on the small-M family, torch's `x @ w.T` first, joined per row.
# Every step is bounded by what is left of BUDGET seconds; results in $OUT.
set -uo pipefail
source bench/device-lib.sh
SM=${SHAPES:-1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,33x1023x777,1x4097x777,8x12288x4099,17x33x9000,32x4096x4096,48x8192x8192,64x14336x4096,24x5120x5120,2x28672x8192,40x3000x3001}

if [ "$PART" = check ]; then
  FERROTUNE_SMALL_M_WIDE=1 FERROTUNE_SMALL_M_BESIDE_HOPPER=64 timeout $(cap 150) $T --test-threads=2 gemv:: \
    > $R/wide-tests.txt 2>&1
  stamp "wide tests exit $?: $(grep 'test result' $R/wide-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/wide-tests.txt | head
  timeout $(cap 100) $T --test-threads=2 gemv:: > $R/default-tests.txt 2>&1
  stamp "default tests exit $?: $(grep 'test result' $R/default-tests.txt)"
  for tool in memcheck racecheck; do
    FERROTUNE_SMALL_M_WIDE=1 timeout $(cap 90) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
      gpu_small_m_split_k gpu_small_m_unaligned_rows gpu_small_m_odd_view > $R/$tool-wide.txt 2>&1
    stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-wide.txt | tail -1) $(grep 'test result' $R/$tool-wide.txt)"
  done
fi

if [ "$PART" = ab ]; then
  for col in ${COLS_AB:-old wide wide1 wide2 wide4 hop}; do
    unset FERROTUNE_SMALL_M_WIDE FERROTUNE_SMALL_M_KSPLIT
    export FERROTUNE_SMALL_M_BESIDE_HOPPER=64
    case $col in
      old) export FERROTUNE_SMALL_M_WIDE=0 ;;
      wide) export FERROTUNE_SMALL_M_WIDE=1 ;;
      wide[0-9]*) export FERROTUNE_SMALL_M_WIDE=1 FERROTUNE_SMALL_M_KSPLIT=${col#wide} ;;
      hop) export FERROTUNE_SMALL_M_BESIDE_HOPPER=32 ;;
      plan) unset FERROTUNE_SMALL_M_BESIDE_HOPPER ;;
      b[0-9]*) export FERROTUNE_SMALL_M_BESIDE_HOPPER=${col#b} ;;
    esac
    timeout $(cap 60) $X bench --ops gemm --dtypes bf16 --shapes $SM \
      --json $R/gemm-$col-bf16.json > $R/gemm-$col-bf16.txt 2>&1; stamp "$col bf16 exit $?"
  done
  unset FERROTUNE_SMALL_M_WIDE FERROTUNE_SMALL_M_KSPLIT FERROTUNE_SMALL_M_BESIDE_HOPPER
  timeout $(cap 100) python3 benches/torch_gemm.py --shapes $SM --dtypes bf16 \
    --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
  COLS="${COLS_AB:-old wide wide1 wide2 wide4 hop}" python3 bench/tile_table.py $R > $R/ab-table.md
  cat $R/ab-table.md; cp $R/ab-table.md $OUT/
fi
if [ "$PART" = suite ]; then
  # The irregular suite (bf16, f16) with the wide variant on and up to 64 rows beside Hopper
  # (WIDE, BESIDE: the environment's values), torch's peers first.
  SUITE=1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768
  timeout $(cap 60) python3 benches/torch_gemm.py --shapes $SUITE --dtypes bf16,f16 --rotate --warmup 3 \
    --iters 20 --json $R/torch-gemm-irregular-h100.json > $R/torch-gemm-irregular.txt 2>&1; stamp "torch suite exit $?"
  for dt in bf16 f16; do
    FERROTUNE_SMALL_M_WIDE=${WIDE:-1} FERROTUNE_SMALL_M_BESIDE_HOPPER=${BESIDE:-64} timeout $(cap 60) $X bench \
      --ops gemm --shape-suite irregular --dtypes $dt --warmup 3 --iters 20 \
      --json $R/gemm-irregular-$dt-h100.json > $R/gemm-irregular-$dt.txt 2>&1; stamp "suite $dt exit $?"
    python3 bench/gemm_join.py $R/gemm-irregular-$dt-h100.json $R/torch-gemm-irregular-h100.json \
      --markdown $R/gemm-irregular-$dt-vs-peers.md 2>&1 | tail -1
  done
  cp $R/*.md $OUT/ 2>/dev/null
fi
cp $R/device.txt $OUT/
tar -C $R -czf $OUT/smallm-wide-$PART.tgz .
