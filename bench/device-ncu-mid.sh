#!/usr/bin/env bash
# Nsight Compute on one mid-size bf16 GEMM (default 8192x8192x512, K short): our planned kernel
# (`xtask bench --ops gemm`, one call) against the kernel torch's `x @ w.T` runs (cuBLASLt's
# nvjet), the same sections for both: speed of light, memory workload, occupancy, launch, warp
# states. Results: $OUT/ncu-mid.tgz and $OUT/ncu-mid-summary.txt.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
S=${SHAPE:-8192x8192x512}; R=$OUT/ncu-mid; mkdir -p $R; SUM=$OUT/ncu-mid-summary.txt
SECT="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis"
{ echo "commit $(cat .carry/commit), $(date -u +%FT%TZ), shape $S"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $SUM
timeout 200 ncu -k "regex:ft_gemm90_" --launch-skip 2 --launch-count 1 $SECT -o $R/ours \
  .carry/xtask bench --ops gemm --dtypes bf16 --iters 1 --warmup 2 --shapes $S > $R/ours-run.txt 2>&1
echo "ncu ours exit $?" >> $SUM
timeout 200 ncu -k "regex:nvjet|sm90_xmma|cutlass" --launch-skip 2 --launch-count 1 $SECT -o $R/torch \
  python3 bench/torch_one.py $S > $R/torch-run.txt 2>&1
echo "ncu torch exit $?" >> $SUM
for who in ours torch; do
  ncu -i $R/$who.ncu-rep --print-details all > $R/$who-details.txt 2>&1
  { echo "== $who"; grep -m1 -E "^  [a-z_0-9]+.*\(" $R/$who-details.txt
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|L1/TEX Hit|Achieved Occupancy|Registers Per|Cluster Size|Grid Size|Block Size|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Dynamic Shared" $R/$who-details.txt | head -24; } >> $SUM
done
cat $SUM
tar --exclude='*.ncu-rep' -czf $OUT/ncu-mid.tgz -C $OUT ncu-mid && rm -rf $R
