#!/usr/bin/env bash
# Does the 128 x 128 tile pay wherever 256-wide tiles waste many columns (N just above a
# multiple of 256, or 129-179)? Shapes of that band, built-in plan against tile 1 forced, ours
# and cuBLAS as the irregular suite times them. Usage: BUDGET=300 bash bench/device-waste.sh
set -uo pipefail
source bench/device-lib.sh
W=${W:-5000x260x4000,8000x280x2048,3000x300x8192,6000x320x3000,10000x340x1024,4000x520x6000,7000x530x2048,9000x150x4096,6000x170x3000,12000x136x2048,2500x272x6144,16000x264x1024}
D=$R/waste; mkdir -p $D
for how in auto tile1; do
  env $( [ $how = tile1 ] && echo FERROTUNE_SM90_TILE=1 ) timeout $(cap 60) $X bench --ops gemm --shape-suite irregular \
    --shapes $W --dtypes bf16 --warmup 3 --iters 20 --json $D/w-$how.json > $D/w-$how.txt 2>&1; stamp "$how exit $?"
done
python3 bench/classes_table.py $D w
tar -czf $OUT/waste.tgz -C $D .; cp $R/device.txt $OUT/
