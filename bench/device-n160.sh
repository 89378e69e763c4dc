#!/usr/bin/env bash
# The 128 x 160 Hopper tiles (19: persistent, 20: persistent in clusters of two along M, 21:
# one-tile): the sm90 GPU tests (every tile forced, the TMA-store edges with 64-byte boxes, the
# clusters), then two classes of shapes chosen before any run, timed as the irregular suite
# times them (ours single/queued/graph beside cuBLAS) under the plan and with each candidate
# tile forced, torch in the same call: P, large problems whose D the TMA store writes (plan:
# 128 x 256, 128 x 192 or 128 x 160 by wave fill); O, D rows that are not whole 16-byte chunks
# (plan: one-tile 128 x 256 or 128 x 160). Everything is tarred into $OUT.
# SANITIZE=1 adds (TIMING=0 alone) compute-sanitizer memcheck, racecheck and synccheck with
# each of tiles 19-21 forced on the strided and fall-back tests (three blocks per persistent
# grid, so blocks walk many tiles) and memcheck on the TMA-store edges (every tile).
# Usage: BUDGET=590 bash bench/device-n160.sh
set -uo pipefail
source bench/device-lib.sh
P=${P:-2048x5120x5120,1664x3072x1536,1100x2048x264,5120x5120x1024,4096x2560x2048,3072x3072x1536,2560x4096x1024,6000x6000x6000,3000x5000x2000,4096x13824x5120,1024x4096x11008,3072x768x3072,2048x6144x2048,1536x8192x4096,4096x4096x4096,6144x4096x1024,3000x1200x3000}
O=${O:-5000x300x4000,7000x330x2048,6000x450x3000,4096x4100x4096,2048x5118x5120,8000x620x2000,3001x2999x1001}
DT=${DT:-bf16}
D=$R/n160; mkdir -p $D; cp $R/device.txt $D/
if [ "${TESTS:-1}" = 1 ]; then
  timeout $(cap 170) $T --test-threads=2 sm90 > $D/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $D/sm90-tests.txt | tr '\n' ' ')"
  grep -E "FAILED|panicked" $D/sm90-tests.txt | head -5
fi
if [ "${TIMING:-1}" = 1 ]; then
timeout $(cap 90) python3 benches/torch_gemm.py --shapes $P,$O --dtypes $DT --rotate --warmup 3 --iters 20 \
  --json $D/torch.json > $D/torch.txt 2>&1; stamp "torch exit $?"
suite() { # name shapes [env...]
  local name=$1 shapes=$2; shift 2
  env "$@" timeout $(cap 70) $X bench --ops gemm --shape-suite irregular --shapes $shapes --dtypes $DT --warmup 3 \
    --iters 20 --json $D/$name.json > $D/$name.txt 2>&1; stamp "$name exit $?"; }
suite p-auto $P
suite p-tile8 $P FERROTUNE_SM90_TILE=8
suite p-tile19 $P FERROTUNE_SM90_TILE=19
suite o-auto $O
suite o-tile0 $O FERROTUNE_SM90_TILE=0
suite o-tile21 $O FERROTUNE_SM90_TILE=21
suite p-tile20 $P FERROTUNE_SM90_TILE=20
suite p-tile14 $P FERROTUNE_SM90_TILE=14
python3 bench/classes_table.py $D p o | tee $D/table.txt
for s in p o; do python3 bench/gemm_join.py $D/$s-auto.json $D/torch.json --markdown $D/$s-auto-vs-peers.md 2>&1 | tail -1; done
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck synccheck; do
    for t in 19 20 21; do
      FERROTUNE_SM90_TILE=$t FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 60) compute-sanitizer --tool $tool --error-exitcode 9 \
        $T --test-threads=1 sm90_strided sm90_falls_back > $D/sanitizer-$tool-$t.txt 2>&1
      stamp "$tool tile $t: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $D/sanitizer-$tool-$t.txt | tr '\n' ' ')"
    done
  done
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 150) compute-sanitizer --tool memcheck --error-exitcode 9 \
    $T --test-threads=1 sm90_tma_store_epilogue_edges > $D/sanitizer-memcheck-store-edges.txt 2>&1
  stamp "memcheck store edges: exit $? $(grep -E 'ERROR SUMMARY|test result' $D/sanitizer-memcheck-store-edges.txt | tr '\n' ' ')"
fi
tar -czf $OUT/n160.tgz -C $R n160
cp $D/table.txt $D/*-vs-peers.md $D/device.txt $OUT/ 2>/dev/null
stamp done
