#!/usr/bin/env bash
# The streaming-tile tree on the H100, from a carry built by `bench/prepare-carry.sh`: the
# merged-tree run (`bench/device-merged.sh`: torch peers, the whole GPU test suite, GEMM and the
# irregular suite joined with their peers, Clifford, GELU rows), then compute-sanitizer
# memcheck on the streaming tile's split and the TF32 tiles. Results under $OUT.
set -uo pipefail
BUDGET=${BUDGET:-470} bash bench/device-merged.sh
C=.carry; T=$C/ferrotune_tests
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 FERROTUNE_REQUIRE_GPU=1
timeout ${MEMCHECK_S:-90} compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 \
  gpu_sm90_split_k_is_deterministic sm90_tf32_every_tile_and_the_split > $OUT/memcheck-stream.txt 2>&1
echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-stream.txt | tail -1) $(grep 'test result' $OUT/memcheck-stream.txt)"
