#!/usr/bin/env bash
# Issue 15 on one GPU, from an unpacked carry: the Clifford SGP rows timed (bench --ops clifford:
# per call and queued, beside the copy ceiling timed both ways) and Nsight Compute on their
# kernels, so the gap to the copy roof is seen per kernel.
# PART (comma list, default tests,bench,ab,ncu,san):
#   tests  the Clifford GPU tests;
#   bench  fwd and fwd+bwd, f32 and bf16, at B4096/8192 N 512/777/1024 and shapes no issue
#          names (SHAPES, UNSEEN with UNSEEN_ROWS, default fwd), with the built-in choice;
#   sweep  SWEEP_ROWS (default `fwd_sweep`: every compiled forward config, checked and timed;
#          or `fwdbwd_sweep`) in SWEEP_DTYPES
#          (default f32 and bf16) at SWEEP_SHAPES;
#   torch  benches/torch_clifford.py (eager and torch.compile, fwd and fwd+bwd, f32) at
#          TORCH_SIZES, its JSON beside ours;
#   ab     the fwd+bwd rows of `bench` (f32, bf16) and the split-backward GPU tests again with
#          AB_ENV set (an environment variable=value that switches a form), and SWEEP_ROWS with it when
#          AB_SWEEP=1: two forms timed in one call;
#   ncu    one launch of each kernel of fwd+bwd (NCU_SHAPES; NCU_KERNELS, NCU_COUNT launches);
#   san    compute-sanitizer memcheck, racecheck and synccheck on SAN_TESTS (default the
#          Clifford forward, backward and split-backward tests).
# (Runs 2-3 of bench/results/clifroof-5bda29ff586e/ ran the staged kernels' parts of an earlier
# version of this script, with the code they measured; see the README there.)
# Everything under $OUT/clifroof is also packed into $OUT/clifroof.tgz (a call returns at most
# 8 files).
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export FERROTUNE_COMMIT=$(cat .carry/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=$PWD/.nv-cache
R=$OUT/clifroof; mkdir -p $R
PART=${PART:-tests,bench,sweep,ncu,san}
SHAPES=${SHAPES:-4096x512,4096x777,4096x1024,8192x1024}
UNSEEN=${UNSEEN:-2048x640,4096x1000,16384x256,3000x1536,1024x128}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader > $R/nvidia-smi.txt
bench() { # name rows dtype shapes [env...]
  local name=$1 rows=$2 dt=$3 shapes=$4; shift 4
  env "$@" timeout ${T_BENCH:-150} .carry/xtask bench --ops clifford --clifford-rows $rows --dtypes $dt --shapes $shapes \
    --json $R/$name.json > $R/$name.txt 2>&1
  echo "$name exit $?"; grep -E "copy ceiling|d[23] " $R/$name.txt | sed 's/  */ /g' | cut -c1-170
}
if [[ $PART == *tests* ]]; then
  timeout ${T_TESTS:-300} .carry/ferrotune_tests --test-threads=4 clifford > $R/tests.txt 2>&1
  echo "tests exit $?"; grep -E "test result|panicked|skipped|cases" $R/tests.txt | head -20
fi
if [[ $PART == *bench* ]]; then
  for dt in f32 bf16; do bench plan-$dt fwd,fwdbwd $dt $SHAPES; done
  bench unseen-f32 ${UNSEEN_ROWS:-fwd} f32 $UNSEEN
fi
if [[ $PART == *sweep* ]]; then
  for dt in ${SWEEP_DTYPES:-f32 bf16}; do
    bench ${SWEEP_ROWS:-fwd_sweep}-$dt ${SWEEP_ROWS:-fwd_sweep} $dt ${SWEEP_SHAPES:-4096x512,4096x777}
  done
fi
if [[ $PART == *ab* ]]; then
  AB_ENV=${AB_ENV:?PART=ab needs AB_ENV}
  for dt in f32 bf16; do bench plan-ab-$dt fwdbwd $dt $SHAPES $AB_ENV; done
  env $AB_ENV timeout ${T_TESTS:-300} .carry/ferrotune_tests --test-threads=4 clifford_split > $R/tests-ab.txt 2>&1
  echo "tests-ab exit $?"; grep -E "test result|panicked|skipped|runs" $R/tests-ab.txt | head -8
  if [[ ${AB_SWEEP:-0} == 1 ]]; then
    for dt in ${SWEEP_DTYPES:-f32 bf16}; do
      bench ${SWEEP_ROWS:-fwd_sweep}-ab-$dt ${SWEEP_ROWS:-fwd_sweep} $dt ${SWEEP_SHAPES:-4096x512,4096x777} $AB_ENV
    done
  fi
fi
if [[ $PART == *torch* ]]; then
  timeout ${T_TORCH:-300} python3 benches/torch_clifford.py --out $R/torch.json --ops fwd,fwdbwd \
    --sizes ${TORCH_SIZES:-4096x512,4096x777,4096x1024} --cache-dir $PWD/.torch-cache > $R/torch.txt 2>&1
  echo "torch exit $?"; tail -30 $R/torch.txt | cut -c1-170
fi
if [[ $PART == *ncu* ]]; then
  for s in ${NCU_SHAPES:-4096x512 4096x777}; do
    f=$R/ncu-$s
    timeout ${T_NCU:-120} ncu -k ${NCU_KERNELS:-regex:ft_clifford} --launch-count ${NCU_COUNT:-6} \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
      .carry/xtask bench --ops clifford --clifford-rows fwdbwd --dtypes f32 --iters 1 --warmup 0 --shapes $s > $f.txt 2>&1
    echo "ncu $s exit $?"
    grep -E "^  ft_clifford|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Warp" $f.txt \
      | sed "s/  */ /g" | head -${NCU_LINES:-36}
  done
fi
if [[ $PART == *san* ]]; then
  for tool in memcheck racecheck synccheck; do
    FERROTUNE_TEST_SMALL=1 timeout ${T_SAN:-150} compute-sanitizer --tool $tool \
      .carry/ferrotune_tests --test-threads=1 ${SAN_TESTS:-gpu_clifford_forward gpu_clifford_backward gpu_clifford_split} > $R/$tool.txt 2>&1
    echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result|hazard" $R/$tool.txt | head -4
  done
fi
tar -czf $OUT/clifroof.tgz -C $OUT clifroof
