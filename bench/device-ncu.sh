#!/usr/bin/env bash
# Nsight Compute (full set) on chosen bf16 GEMM tiles and shapes, with per-SASS-instruction
# stall samples, for finding where the tensor-core kernel loses time.
# SPECS: space-separated tile:shape pairs (tile as in the entry name, e.g. 128x256x64w2x4s3).
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/ncu; mkdir -p $R
for spec in ${SPECS:-128x256x64w2x4s3:8192x3072x768 128x256x64w2x4s3:8192x8192x8192 128x128x32w2x4s4:8192x3072x768}; do
  t=${spec%%:*}; s=${spec##*:}; f=$R/$t-$s
  timeout 240 ncu -k "regex:ft_gemm_bf16_rc_v16_bf16_${t}\$" --launch-count 1 --set full --import-source no -o $f \
    .carry/xtask bench --ops gemm-tiles --dtypes bf16 --iters 1 --warmup 0 --shapes $s > $f-run.txt 2>&1
  echo "ncu $t $s exit $?"
  ncu -i $f.ncu-rep --print-details all > $f-details.txt 2>&1
  ncu -i $f.ncu-rep --page source --csv --print-source sass > $f-sass.csv 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Eligible Warps" $f-details.txt | head -12
  rm -f $f.ncu-rep
done
tar -czf $OUT/ncu.tgz -C $OUT ncu
