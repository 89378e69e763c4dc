#!/usr/bin/env bash
# Is a tuned profile the same from one run to the next? The 8 bf16 GEMM shapes of the multi-GPU
# tuning run, tuned RUNS times (default 2) on GPU 0 with each --min-gain in GAINS (percent;
# default "0 2": the plain fastest, and the default margin), every profile compared with the
# first of its margin (bench/multigpu_tune.py compare).
# Results: $OUT/tune-repeat.json, $OUT/tune-repeat-logs.tgz.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} FERROTUNE_REQUIRE_GPU=1
R=$OUT/tune-repeat-logs; mkdir -p $R
SHAPES=${SHAPES:-4096x4096x4096,4096x4096x2048,2048x4096x4096,4096x2048x4096,2048x2048x8192,3072x3072x3072,8192x2048x2048,2048x8192x2048}
echo "{\"commit\": \"$(cat .carry/commit)\", \"date\": \"$(date -u +%FT%TZ)\", \"device\": \"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)\", \"runs\": [" > $OUT/tune-repeat.json
first=1
for g in ${GAINS:-0 2}; do
  for r in $(seq 1 ${RUNS:-2}); do
    p=$R/gain$g-run$r.toml
    s=$SECONDS
    timeout 150 .carry/xtask tune --ops gemm --dtypes ${DTYPES:-bf16} --layouts rc --sizes $SHAPES --strategy model --budget 32 \
      --iters 10 --confirm-iters 30 --devices 0 --min-gain $g --profile $p > $R/gain$g-run$r.txt 2>&1
    e=$?; t=$((SECONDS - s))
    grep -E "took|within --min-gain" $R/gain$g-run$r.txt | head -12
    cmp=$(python3 bench/multigpu_tune.py compare $R/gain$g-run1.toml $p)
    [ $first = 1 ] || echo "," >> $OUT/tune-repeat.json; first=0
    echo "{\"min_gain_percent\": $g, \"run\": $r, \"exit\": $e, \"seconds\": $t, \"vs_run1\": $cmp}" >> $OUT/tune-repeat.json
    echo "gain $g run $r: exit $e, $t s; vs run 1: $(echo "$cmp" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["same_configs"], d["configs_that_differ"])')"
  done
done
echo "]}" >> $OUT/tune-repeat.json
tar -czf $OUT/tune-repeat-logs.tgz -C $OUT tune-repeat-logs && rm -rf $R
