#!/usr/bin/env bash
# After the narrow-N and third-of-the-SMs rules (bench/results/unseen-202c0e2a0088/): the sm90
# GPU tests, memcheck on the narrow tile through the plan, then in one call the unseen shapes
# (bf16, f16) and the named irregular suite (bf16) under the new plan, torch in the same call,
# and R2's class in f16 and TF32 against the tile the plan took before (8: persistent 128x256).
# Everything is tarred into $OUT (the device returns 8 files). ONLY_PEERS=1 keeps the unseen
# shapes and the suite against torch (no tests, memcheck, R2 or probe). Usage: BUDGET=560 bash $0
set -uo pipefail
source bench/device-lib.sh
UNSEEN=2x5120x5120,4x13824x5120,12x5120x13824,24x3584x3584,48x8192x2048,1x6144x2048,1x11008x4096,5x3001x1999,40x7000x999,384x384x49152,192x640x30000,128x128x131072,768x256x20480,4096x6000x32,12000x3000x96,3000x3000x128,1023x4097x513,3001x2999x1001,777x1555x2333,5000x300x4000,2048x5120x5120,4096x13824x5120,1024x4096x11008,3072x768x3072,6000x6000x6000,3000x5000x2000,8192x96x4096,16384x64x8192
SUITE=1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768
R2=16384x64x8192,32768x64x2048,20000x128x1024,65536x32x1024,10000x120x5120,12288x96x8192,4000x100x7000,9000x48x3000
join() { python3 bench/gemm_join.py "$@" 2>&1 | tail -1; }
FULL=$([ "${ONLY_PEERS:-0}" = 1 ] && echo 0 || echo 1)
[ $FULL = 1 ] && {
timeout $(cap 100) $T --test-threads=2 sm90 > $R/sm90-tests.txt 2>&1
stamp "sm90 tests exit $?: $(grep 'test result' $R/sm90-tests.txt | tr '\n' ' ')"; grep -E "FAILED|panicked" $R/sm90-tests.txt | head -5
timeout $(cap 60) compute-sanitizer --tool memcheck --error-exitcode 9 $X bench --ops gemm --shape-suite irregular \
  --shapes 1000x64x1000,700x120x2000,3000x128x640 --dtypes bf16 --warmup 0 --iters 1 > $R/memcheck-narrow.txt 2>&1
stamp "memcheck narrow exit $?: $(grep 'ERROR SUMMARY' $R/memcheck-narrow.txt | tr '\n' ' ')"
}
timeout $(cap 100) python3 benches/torch_gemm.py --shapes $UNSEEN,$R2,$SUITE --dtypes bf16,f16 --rotate --warmup 3 --iters 20 \
  --json $R/torch-unseen.json > $R/torch-unseen.txt 2>&1; stamp "torch exit $?"
for dt in bf16 f16; do
  timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --shapes $UNSEEN --dtypes $dt --warmup 3 --iters 20 \
    --json $R/unseen-$dt.json > $R/unseen-$dt.txt 2>&1; stamp "unseen $dt exit $?"
  join $R/unseen-$dt.json $R/torch-unseen.json --markdown $R/unseen-$dt-vs-peers.md
done
[ $FULL = 1 ] && for dt in f16 tf32; do
  for how in auto tile8; do
    env $( [ $how = tile8 ] && echo FERROTUNE_SM90_TILE=8 ) timeout $(cap 40) $X bench --ops gemm --shape-suite irregular \
      --shapes $R2 --dtypes $dt --warmup 3 --iters 20 --json $R/r2-$dt-$how.json > $R/r2-$dt-$how.txt 2>&1
    stamp "r2 $dt $how exit $?"
  done
done
[ $FULL = 1 ] && join $R/r2-f16-auto.json $R/torch-unseen.json --markdown $R/r2-f16-auto-vs-peers.md
# Probe: 17-32 aligned rows with K above 1024 (the slab kernel's class; 24x3584x3584 was 0.74x).
P=24x3584x3584,20x4096x4096,32x2560x5120,28x6144x2048,17x3072x8192,30x8192x3584
[ $FULL = 1 ] && for how in auto hopper ksplit2 ksplit4; do
  case $how in auto) e=;; hopper) e=FERROTUNE_SMALL_M=0;; ksplit2) e=FERROTUNE_SMALL_M_KSPLIT=2;; ksplit4) e=FERROTUNE_SMALL_M_KSPLIT=4;; esac
  env $e timeout $(cap 40) $X bench --ops gemm --shape-suite irregular --shapes $P --dtypes bf16 --warmup 3 --iters 20 \
    --json $R/p-$how.json > $R/p-$how.txt 2>&1; stamp "probe $how exit $?"
done
timeout $(cap 80) $X bench --ops gemm --shape-suite irregular --dtypes bf16 --warmup 3 --iters 20 \
  --json $R/suite-bf16.json > $R/suite-bf16.txt 2>&1; stamp "suite bf16 exit $?"
join $R/suite-bf16.json $R/torch-unseen.json --markdown $R/suite-bf16-vs-peers.md
grep -h "geomean" $R/unseen-*.txt $R/suite-bf16.txt
python3 bench/classes_table.py $R r2-f16 r2-tf32 p
for f in $R/*-vs-peers.md; do echo "$(basename $f): $(tail -1 $f)"; done
tar -czf $OUT/unseen-check.tgz -C $R .
cp $R/device.txt $R/*-vs-peers.md $OUT/ 2>/dev/null
stamp done
