#!/usr/bin/env bash
# One H100 call for the small-M L2 prefetch and the tuner's same-launch rule (issue 12, 14),
# from a carry built by `bench/prepare-carry.sh`:
#  1. `PART=check,pf bench/device-m1.sh`: the small-M GPU tests with memcheck, then the prefetch
#     distance A/B (0-3 warp steps) on 1-64-row shapes; the geomean-best distance is exported
#     as FERROTUNE_SMALL_M_PREFETCH for the steps below;
#  2. which launch the plan gives the shapes whose tuned configs flipped in multi-GPU run 5
#     (`xtask profile explain`);
#  3. the tuner twice on those shapes and the 8 of the multi-GPU run (bf16 and f16,
#     `bench/device-tune-repeat.sh`, margin 2%): the same profile both times?
#  4. the irregular suite (bf16, f16) with torch in the same call (`bench/device-irregular.sh`).
# Results (at most 8 files): m1-summary.txt, tune-repeat.json, gemm-irregular-vs-peers.md,
# explain.txt, smallm-pf.tgz (everything else).
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL=$OUT; W=$(mktemp -d); mkdir -p $W/m1
OUT=$W/m1 BUDGET=${M1_BUDGET:-230} PART=check,pf bash bench/device-m1.sh 2>&1 | grep -vE "^\s*$" | tail -40
cp $W/m1/m1-summary.txt $FINAL/ 2>/dev/null
pf=$(cat $W/m1/best-pf 2>/dev/null || echo 2); export FERROTUNE_SMALL_M_PREFETCH=$pf
echo "=== prefetch distance for the rest of this call: $pf"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for sh in 1024x8192x4096 2048x4096x4096 4096x4096x2048 4096x4096x4096; do
  for dt in bf16 f16; do
    echo "--- $dt $sh"; timeout 30 .carry/xtask profile explain --op gemm --dtype $dt --shape $sh 2>&1 | head -12
  done
done > $FINAL/explain.txt
grep -E "^---|path|family|kernel" $FINAL/explain.txt | head -40
mkdir -p $W/tune
OUT=$W/tune GAINS=2 RUNS=2 DTYPES=bf16,f16 \
  SHAPES=4096x4096x4096,4096x4096x2048,2048x4096x4096,4096x2048x4096,2048x2048x8192,3072x3072x3072,8192x2048x2048,2048x8192x2048,1024x8192x4096 \
  timeout 330 bash bench/device-tune-repeat.sh 2>&1 | tail -30
cp $W/tune/tune-repeat.json $FINAL/ 2>/dev/null
mkdir -p $W/irregular
OUT=$W/irregular BUDGET=${SUITE_BUDGET:-140} PARTS=torch,suite bash bench/device-irregular.sh 2>&1 | tail -12
cp $W/irregular/gemm-irregular-vs-peers.md $FINAL/ 2>/dev/null
tar -czf $FINAL/smallm-pf.tgz -C $W .
echo "total ${SECONDS} s"
