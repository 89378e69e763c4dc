#!/usr/bin/env bash
# Nsight Compute on the GEMM shapes whose time is the operands' streaming (long K with few output
# tiles, small M against a large weight), ours and cuBLAS's kernel for each: duration, DRAM
# throughput, L2 hit rate, warp stalls, and SASS-level stall samples of our kernel.
# SHAPES: space-separated bf16 shapes (default: 256x256x65536 64x4096x4096 512x512x32768);
# OURS_RE: the filter of our first kernel (default regex:^ft_gemm; regex:^ft_gemv for small M).
# Results: $OUT/ncu-stream.tgz (details, SASS csv) and $OUT/ncu-stream-summary.txt.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/ncu-stream; mkdir -p $R
S=$OUT/ncu-stream-summary.txt
KEYS="Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|L1/TEX Hit Rate|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Eligible Warps|Block Size|Grid Size|Dynamic Shared"
for s in ${SHAPES:-256x256x65536 64x4096x4096 512x512x32768}; do
  for who in ours cublas; do
    if [ $who = ours ]; then k="${OURS_RE:-regex:^ft_gemm}"; else k='regex:^(?!ft_)'; fi
    f=$R/$who-$s
    # Our kernel runs first (its check, then the timed runs); cuBLAS's after: skip nothing,
    # take the first launch the filter matches.
    timeout 200 ncu -k "$k" --launch-count 1 --set full --import-source no -o $f \
      .carry/xtask bench --ops gemm --dtypes bf16 --iters 2 --warmup 1 --shapes $s > $f-run.txt 2>&1
    echo "ncu $who $s exit $?" | tee -a $S
    ncu -i $f.ncu-rep --print-details all > $f-details.txt 2>&1
    grep -E "^\s+[a-zA-Z_0-9]+.*\(\d+, \d+, \d+\)|^  [a-zA-Z_]" $f-details.txt | head -2 | tee -a $S
    grep -E "$KEYS" $f-details.txt | head -16 | tee -a $S
    if [ $who = ours ]; then ncu -i $f.ncu-rep --page source --csv --print-source sass > $f-sass.csv 2>&1; fi
    rm -f $f.ncu-rep
  done
done
tar -czf $OUT/ncu-stream.tgz -C $OUT ncu-stream && rm -rf $R
