#!/usr/bin/env bash
# One device call for the Hopper GEMM path (issue 11): the driver's PTX JIT paid once (cache
# under /tmp, warmed by `xtask info` while the torch peer runs), the sm90 GPU tests (heuristic
# tiles, every tile forced through `Gemm::path`, then the tests again with each tile of
# FORCED_TILES forced by FERROTUNE_SM90_TILE, also with FERROTUNE_SM90_MAX_BLOCKS=WALK_BLOCKS
# so every persistent block walks several tiles), a bf16 sweep of `bench --ops gemm` over
# SWEEP_TILES, the full bench (DTYPES; every row names its path) joined with the torch peer
# (bench/gemm_join.py), compute-sanitizer memcheck/racecheck/synccheck on SANITIZE_TILES, and
# Nsight Compute on one bf16 kernel (NCU_SHAPE, NCU_TILE) unless SKIP_NCU. Run from the repository root with
# the carry in .carry/ (bench/prepare-carry.sh; copy this script, bench/gemm_join.py and
# benches/torch_gemm.py there too when main's tree lacks them). Every step is bounded by what
# is left of BUDGET seconds. Results land in $OUT/results/, packed into $OUT/hopper-results.tgz.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-570}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=.carry
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
R=$OUT/results; mkdir -p $R
T=$C/ferrotune_tests; X=$C/xtask
py() { if [ -f $C/$1 ]; then echo $C/$1; else echo $1; fi; }
SHAPES=${SHAPES:-8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,512x3072x768}
DTYPES=${DTYPES:-bf16,f16}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
TP=
if [ -z "${SKIP_TORCH:-}" ]; then
  ( timeout 120 python3 $(py benches/torch_gemm.py) --shapes $SHAPES --dtypes $DTYPES --gelu 8192x3072x768,512x3072x768 \
      --json $R/torch-gemm.json > $R/torch.txt 2>&1; echo "torch exit $?" >> $R/torch.txt ) &
  TP=$!
fi
timeout $(cap 200) $X info > $R/info.txt 2>&1; stamp "JIT warm-up (xtask info) exit $?"
if [ -z "${SKIP_DEFAULT_TESTS:-}" ]; then
  stamp "=== sm90 tests"
  timeout $(cap 150) $T --test-threads=1 sm90_ > $R/sm90-tests.txt 2>&1
  stamp "tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "panicked|FAILED" $R/sm90-tests.txt | head -5
fi
for t in ${FORCED_TILES-2 4 7 8}; do
  FERROTUNE_SM90_TILE=$t timeout $(cap 60) $T --test-threads=1 sm90_edge sm90_k_edges sm90_strided \
    > $R/sm90-tests-tile$t.txt 2>&1
  stamp "tile $t tests exit $?: $(grep 'test result' $R/sm90-tests-tile$t.txt)"
  grep -E "panicked|FAILED" $R/sm90-tests-tile$t.txt | head -3
  # Few persistent blocks: each walks several tiles (the ping-pong hand-over on small shapes).
  FERROTUNE_SM90_TILE=$t FERROTUNE_SM90_MAX_BLOCKS=${WALK_BLOCKS:-3} timeout $(cap 60) $T --test-threads=1 sm90_edge \
    sm90_strided > $R/sm90-tests-tile$t-walk.txt 2>&1
  stamp "tile $t, ${WALK_BLOCKS:-3} blocks: exit $?: $(grep 'test result' $R/sm90-tests-tile$t-walk.txt)"
done
for t in ${SWEEP_TILES-0 4 7 8}; do
  FERROTUNE_SM90_TILE=$t FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 60) $X bench --ops gemm --dtypes bf16 --shapes $SHAPES \
    --iters 20 --warmup 5 --json $R/sweep-tile$t.json > $R/sweep-tile$t.txt 2>&1
  stamp "sweep tile $t exit $?"; grep -E "^(gemm|linear_bias_gelu) " $R/sweep-tile$t.txt | cut -c1-46,60-84,130-150
done
if [ -z "${SKIP_BENCH:-}" ]; then
  stamp "=== bench --ops gemm"
  FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 120) $X bench --ops gemm --dtypes $DTYPES --shapes $SHAPES \
    --json $R/gemm-hopper.json > $R/gemm.txt 2>&1
  stamp "gemm exit $?"; grep -E "^(gemm|linear_bias_gelu)" $R/gemm.txt | cut -c1-190
fi
[ -n "$TP" ] && wait $TP && tail -1 $R/torch.txt
for j in $R/gemm-hopper.json $R/sweep-tile*.json; do
  [ -f "$j" ] && [ -f $R/torch-gemm.json ] || continue
  b=$(basename $j .json)
  python3 $(py bench/gemm_join.py) $j $R/torch-gemm.json --markdown $R/$b-vs-peers.md > /dev/null 2>&1
  echo "$b: $(tail -1 $R/$b-vs-peers.md 2>/dev/null)"
done
stamp "=== sanitizer"
for tool in memcheck racecheck synccheck; do
  for t in ${SANITIZE_TILES-default 4 7 8}; do
    [ "$t" = default ] && unset FERROTUNE_SM90_TILE || export FERROTUNE_SM90_TILE=$t
    FERROTUNE_SM90_MAX_BLOCKS=${WALK_BLOCKS:-3} timeout $(cap 60) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 sm90_strided sm90_falls_back \
      > $R/sanitizer-sm90-$tool-$t.txt 2>&1
    stamp "$tool tile $t: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer-sm90-$tool-$t.txt | tail -1)"
  done
done
unset FERROTUNE_SM90_TILE
if [ -z "${SKIP_NCU:-}" ]; then
  stamp "=== ncu ${NCU_SHAPE:-8192x8192x8192} bf16 ${NCU_TILE:+tile $NCU_TILE}"
  [ -n "${NCU_TILE:-}" ] && export FERROTUNE_SM90_TILE=$NCU_TILE
  FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 90) ncu -k regex:ft_gemm90_bf16_rc_bf16 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis $X bench --ops gemm --dtypes bf16 --iters 1 --warmup 0 --shapes ${NCU_SHAPE:-8192x8192x8192} \
    > $R/ncu-sm90.txt 2>&1
  stamp "ncu exit $?"; unset FERROTUNE_SM90_TILE; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers|Issue Slots" $R/ncu-sm90.txt | head -8
fi
tar -czf $OUT/hopper-results.tgz -C $OUT results
