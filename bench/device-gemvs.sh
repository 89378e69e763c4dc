#!/usr/bin/env bash
# Issue 12: the streaming small-M kernel (`ops::gemv_stream`: the weight through a ring of
# cp.async.bulk copies, stream-K units) on the H100, from a carry built by
# `bench/prepare-carry.sh`.
# PART=check: the small-M GPU tests (both kernels), then memcheck, racecheck and synccheck on the
#   streaming tests.
# PART=sweep: 1-16 rows against LLM-sized weights (and a few small ones), the plan against the
#   register-fed kernel (FERROTUNE_SMALL_M_STREAM=0) and the streaming kernel wherever it can
#   (=1; and with K chunks of 512 and 2048), cuBLAS in the same process; then torch's `x @ w.T` on the same shapes joined with the
#   plan's rows (`bench/gemm_join.py`: ours / the best peer); the read floor (torch.sum).
# PART=ncu: Nsight Compute of both kernels on 1x28672x4096 (stall samples per instruction).
# Results: $OUT/stream-summary.txt, $OUT/stream-vs-peers.md, $OUT/stream.tgz.
set -uo pipefail
source bench/device-lib.sh
S=$OUT/stream-summary.txt; cp $R/device.txt $S
SH=${SHAPES:-1x4096x4096,1x14336x4096,1x4096x14336,1x11008x4096,1x4096x11008,1x5120x5120,1x8192x8192,1x6144x6144,1x28672x4096,1x3072x3072,1x2048x2048,1x8192x1024,2x4096x4096,4x8192x8192,4x4608x4608,8x5120x5120,8x4096x14336,12x5632x4096,16x4096x4096,16x5120x5120,16x6144x6144,16x8192x4096,16x11008x4096,16x2048x2048,1x4097x777,8x6143x4097}

if [[ $PART == *check* ]]; then
  timeout $(cap 200) $T --test-threads=2 gemv > $R/gemv-tests.txt 2>&1
  stamp "small-M tests exit $?: $(grep 'test result' $R/gemv-tests.txt)" | tee -a $S
  grep -E "^test .*FAILED|panicked|skipped|cases" $R/gemv-tests.txt | head | tee -a $S
  for tool in ${TOOLS:-memcheck racecheck synccheck}; do
    [ $(left) -lt 60 ] && { echo "--- $tool: skipped (budget)" | tee -a $S; continue; }
    timeout $(cap 100) compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
      gpu_small_m_stream_join gpu_small_m_stream_edge > $R/$tool-stream.txt 2>&1
    stamp "$tool exit $?: $(grep -E 'ERROR SUMMARY|HAZARD|RACECHECK SUMMARY' $R/$tool-stream.txt | tail -1) $(grep 'test result' $R/$tool-stream.txt)" | tee -a $S
  done
fi

run_cols() { # label, then env assignments
  local label=$1; shift
  [ $(left) -lt 30 ] && { echo "--- $label: skipped (budget)" | tee -a $S; return; }
  env "$@" timeout $(cap 90) $X bench --ops gemm --shape-suite irregular --shapes $SH --dtypes ${DT:-bf16} --warmup 5 \
    --iters 30 --json $R/m1-$label.json > $R/m1-$label.txt 2>&1
  stamp "$label ($*) exit $?" | tee -a $S
}
if [[ $PART == *sweep* ]]; then
  run_cols plan
  run_cols reg FERROTUNE_SMALL_M_STREAM=0
  run_cols stream FERROTUNE_SMALL_M_STREAM=1
  run_cols kc2048 FERROTUNE_SMALL_M_STREAM=1 FERROTUNE_SMALL_M_STREAM_KC=2048
  python3 bench/m1_table.py $R $S
  if [ $(left) -gt 60 ]; then
    timeout $(cap 150) python3 benches/torch_gemm.py --shapes $SH --dtypes ${DT:-bf16} --rotate --warmup 3 --iters 20 \
      --json $R/torch-stream.json > $R/torch-stream.txt 2>&1
    stamp "torch exit $?" | tee -a $S
    python3 bench/gemm_join.py $R/m1-plan.json $R/torch-stream.json --markdown $OUT/stream-vs-peers.md > /dev/null 2>&1
    stamp "join exit $?" | tee -a $S; grep -E "geomean" $OUT/stream-vs-peers.md | tee -a $S
  fi
fi
if [[ $PART == *ncu* ]] && command -v ncu > /dev/null; then
  # Per-instruction stall samples, memory and warp states of the streaming kernel and the
  # register-fed one on a decode GEMV.
  SECT="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
  prof() { # name, kernel regex, shape, env...
    local name=$1 re=$2 shape=$3; shift 3
    [ $(left) -lt 40 ] && { echo "--- ncu $name: skipped (budget)" | tee -a $S; return; }
    env "$@" timeout $(cap 90) ncu -k "regex:$re" --launch-skip 3 --launch-count 1 $SECT -o $R/$name \
      $X bench --ops gemm --dtypes bf16 --iters 1 --warmup 3 --shapes $shape > $R/ncu-$name-run.txt 2>&1
    stamp "ncu $name exit $?" | tee -a $S
    ncu -i $R/$name.ncu-rep --print-details all > $R/$name-details.txt 2>&1
    ncu -i $R/$name.ncu-rep --page source --csv --print-source sass > $R/$name-sass.csv 2>&1
    grep -E "^  [a-z_]|Duration|DRAM Throughput|L2 Cache Throughput|Registers Per|Dynamic Shared|Stall|No Eligible|Issued Warp|Active Warps" $R/$name-details.txt | head -40 | tee -a $S
    python3 bench/ncu_sass_summary.py $R/$name-sass.csv --top 12 2>&1 | tee -a $S
  }
  prof stream-m1 ft_gemvs_ 1x28672x4096
  prof reg-m1 ft_gemv_ 1x28672x4096 FERROTUNE_SMALL_M_STREAM=0
  rm -f $R/*.ncu-rep
fi
tar -czf $OUT/stream.tgz -C $R .
stamp done | tee -a $S
