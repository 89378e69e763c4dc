#!/usr/bin/env bash
# The row small-M kernel (issue 12; `ops::gemv_rows`): groups of 8 weight rows 8 apart in their
# shared aligned frame, x staged per block in shared memory in that frame, products on tensor
# cores, for 1-64 rows of x against unaligned, short-K weights. Parts run in the order ab, check,
# ncu, suite.
# PART=check: the small-M GPU tests (slab, streaming and row kernels; the graph tests), the
# GEMM edge-shape, packed and tuned-family tests, the pool's threads and runtime tests, then
# the row kernel's tests again with its wide entries (FERROTUNE_SMALL_M_ROWS_R=64), then
# compute-sanitizer memcheck and racecheck on the row kernel's tests.
# PART=ab: `bench --ops gemm --shape-suite irregular` on SHAPES with each column of COLS (plan:
# as built; r0: FERROTUNE_SMALL_M_ROWS=0, the plan before the row kernel; r1: =1, the row kernel
# wherever it can run; s0, s1: FERROTUNE_SMALL_M_STREAM=0 or =1, the streaming kernel never or
# wherever it can run; w1, w2: FERROTUNE_SMALL_M_ROWS_BATCHES=1 or =2, the row kernel's batches
# per warp and row; x0, x1: FERROTUNE_SMALL_M_X_COPIES=0 or =1, x read in place by the
# interleaved slabs or from its shifted copies; hN: FERROTUNE_SMALL_M_BESIDE_HOPPER=N, unaligned
# weights read in place up to N rows of x, packed for the Hopper tiles above; m0:
# FERROTUNE_SMALL_M=0, no small-M family; k0: FERROTUNE_SMALL_M_SHORT_K_HOPPER=0, 33-64 rows
# of K below 1024 stay on small-M instead of the Hopper tiles (packed first where unaligned); RN: FERROTUNE_SMALL_M_ROWS_R=N, the row kernel's
# blocks take N rows of x each (16: slices of 16; 64: all rows where x fits); tN:
# FERROTUNE_SM90_TILE=N, pN: FERROTUNE_SM90_SPLIT=N (Hopper tile N, N K slices); a0:
# FERROTUNE_SMALL_M_ALIGNED_HOPPER=0 (aligned 17-64 rows of short K stay small-M); q1:
# FERROTUNE_SMALL_M_ROWS_WIDE_K=1 (17-32 rows of long K on large weights back on the row
# kernel); dN: FERROTUNE_SMALL_M_ROWS_STAGE=N (the row kernel stages x N vectors deep); f1:
# FERROTUNE_SM90_FEW_ROWS_SPLIT=1 (9-32 rows on the Hopper streaming tile in short K slices);
# FN: FERROTUNE_SM90_FEW_ROWS_MIN_KT=N (those slices' least k-tiles); tokens join
# with '+' (m0+t9+p4); a trailing b repeats a column later in the call), torch in the same call, then a table ($OUT/rows-table-<dtype>.md;
# DTYPES, default bf16 f16).
# PART=suite: the irregular suite with torch (bench/device-irregular.sh).
# PART=ncu: Nsight Compute of ours and cuBLAS on NCU_SHAPES (bench/device-ncu-stream.sh).
# Usage on the device: PART=check,ab bash bench/device-rows.sh
set -uo pipefail
source bench/device-lib.sh
SHAPES=${SHAPES:-1x4097x777,4x4097x777,8x4097x777,1x8000x600,1x5000x801,2x11008x999,7x12001x513,1x3000x1000,3x5x7,8x3000x65,1x1x777,5x777x333,1x50000x255,6x6000x100,33x1023x777,9x4097x777,17x2049x513,40x700x1001,12x5000x150,24x600x2999,16x4097x1023,1x8193x4099,5x3000x1999,8x12288x4099}
COLS=${COLS:-plan r0 r1 planb r0b}
AB_VARS="FERROTUNE_SM90_FEW_ROWS_SPLIT FERROTUNE_SM90_FEW_ROWS_MIN_KT FERROTUNE_SMALL_M_ALIGNED_HOPPER FERROTUNE_SMALL_M_ROWS_WIDE_K FERROTUNE_SMALL_M_ROWS_STAGE FERROTUNE_SM90_TILE FERROTUNE_SM90_SPLIT FERROTUNE_SMALL_M_ROWS_R FERROTUNE_SMALL_M_ROWS FERROTUNE_SMALL_M_STREAM FERROTUNE_SMALL_M_ROWS_BATCHES FERROTUNE_SMALL_M_X_COPIES FERROTUNE_SMALL_M_BESIDE_HOPPER FERROTUNE_SMALL_M FERROTUNE_SMALL_M_SHORT_K_HOPPER"
if [[ "$PART" == *ab* ]]; then
  for dt in ${DTYPES:-bf16 f16}; do
    mkdir -p $R/$dt
    for col in $COLS; do
      unset $AB_VARS
      # A column is one token or several joined by '+' (m0+p4: no small-M, 4 K slices).
      IFS=+ read -ra toks <<< "${col%b}"
      for c in "${toks[@]}"; do
        case $c in r0) export FERROTUNE_SMALL_M_ROWS=0;; r1) export FERROTUNE_SMALL_M_ROWS=1;;
          s0) export FERROTUNE_SMALL_M_STREAM=0;; s1) export FERROTUNE_SMALL_M_STREAM=1;;
          w1) export FERROTUNE_SMALL_M_ROWS_BATCHES=1;; w2) export FERROTUNE_SMALL_M_ROWS_BATCHES=2;;
          x0) export FERROTUNE_SMALL_M_X_COPIES=0;; x1) export FERROTUNE_SMALL_M_X_COPIES=1;;
          h[0-9]*) export FERROTUNE_SMALL_M_BESIDE_HOPPER=${c#h};; m0) export FERROTUNE_SMALL_M=0;;
          k0) export FERROTUNE_SMALL_M_SHORT_K_HOPPER=0;;
          t[0-9]*) export FERROTUNE_SM90_TILE=${c#t};; p[0-9]*) export FERROTUNE_SM90_SPLIT=${c#p};;
          a0) export FERROTUNE_SMALL_M_ALIGNED_HOPPER=0;; q1) export FERROTUNE_SMALL_M_ROWS_WIDE_K=1;;
          d[0-9]*) export FERROTUNE_SMALL_M_ROWS_STAGE=${c#d};;
          f1) export FERROTUNE_SM90_FEW_ROWS_SPLIT=1;; F[0-9]*) export FERROTUNE_SM90_FEW_ROWS_MIN_KT=${c#F};;
          R[0-9]*) export FERROTUNE_SMALL_M_ROWS_R=${c#R};; esac
      done
      timeout $(cap 70) $X bench --ops gemm --shape-suite irregular --shapes $SHAPES --dtypes $dt \
        --warmup 5 --iters 30 --json $R/$dt/suite-$col.json > $R/$dt/suite-$col.txt 2>&1
      stamp "$dt column $col exit $?"
    done
    unset $AB_VARS
    timeout $(cap 90) python3 benches/torch_gemm.py --shapes $SHAPES --dtypes $dt --rotate --warmup 5 --iters 30 \
      --json $R/$dt/torch.json > $R/$dt/torch.txt 2>&1
    stamp "$dt torch exit $?"
    COLS="$COLS" python3 bench/longk_table.py $R/$dt > $R/rows-table-$dt.md; cat $R/rows-table-$dt.md
    cp $R/rows-table-$dt.md $OUT/
  done
fi
if [[ "$PART" == *check* ]]; then
  timeout $(cap 200) $T --test-threads=2 gemv graph > $R/gemv-tests.txt 2>&1
  stamp "gemv + graph tests exit $?: $(grep 'test result' $R/gemv-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/gemv-tests.txt | head
  # The plan's other families on edge and random shapes (the Hopper tiles take aligned 17-64
  # rows of short K; the packed tiles).
  timeout $(cap 200) $T --test-threads=2 gpu_gemm_matches gpu_packed_unaligned gpu_tuned_family > $R/gemm-tests.txt 2>&1
  stamp "gemm edge + packed + tuned-family tests exit $?: $(grep 'test result' $R/gemm-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/gemm-tests.txt | head
  # The pool under threads (captures beside another thread's streams) and the runtime tests.
  timeout $(cap 120) $T --test-threads=2 pool_threads runtime > $R/runtime-tests.txt 2>&1
  stamp "pool + runtime tests exit $?: $(grep 'test result' $R/runtime-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/runtime-tests.txt | head
  # The wide entries (32, 48, 64 rows of x per block) run only when asked for: their tests too.
  FERROTUNE_SMALL_M_ROWS_R=64 timeout $(cap 120) $T --test-threads=2 gpu_small_m_rows > $R/rows-wide-tests.txt 2>&1
  stamp "row tests, FERROTUNE_SMALL_M_ROWS_R=64, exit $?: $(grep 'test result' $R/rows-wide-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/rows-wide-tests.txt | head
  for tool in memcheck racecheck; do
    timeout $(cap 120) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
      gpu_small_m_rows_ignore gpu_small_m_rows_random gpu_small_m_rows_every_team $([ $tool = memcheck ] && echo gpu_small_m_rows_edge) > $R/$tool.txt 2>&1
    stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/$tool.txt | tr '\n' ' ')"
  done
fi
if [[ "$PART" == *ncu* ]]; then
  OURS_RE="regex:^ft_gemv" SHAPES="${NCU_SHAPES:-1x4097x777 8x3000x65}" timeout $(cap 200) bash bench/device-ncu-stream.sh > $R/ncu.txt 2>&1
  stamp "ncu exit $?"; cp $R/ncu.txt $OUT/
fi
if [[ "$PART" == *suite* ]]; then
  PARTS=torch,suite BUDGET=$(cap 260) OUT=$R/irregular bash bench/device-irregular.sh > $R/irregular.txt 2>&1
  stamp "irregular suite exit $?"; grep -E "geomean|worst|below" $R/irregular.txt | head -12
  cp $R/irregular/*.md $OUT/ 2>/dev/null
fi
cp $R/device.txt $OUT/
tar -czf $OUT/rows-$(echo $PART | tr ',' '-').tgz -C $R .
stamp done
