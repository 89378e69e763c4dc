#!/usr/bin/env bash
# One device call after the Clifford CPU rework (issue 16, item 2), from an unpacked carry (the
# binaries in $BIN, default .carry, as `bench/prepare-carry.sh` packs them): the shared no_std
# maths gained `product_with` / `product_vjp_with` / `bwd_feature_with` (the GPU entries call them
# with `Portable`, i.e. `fma.rn` as before) and `Algebra::T` now points at const tables, so this
# runs every Clifford GPU test (forward, backward, FCGP, long rows, against the f64 reference and
# the CPU). The log comes back as $OUT/cliffcpu-gpu-tests.log.
set -uo pipefail
BIN=${BIN:-.carry}
if [ ! -x $BIN/ferrotune_tests ] && [ -f $BIN/bins.tar.xz ]; then xz -dc $BIN/bins.tar.xz | tar -C $BIN -xf -; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} FERROTUNE_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0
export FERROTUNE_COMMIT=$(cat $BIN/commit 2>/dev/null || echo unknown)
OUT=${OUT:-out}; mkdir -p $OUT
timeout 540 $BIN/ferrotune_tests clifford 2>&1 | tee $OUT/cliffcpu-gpu-tests.log | tail -30
rc=${PIPESTATUS[0]}
grep -q "skipped:" $OUT/cliffcpu-gpu-tests.log && echo "WARNING: some tests printed 'skipped:' (no GPU?)"
exit $rc
