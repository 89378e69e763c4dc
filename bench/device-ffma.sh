#!/usr/bin/env bash
# One device call for the exact-f32 FFMA GEMM (issue 12 item 5): the GEMM tests of the f32
# path, `bench --ops gemm --dtypes f32` against cuBLAS, the torch f32 peer (TF32 off) in the
# same call, Nsight Compute on our FFMA kernel (stall reasons included) and cuBLAS's, and
# compute-sanitizer on the FFMA tests (SAN_ENV: VAR=V for them). PART: any of
# check,bench,ncu,san (default all). FFMA_TILES: the FFMA tiles to force one by one beside the
# plan (`FERROTUNE_FFMA_TILE`), e.g. "0 1"; FFMA_COLS: further columns as NAME:VAR=V[,VAR=V]
# (e.g. "db:FERROTUNE_FFMA_DB=1"), each tested, benched and profiled. PART tune: the tuner on
# exact f32 (`tune --dtypes f32`, exhaustive, the model's first pick replayed) over TUNE_SHAPES
# (default SHAPES), then `bench` of SHAPES with that profile (column `tuned`) and without
# (`plan`) in one call, and `profile explain` of each shape. Results in $OUT/ffma.tgz.
set -uo pipefail
BUDGET=${BUDGET:-560}; PART=${PART:-check,bench,ncu,san}
source bench/device-lib.sh
has() { [[ ",$PART," == *",$1,"* ]]; }
TESTS=${TESTS:-ffma gpu_gemm_matches_f64 gpu_gemm_large_k}
# The environment of a column: plan (none), a tile number, or NAME:VAR=V,VAR=V.
col_env() { case $1 in plan) echo "";; *:*) echo "${1#*:}" | tr ',' ' ';; *) echo "FERROTUNE_FFMA_TILE=$1";; esac; }
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192,2048x2048x2048,4000x4000x4000,1000x3000x700,8192x3072x768,512x3072x768,3000x5000x1000,1536x1536x4099}
if has check; then
  stamp "tests"
  timeout $(cap 200) $T --test-threads=4 $TESTS > $R/tests.txt 2>&1
  echo "tests exit $?"; grep -E "test result|panicked|FAILED|skipped" $R/tests.txt | head -20
  for t in ${FFMA_COLS:-}; do
    env $(col_env $t) timeout $(cap 120) $T --test-threads=4 $TESTS > $R/tests-${t%%:*}.txt 2>&1
    echo "tests (${t%%:*}) exit $?"; grep -E "test result|panicked|FAILED" $R/tests-${t%%:*}.txt | head -8
  done
fi
if has bench; then
  for t in plan ${FFMA_TILES:-} ${FFMA_COLS:-}; do
    stamp "bench f32 ($t)"
    env=$(col_env $t); t=${t%%:*}
    env $env timeout $(cap 150) $X bench --ops gemm --dtypes f32 --shapes $SHAPES --iters 20 --warmup 3 \
      --json $R/gemm-f32-$t.json > $R/gemm-f32-$t.txt 2>&1
    echo "bench $t exit $?"; grep -E "^gemm|f32 " $R/gemm-f32-$t.txt | grep -v "^ *$" | cut -c1-170 | head -24
  done
  stamp "torch f32"
  timeout $(cap 120) python3 benches/torch_gemm.py --shapes $SHAPES --dtypes f32 --warmup 3 --iters 20 \
    --json $R/torch-f32.json > $R/torch-f32.txt 2>&1
  echo "torch exit $?"; tail -12 $R/torch-f32.txt | cut -c1-160
fi
if has tune; then
  stamp "tune f32"
  timeout $(cap 300) $X tune --ops gemm --dtypes f32 --layouts rc --sizes ${TUNE_SHAPES:-$SHAPES} --strategy exhaustive \
    --compare-model 1 --profile $R/f32.toml --json $R/tune-f32.json > $R/tune-f32.log 2>&1
  echo "tune exit $?"; sed -n '/op \/ shape/,$p' $R/tune-f32.log | cut -c1-170 | head -40
  for t in plan tuned; do
    stamp "bench f32 ($t)"
    env=""; [ $t = tuned ] && env="FERROTUNE_PROFILE=$R/f32.toml FERROTUNE_PROFILE_STRICT=1"
    env $env timeout $(cap 150) $X bench --ops gemm --dtypes f32 --shapes $SHAPES --iters 20 --warmup 3 \
      --json $R/gemm-f32-$t.json > $R/gemm-f32-$t.txt 2>&1
    echo "bench $t exit $?"; grep -E "^gemm|f32 " $R/gemm-f32-$t.txt | grep -v "^ *$" | cut -c1-170 | head -24
  done
  for s in ${SHAPES//,/ }; do
    FERROTUNE_PROFILE=$R/f32.toml $X profile explain --op gemm --dtype f32 --shape $s --layout rc 2>&1 | head -4
  done > $R/explain-f32.txt
  head -60 $R/explain-f32.txt | cut -c1-200
fi
if has ncu; then
  for t in ${FFMA_TILES:-plan} ${FFMA_COLS:-}; do
    env=$(col_env $t); t=${t%%:*}
    stamp "ncu ours ($t)"
    env $env timeout $(cap 90) ncu -k regex:ft_gemm_f32 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
      $X bench --ops gemm --dtypes f32 --shapes 4096x4096x4096 --iters 1 --warmup 0 > $R/ncu-ours-$t.txt 2>&1
    echo "ncu exit $?"; grep -E "ft_gemm|Duration|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Shared Memory Configuration Size|Block Limit" $R/ncu-ours-$t.txt | head -16
    grep -E "issue_stalled" $R/ncu-ours-$t.txt | sort -k3 -n -r | head -8
  done
  stamp "ncu cuBLAS"
  timeout $(cap 90) ncu -k 'regex:^(?!ft_)' --launch-count 4 --section SpeedOfLight --section LaunchStats --section Occupancy \
    $X bench --ops gemm --dtypes f32 --shapes 4096x4096x4096 --iters 1 --warmup 0 > $R/ncu-cublas.txt 2>&1
  echo "ncu exit $?"; grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Registers Per|Block Size|Grid Size|Shared Memory Per|Achieved Occupancy" $R/ncu-cublas.txt | head -40
fi
if has san; then
  for tool in memcheck racecheck synccheck; do
    env ${SAN_ENV:-} timeout $(cap 120) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 $TESTS > $R/san-$tool.txt 2>&1
    echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/san-$tool.txt | tail -2 | tr '\n' ' ')"
  done
fi
cp $R/device.txt $R/device-info.txt 2>/dev/null
tar -czf $OUT/ffma.tgz -C $R .
stamp "done"
