#!/usr/bin/env bash
# f32 GEMMs on TF32 with rows TMA cannot step (K or a leading dimension not a multiple of 4
# floats), packed into aligned rows for the Hopper path (issue 12; `ops::pack`, ft_pack_k_f32),
# on the H100 from a carry built by `bench/prepare-carry.sh`. One call:
#   1. the TF32 and pack GPU tests and the PTX entry check; compute-sanitizer memcheck on the
#      TF32 random-shape test (odd K packed, small problems on the mma.sync tiles);
#   2. `bench --ops gemm --dtypes tf32` on odd-K and odd-N shapes with the plan (pack) and with
#      FERROTUNE_PACK=0 (the mma.sync TF32 tiles: before), cuBLAS (TF32 compute) in the same
#      process, then torch's `x @ w.T` with allow_tf32; one table (`bench/tile_table.py`);
#   3. the FCGP rows at N = 777 (their plain-GEMM peer has K = 777 in f32).
# Results: $OUT/tf32-pack.tgz and the table beside it.
set -uo pipefail
source bench/device-lib.sh
SH=${SHAPES:-4097x1023x777,1024x1024x1023,2047x2049x1025,57344x777x777,8192x8192x8191,1000x3000x701,4096x4096x4095,512x3072x767,33x8191x4099,4096x4096x4096}
stamp "=== TF32 and pack GPU tests"
timeout $(cap 150) $T --test-threads=2 sm90_tf32 pack sm90_falls_back every_entry > $R/tests.txt 2>&1
stamp "tests exit $?: $(grep 'test result' $R/tests.txt)"; grep -E "^test .*FAILED|panicked" $R/tests.txt | head
FERROTUNE_TEST_SMALL=1 timeout $(cap 120) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 \
  sm90_tf32_random_shapes > $R/memcheck-tf32.txt 2>&1
stamp "memcheck exit $?: $(grep -E 'ERROR SUMMARY' $R/memcheck-tf32.txt | tail -1) $(grep 'test result' $R/memcheck-tf32.txt)"
for col in plan nopack; do
  if [ $col = nopack ]; then export FERROTUNE_PACK=0; else unset FERROTUNE_PACK; fi
  FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 90) $X bench --ops gemm --dtypes tf32 --shapes $SH \
    --json $R/gemm-$col-tf32.json > $R/gemm-$col-tf32.txt 2>&1; stamp "$col tf32 exit $?"
done
unset FERROTUNE_PACK
timeout $(cap 100) python3 benches/torch_gemm.py --shapes $SH --dtypes tf32 \
  --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
COLS="plan nopack" python3 bench/tile_table.py $R > $R/ab-table.md; cat $R/ab-table.md; cp $R/ab-table.md $OUT/
timeout $(cap 60) $X bench --ops clifford --clifford-rows fcgp_fwd,fcgp_gemm --dtypes f32 --shapes 4096x777 \
  --json $R/clifford-fcgp-h100.json > $R/clifford-fcgp.txt 2>&1
stamp "fcgp exit $?"; grep -E "d[23] " $R/clifford-fcgp.txt | head
tar -C $R -czf $OUT/tf32-pack.tgz .
stamp done
