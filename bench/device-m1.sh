#!/usr/bin/env bash
# Issue 12: one row against a large weight (M = 1, the decode GEMV) on the H100, from a carry
# built by `bench/prepare-carry.sh`. What does reading the weight once cost, and where do the
# small-M kernel's microseconds go beyond it?
# PART=floor: the read floor — torch.sum (one kernel reading the tensor once) at 16-128 MiB,
#   queued over rotating buffers, and our copy beside it.
# PART=sweep: M = 1 shapes (the suite's and unseen ones; or SHAPES) with the plan, then the K
#   split (FERROTUNE_SMALL_M_KSPLIT) and the block width (FERROTUNE_SMALL_M_WIDTH) forced
#   (COLS, default "plan ks1 ks2 ks4 w2"), cuBLAS in the same process; `copy_fraction_queued`
#   per row in the JSONs.
# PART=ncu: Nsight Compute on 1x4096x4096 bf16 (ours and cuBLAS's kernel in one process):
#   speed of light, memory, occupancy, warp states, launch statistics.
# PART=check: the small-M GPU tests and memcheck on them.
# Every step is bounded by what is left of BUDGET seconds; results in $OUT/m1.tgz and
# $OUT/m1-summary.txt.
set -uo pipefail
source bench/device-lib.sh
S=$OUT/m1-summary.txt; cp $R/device.txt $S
M1=${SHAPES:-1x4096x4096,1x14336x4096,1x4096x14336,1x8193x4099,1x11008x4096,1x4096x11008,1x5120x5120,1x8192x8192,1x6144x6144,1x28672x4096,2x4096x4096,4x8192x8192}

if [[ $PART == *check* ]]; then
  timeout $(cap 150) $T --test-threads=2 gemv:: > $R/gemv-tests.txt 2>&1
  stamp "small-M tests exit $?: $(grep 'test result' $R/gemv-tests.txt)" | tee -a $S
  grep -E "^test .*FAILED|panicked|skipped" $R/gemv-tests.txt | head | tee -a $S
  timeout $(cap 150) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 gpu_small_m \
    > $R/memcheck-small-m.txt 2>&1
  stamp "memcheck exit $?: $(grep -E 'ERROR SUMMARY' $R/memcheck-small-m.txt | tail -1) $(grep 'test result' $R/memcheck-small-m.txt)" | tee -a $S
fi

if [[ $PART == *floor* ]]; then
  # One kernel reading N bytes once, queued back to back over 4 rotating buffers (more than L2
  # together): torch.sum of bf16 tensors, and our copy (read + write) beside it.
  timeout $(cap 60) python3 - > $R/floor.txt 2>&1 <<'PY'
import torch
torch.manual_seed(0)
print("MiB  torch.sum us/call  read TB/s")
for mib in [16, 32, 64, 112, 128]:
    n = mib * 2**20 // 2
    xs = [torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    for x in xs: x.sum()
    torch.cuda.synchronize()
    times = []
    for rep in range(7):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(40): xs[i % 4].sum()
        e.record(); torch.cuda.synchronize(); times.append(s.elapsed_time(e) * 1e3 / 40)
    t = sorted(times)[3]
    print(f"{mib:4d}  {t:8.2f}  {mib * 2**20 / t / 1e6:6.3f}")
PY
  stamp "floor exit $?" | tee -a $S; cat $R/floor.txt | tee -a $S
  timeout $(cap 60) $X bench --ops copy --dtypes bf16 --sizes 16,32,64,128 --warmup 10 --iters 50 \
    > $R/copy.txt 2>&1
  stamp "copy exit $?" | tee -a $S; grep -E "^ *copy" $R/copy.txt | tee -a $S
fi

run_cols() { # label, then env assignments
  local label=$1; shift
  [ $(left) -lt 20 ] && { echo "--- $label: skipped (budget)" | tee -a $S; return; }
  env "$@" timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --shapes $M1 --dtypes bf16 --warmup 5 \
    --iters 30 --json $R/m1-$label.json > $R/m1-$label.txt 2>&1
  stamp "$label ($*) exit $?" | tee -a $S
}
if [[ $PART == *sweep* ]]; then
  for col in ${COLS:-plan ks1 ks2 ks4 w2}; do
    case $col in
      plan) run_cols plan ;;
      ks*) run_cols $col FERROTUNE_SMALL_M_KSPLIT=${col#ks} ;;
      w*) run_cols $col FERROTUNE_SMALL_M_WIDTH=${col#w} ;;
    esac
  done
  python3 bench/m1_table.py $R $S
fi

if [[ $PART == *ncu* ]] && command -v ncu > /dev/null; then
  timeout $(cap 90) ncu --launch-skip 4 --launch-count 6 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    $X bench --ops gemm --shape-suite irregular --shapes 1x4096x4096 --dtypes bf16 --warmup 1 --iters 1 \
    > $R/ncu-m1.txt 2>&1
  stamp "ncu exit $?" | tee -a $S
  grep -vE "^==PROF==|^ *$" $R/ncu-m1.txt | grep -E "^  [a-z_]|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|Waves Per SM|Stall|Issued Warp|No Eligible|Active Warps" \
    | head -120 | tee -a $S
fi
tar -czf $OUT/m1.tgz -C $R .
stamp done | tee -a $S
