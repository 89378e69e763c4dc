#!/usr/bin/env bash
# The FCGP with one GEMM per output grade (issue 15) on the H100, from a carry built by
# `bench/prepare-carry.sh` (sourcing bench/device-lib.sh). One call:
#   1. the FCGP GPU tests (forward against the float64 reference and the CPU, TF32 against
#      exact f32, the backward against the CPU and finite differences) and the PTX entry check;
#   2. ncu's per-kernel summary of the FCGP forward (products, weight copy, GEMMs, norm) and
#      compute-sanitizer memcheck and racecheck on the FCGP forward test (SAN_FILTER);
#   3. `bench --ops clifford --clifford-rows fcgp_fwd,fcgp_gemm,fcgp_gemms` in f32 (TF32) and
#      bf16 at B 4096 (N 512, 777, 1024) and B 8192 N 1024, 2D and 3D: each forward's FLOP rate
#      over our plain GEMM on M = total B, N, K = N (the measure) and over its own GEMM
#      calls alone;
#   4. the SGP rows at the sizes, to show they did not move (the FCGP change leaves the
#      SGP kernels alone).
# Results: $OUT/fcgp.tgz (everything) and the JSON and logs beside it.
set -uo pipefail
source bench/device-lib.sh
stamp "=== FCGP GPU tests (first: PTX JIT)"
timeout $(cap 200) $T --test-threads=1 gpu_clifford_fcgp gpu_fcgp_workspace every_entry > $R/fcgp-tests.txt 2>&1
stamp "tests exit $?: $(grep 'test result' $R/fcgp-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/fcgp-tests.txt | head
stamp "=== FCGP bench"
timeout $(cap 150) $X bench --ops clifford --clifford-rows fcgp_fwd,fcgp_gemm,fcgp_gemms --dtypes f32,bf16 \
  --shapes ${FCGP_SHAPES:-4096x512,4096x777,4096x1024,8192x1024} --json $R/clifford-fcgp-h100.json > $R/clifford-fcgp.txt 2>&1
stamp "fcgp bench exit $?"; grep -E "d[23] |error|ceiling" $R/clifford-fcgp.txt | head -60
stamp "=== ncu: the kernels of one FCGP forward (2D and 3D, f32, B4096 N512 and N777)"
timeout $(cap 120) ncu --print-summary per-kernel --section SpeedOfLight \
  $X bench --ops clifford --clifford-rows fcgp_fwd --dtypes f32 --shapes 4096x512,4096x777 --warmup 1 --iters 2 \
  > $R/ncu-fcgp.txt 2>&1
stamp "ncu exit $?"; grep -E "^  [a-z_0-9]+.*\(|Duration" $R/ncu-fcgp.txt | head -60
for tool in memcheck racecheck; do
  FERROTUNE_TEST_SMALL=1 timeout $(cap 150) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
    ${SAN_FILTER:-gpu_clifford_fcgp_matches} > $R/$tool-fcgp.txt 2>&1
  stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/$tool-fcgp.txt | tail -1) $(grep 'test result' $R/$tool-fcgp.txt)"
done
stamp "=== SGP rows (unchanged kernels)"
timeout $(cap 60) $X bench --ops clifford --clifford-rows fwd,fwdbwd --shapes 4096x512,4096x777,4096x1024,8192x1024 \
  --json $R/clifford-sgp-h100.json > $R/clifford-sgp.txt 2>&1
stamp "sgp bench exit $?"; grep -E "d[23] |ceiling" $R/clifford-sgp.txt | head -30
cp $R/clifford-fcgp-h100.json $R/clifford-fcgp.txt $R/fcgp-tests.txt $OUT/ 2>/dev/null
tar -C $R -czf $OUT/fcgp.tgz .
stamp "done"
