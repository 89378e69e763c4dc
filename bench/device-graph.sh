#!/usr/bin/env bash
# Our GEMM graphed (issue 11, 12): `bench --ops gemm` and the irregular suite now time our call
# captured in a CUDA graph and replayed beside the single call (`benches/graph_time.rs`), as
# torch's `matmul_graph` peer is, and the joins keep each side's best; plus the A/B of the
# Hopper kernels' tensor-map prefetch (`FERROTUNE_SM90_PREFETCH=0` turns it off).
# PART=check: the sm90 GPU tests and the graph tests, memcheck on the TMA-store edges.
# PART=bench: torch peers first (alone on the GPU), `bench --ops gemm` on issue 11's rows
# (bf16, f16; fused GELU against cuBLASLt), the irregular suite (bf16, f16), each joined.
# PART=ab: the prefetch off on issue 11's rows and the suite (bf16), joined against the same
# torch files (run PART=bench first in the same call).
# PART=ncu: Nsight Compute (full set) of ours and cuBLAS on 512x3072x768 and 256x256x65536
# (bench/device-ncu-stream.sh, into $OUT).
# Usage on the device: PART=check,bench,ab bash bench/device-graph.sh
set -uo pipefail
source bench/device-lib.sh
HOPPER=8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,512x3072x768
CLASS=8192x8192x512,3072x3072x1536,16384x1024x1024,4096x1024x768,2048x8192x1024,6144x4096x1024
SUITE=1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768
join() { python3 bench/gemm_join.py "$@" 2>&1 | tail -1; }
if [[ "$PART" == *check* ]]; then
  timeout $(cap 150) $T --test-threads=2 sm90 graph > $R/sm90-tests.txt 2>&1
  stamp "sm90 + graph tests exit $?: $(grep 'test result' $R/sm90-tests.txt)"; grep -E "^test .*FAILED|panicked" $R/sm90-tests.txt | head
  FERROTUNE_SM90_MAX_BLOCKS=3 timeout $(cap 90) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 \
    sm90_tma_store_epilogue_edges > $R/memcheck.txt 2>&1
  stamp "memcheck exit $?: $(grep -E 'ERROR SUMMARY|test result' $R/memcheck.txt | tr '\n' ' ')"
fi
if [[ "$PART" == *bench* ]]; then
  timeout $(cap 90) python3 benches/torch_gemm.py --shapes $HOPPER,$CLASS --dtypes bf16,f16 --gelu 8192x3072x768,512x3072x768 \
    --json $R/torch-gemm.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
  timeout $(cap 70) python3 benches/torch_gemm.py --shapes $SUITE --dtypes bf16,f16 --rotate --warmup 3 --iters 20 \
    --json $R/torch-suite.json > $R/torch-suite.txt 2>&1; stamp "torch suite exit $?"
  FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 110) $X bench --ops gemm --dtypes bf16,f16 --shapes $HOPPER,$CLASS \
    --json $R/gemm.json > $R/gemm.txt 2>&1; stamp "gemm exit $?"
  join $R/gemm.json $R/torch-gemm.json --markdown $R/gemm-vs-peers.md
  for dt in bf16 f16; do
    timeout $(cap 90) $X bench --ops gemm --shape-suite irregular --dtypes $dt --warmup 3 --iters 20 \
      --json $R/suite-$dt.json > $R/suite-$dt.txt 2>&1; stamp "suite $dt exit $?"
    join $R/suite-$dt.json $R/torch-suite.json --markdown $R/suite-$dt-vs-peers.md
  done
fi
if [[ "$PART" == *ab* ]]; then
  export FERROTUNE_SM90_PREFETCH=0
  FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 80) $X bench --ops gemm --dtypes bf16 --shapes $HOPPER,$CLASS \
    --json $R/gemm-noprefetch.json > $R/gemm-noprefetch.txt 2>&1; stamp "gemm, no prefetch, exit $?"
  join $R/gemm-noprefetch.json $R/torch-gemm.json --markdown $R/gemm-noprefetch-vs-peers.md
  timeout $(cap 80) $X bench --ops gemm --shape-suite irregular --dtypes bf16 --warmup 3 --iters 20 \
    --json $R/suite-bf16-noprefetch.json > $R/suite-bf16-noprefetch.txt 2>&1; stamp "suite bf16, no prefetch, exit $?"
  join $R/suite-bf16-noprefetch.json $R/torch-suite.json --markdown $R/suite-bf16-noprefetch-vs-peers.md
  unset FERROTUNE_SM90_PREFETCH
fi
if [[ "$PART" == *ncu* ]]; then
  # Ours and cuBLAS under Nsight Compute (full set, SASS of ours): bench/device-ncu-stream.sh.
  SHAPES="512x3072x768 256x256x65536" timeout $(cap 300) bash bench/device-ncu-stream.sh > $R/ncu.txt 2>&1
  stamp "ncu exit $?"; cp $R/ncu.txt $OUT/
fi
cp $R/device.txt $R/*.md $OUT/ 2>/dev/null
tar -czf $OUT/graph-$(echo $PART | tr ',' '-').tgz -C $R .
stamp done
