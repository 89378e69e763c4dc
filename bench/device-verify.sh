#!/usr/bin/env bash
# One device call (the machine is released 30 s after a call): issue 12's 17-32-row class and
# issue 15's verification of the cluster-backward rule.
# 1. GEMM, bf16, 9-32 rows of x against aligned weights the plan keeps on the small-M family
#    (below 3 x 2^23 elements from 17 rows, 2^25 from 9): the plan against the Hopper streaming
#    tile forced from 9 rows (h8) unsplit by its own rule and in 4 K slices, the 64 x 128
#    tile of two blocks an SM (t9) in 4, and the candidate rule `gemm_sm90_class::few_rows_split`
#    (f1: slices of at least 16 k-tiles; f1+F8: 8) (bench/device-rows.sh PART=ab; torch in the
#    same call; rows-table-bf16.md); then the small-M and split GEMM GPU tests with the
#    candidate on (few-tests.txt) and memcheck on three shapes it splits (few-memcheck.txt).
# 2. Clifford (bench/device-clifroof.sh): the GPU tests, the fwd+bwd rows as built, bf16's
#    cluster against split forms in one sweep, compute-sanitizer on the cluster tests.
set -uo pipefail
S0=$(date +%s); TOTAL=${TOTAL:-560}
rest() { echo $(( TOTAL - ($(date +%s) - S0) - ${1:-0} )); }
ROWS_SHAPES=${ROWS_SHAPES:-24x3584x3584,32x4096x4096,17x4096x4096,24x2048x8192,28x3072x5120,20x5120x4096,16x4096x4096,12x3584x3584}
PART=ab DTYPES=bf16 SHAPES=$ROWS_SHAPES COLS="${ROWS_COLS:-plan f1 f1+F8 h8 h8+p4 h8+t9+p4}" BUDGET=${ROWS_BUDGET:-240} \
  bash bench/device-rows.sh > $OUT/rows.log 2>&1
echo "rows exit $?"; tail -25 $OUT/rows.log
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 FERROTUNE_REQUIRE_GPU=1
FERROTUNE_SM90_FEW_ROWS_SPLIT=1 FERROTUNE_SM90_FEW_ROWS_MIN_KT=8 timeout 90 .carry/ferrotune_tests --test-threads=2 \
  gpu_small_m_edge gpu_small_m_random gpu_gemm_matches gpu_sm90_split_k_shapes > $OUT/few-tests.txt 2>&1
echo "few-rows tests exit $?"; grep -E "test result|FAILED|panicked" $OUT/few-tests.txt | head
FERROTUNE_SM90_FEW_ROWS_SPLIT=1 FERROTUNE_SM90_FEW_ROWS_MIN_KT=8 timeout 60 compute-sanitizer --tool memcheck \
  .carry/xtask bench --ops gemm --shape-suite irregular --shapes 24x3584x3584,17x1024x1100,12x3584x3584 --dtypes bf16 \
  --warmup 0 --iters 1 > $OUT/few-memcheck.txt 2>&1
echo "few-rows memcheck exit $?"; grep -E "ERROR SUMMARY|test result" $OUT/few-memcheck.txt
PART=tests,bench,sweep,san T_TESTS=60 T_BENCH=45 SHAPES=4096x777,4096x1024 UNSEEN_ROWS=fwdbwd \
  UNSEEN=4096x600,2048x900,4096x1300,3000x1536 SWEEP_ROWS=fwdbwd_sweep SWEEP_DTYPES=bf16 \
  SWEEP_SHAPES=4096x777,3000x1536 FERROTUNE_SWEEP_FORMS=cluster,split SAN_TESTS=gpu_clifford_cluster T_SAN=40 \
  timeout $(rest 15) bash bench/device-clifroof.sh > $OUT/clif.log 2>&1
echo "clifroof exit $?"; cat $OUT/clif.log | cut -c1-200 | tail -60
[ -f $OUT/clifroof.tgz ] || tar -czf $OUT/clifroof.tgz -C $OUT clifroof
