#!/usr/bin/env bash
# One device call for the Clifford layer ops (issue 6): their GPU tests (with the PTX entry
# check), compute-sanitizer memcheck/racecheck on the forward and backward, and the Clifford
# bench (JSON). Run `bash bench/prepare-carry.sh` here first; results land in $OUT/results/.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FERROTUNE_COMMIT=$(cat .carry/commit) FERROTUNE_REQUIRE_GPU=1
R=$OUT/results; mkdir -p $R
echo "=== Clifford GPU tests"
timeout 300 .carry/ferrotune_tests --test-threads=1 --nocapture gpu_clifford every_entry > $R/clifford-tests.txt 2>&1
echo "tests exit $?"; grep -E "test result|cases|panicked" $R/clifford-tests.txt
echo "=== compute-sanitizer"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 .carry/ferrotune_tests --test-threads=1 \
  gpu_clifford_forward gpu_clifford_backward > $R/clifford-memcheck.txt 2>&1
echo "memcheck: exit $? $(grep -E 'ERROR SUMMARY' $R/clifford-memcheck.txt | tail -1)"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 .carry/ferrotune_tests --test-threads=1 \
  gpu_clifford_backward > $R/clifford-racecheck.txt 2>&1
echo "racecheck: exit $? $(grep -E 'RACECHECK SUMMARY' $R/clifford-racecheck.txt | tail -1)"
echo "=== Clifford bench"
timeout 400 .carry/xtask bench --ops clifford --json $R/clifford-h100.json > $R/clifford-bench.txt 2>&1
echo "bench exit $?"; cat $R/clifford-bench.txt
tar -czf $OUT/clifford-results.tgz -C $OUT results
