#!/usr/bin/env bash
# Issue 15 on one GPU: the Clifford SGP rows timed (bench --ops clifford, f32 and bf16, fwd and
# fwd+bwd at B4096/8192 N 512, 777, 1024) and Nsight Compute on each of their kernels (one
# launch each: duration, DRAM throughput, occupancy, registers, stall reasons), so the gap to
# the copy ceiling is seen per kernel. PART=bench,ncu (default both); NCU_SHAPES, SHAPES.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export FERROTUNE_COMMIT=$(cat .carry/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=$PWD/.nv-cache
R=$OUT/clifroof; mkdir -p $R
PART=${PART:-bench,ncu}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader > $R/nvidia-smi.txt
if [[ $PART == *bench* ]]; then
  for dt in ${DTYPES:-f32 bf16}; do
    timeout ${T_BENCH:-150} .carry/xtask bench --ops clifford --clifford-rows ${ROWS:-fwd,fwdbwd} --dtypes $dt \
      --shapes ${SHAPES:-4096x512,4096x777,4096x1024,8192x1024} --json $R/clifford-$dt.json > $R/clifford-$dt.txt 2>&1
    echo "bench $dt exit $?"; grep -E "copy ceiling|d[23] " $R/clifford-$dt.txt | cut -c1-200
  done
fi
if [[ $PART == *ncu* ]]; then
  for s in ${NCU_SHAPES:-4096x512 4096x777 4096x1024}; do
    f=$R/ncu-$s
    timeout ${T_NCU:-120} ncu -k regex:ft_clifford --launch-count ${NCU_COUNT:-6} \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats \
      .carry/xtask bench --ops clifford --clifford-rows fwdbwd --dtypes f32 --iters 1 --warmup 0 --shapes $s \
      > $f.txt 2>&1
    echo "ncu $s exit $?"
    grep -E "^  ft_clifford|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Issue Slots Busy|No Eligible|Dynamic Shared" $f.txt | sed 's/  */ /g' | head -120
  done
fi
