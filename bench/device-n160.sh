#!/usr/bin/env bash
# The one-tile 128 x 160 Hopper tile (19; wgmma N 160, six stages): the sm90 GPU tests (every
# tile forced, the TMA-store edges with 64-byte boxes), then D rows the TMA store cannot write
# (16-bit N not a multiple of 8), timed as the irregular suite times them (ours single/queued/
# graph beside cuBLAS) under the plan and with the one-tile 128 x 256 (0) and 128 x 160 (19)
# forced, torch in the same call: O, the shapes of the first run; O2, shapes chosen after it to
# check the rule (the plan takes 19 where its grid takes no more waves than 128 x 256's: the
# first four; the last three take 0). SANITIZE=1 adds compute-sanitizer memcheck, racecheck and
# synccheck with tile 19 forced on the strided and fall-back tests, and memcheck on the
# TMA-store edges (every tile); TIMING=0 skips the timing; FORCED lists the tiles forced
# (default 0 19). Everything is tarred into $OUT.
# The first run (bench/results/n160-branch/h100-adfb111/) was of the branch, whose tiles 19
# and 20 were a persistent 128 x 160 (alone, in clusters of two) and 21 the one-tile one; its
# script is in bench/results/n160-branch/hopper-n160.patch.
# Usage: BUDGET=590 bash bench/device-n160.sh
set -uo pipefail
source bench/device-lib.sh
O=${O:-5000x300x4000,7000x330x2048,6000x450x3000,4096x4100x4096,2048x5118x5120,8000x620x2000,3001x2999x1001}
O2=${O2:-9000x300x2048,6000x600x4096,12000x310x1024,16000x300x1000,4000x1001x3000,7500x470x1500,5000x610x4000}
DT=${DT:-bf16}
D=$R/n160; mkdir -p $D; cp $R/device.txt $D/
if [ "${TESTS:-1}" = 1 ]; then
  timeout $(cap 170) $T --test-threads=2 sm90 > $D/sm90-tests.txt 2>&1
  stamp "sm90 tests exit $?: $(grep 'test result' $D/sm90-tests.txt | tr '\n' ' ')"
  grep -E "FAILED|panicked" $D/sm90-tests.txt | head -5
fi
if [ "${TIMING:-1}" = 1 ]; then
  timeout $(cap 90) python3 benches/torch_gemm.py --shapes $O,$O2 --dtypes $DT --rotate --warmup 3 --iters 20 \
    --json $D/torch.json > $D/torch.txt 2>&1; stamp "torch exit $?"
  suite() { # name shapes [env...]
    local name=$1 shapes=$2; shift 2
    env "$@" timeout $(cap 70) $X bench --ops gemm --shape-suite irregular --shapes $shapes --dtypes $DT --warmup 3 \
      --iters 20 --json $D/$name.json > $D/$name.txt 2>&1; stamp "$name exit $?"; }
  suite o-auto $O,$O2
  for t in ${FORCED:-0 19}; do suite o-tile$t $O,$O2 FERROTUNE_SM90_TILE=$t; done
  python3 bench/classes_table.py $D o | tee $D/table.txt
  python3 bench/gemm_join.py $D/o-auto.json $D/torch.json --markdown $D/o-auto-vs-peers.md 2>&1 | tail -1
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck synccheck; do
    FERROTUNE_SM90_TILE=19 timeout $(cap 60) compute-sanitizer --tool $tool --error-exitcode 9 \
      $T --test-threads=1 sm90_strided sm90_falls_back > $D/sanitizer-$tool-19.txt 2>&1
    stamp "$tool tile 19: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $D/sanitizer-$tool-19.txt | tr '\n' ' ')"
  done
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 150) compute-sanitizer --tool memcheck --error-exitcode 9 \
    $T --test-threads=1 sm90_tma_store_epilogue_edges > $D/sanitizer-memcheck-store-edges.txt 2>&1
  stamp "memcheck store edges: exit $? $(grep -E 'ERROR SUMMARY|test result' $D/sanitizer-memcheck-store-edges.txt | tr '\n' ' ')"
fi
tar -czf $OUT/n160.tgz -C $R n160
cp $D/table.txt $D/*-vs-peers.md $D/device.txt $OUT/ 2>/dev/null
stamp done
