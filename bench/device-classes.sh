#!/usr/bin/env bash
# Three plan rules checked on classes of shapes before they are written (issue 12's unseen
# holes, bench/results/unseen-*/): each class's shapes timed as the irregular suite times them
# (ours single/queued/graph beside cuBLAS) under the built-in plan and under the forced tile or
# K split the rule would pick. R2: N <= 128 outside the streaming class (tile 1, 128x128 six
# stages; tile 3, its persistent form). R1: D rows the TMA store cannot write and 128 x 192
# tiles filling the SMs better than 128 x 256 (tile 14). R3: the streaming tile with 34 to 64
# tiles (past a quarter of the SMs), K split 1-4. Usage: BUDGET=560 bash bench/device-classes.sh
set -uo pipefail
source bench/device-lib.sh
R2=${R2:-16384x64x8192,8192x128x8192,32768x64x2048,20000x128x1024,65536x32x1024,10000x120x5120,12288x96x8192}
R1=${R1:-5000x300x4000,7000x330x2048,3000x350x8192,6001x500x3000,9000x590x1000,4000x420x6000}
R3=${R3:-12x5120x13824,24x4608x16384,48x6144x12288,64x7168x8192,40x8192x8192,33x5000x20000}
D=$OUT/classes; mkdir -p $D; cp $R/device.txt $D/
suite() { # name shapes [env...]
  local name=$1 shapes=$2; shift 2
  env "$@" timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --shapes $shapes --dtypes bf16 --warmup 3 --iters 20 \
    --json $D/$name.json > $D/$name.txt 2>&1; stamp "$name exit $?"; }
suite r2-auto $R2
suite r2-tile1 $R2 FERROTUNE_SM90_TILE=1
suite r2-tile3 $R2 FERROTUNE_SM90_TILE=3
suite r1-auto $R1
suite r1-tile14 $R1 FERROTUNE_SM90_TILE=14
suite r1-tile1 $R1 FERROTUNE_SM90_TILE=1
for s in 1 2 3 4; do suite r3-split$s $R3 FERROTUNE_SM90_SPLIT=$s; done
suite r3-auto $R3
python3 bench/classes_table.py $D r2 r1 r3
