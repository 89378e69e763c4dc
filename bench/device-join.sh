#!/usr/bin/env bash
# The Hopper split-K join through bulk copies into the ring (issue 12): the split and TF32 GPU
# tests, compute-sanitizer (memcheck, racecheck, synccheck) on the split tests, then the plan
# on the long-K shapes against cuBLAS and torch (bench/device-longk.sh PART=ab), then the
# irregular suite (bench/device-graph.sh PART=bench, which also reruns issue 11's rows).
# Usage on the device: bash bench/device-join.sh
set -uo pipefail
source bench/device-lib.sh
timeout $(cap 150) $T --test-threads=2 gemm_sm90_split sm90_tf32 sm90_edge > $R/split-tests.txt 2>&1
stamp "split tests exit $?: $(grep 'test result' $R/split-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/split-tests.txt | head
for tool in memcheck racecheck synccheck; do
  timeout $(cap 80) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
    gpu_sm90_split_k_is_deterministic_and_reusable gpu_sm90_split_k_cluster_tiles > $R/$tool.txt 2>&1
  stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/$tool.txt | tr '\n' ' ')"
done
mkdir -p $R/longk $R/graph
PART=ab COLS="${COLS:-plan 1}" SHAPES=${SHAPES:-256x256x65536,160x2048x20000,200x600x30000,512x512x32768,400x1100x16000,128x1024x40000,192x768x30000} \
  BUDGET=$(cap 170) OUT=$R/longk bash bench/device-longk.sh > $R/longk.txt 2>&1
stamp "longk exit $?"; grep -E "geomean" $R/longk.txt
PART=bench BUDGET=$(cap 150) OUT=$R/graph bash bench/device-graph.sh > $R/graph.txt 2>&1
stamp "bench exit $?"; grep -E "geomean" $R/graph.txt
cp $R/device.txt $R/longk/longk-table.md $R/graph/*.md $OUT/ 2>/dev/null
tar -czf $OUT/join.tgz -C $R .
stamp done
