#!/usr/bin/env bash
# One device call that produces the committed H100 results (see bench/NOTES.md): GPU test
# suite, compute-sanitizer, elementwise bench (JSON, markdown, trace), GEMM vs cuBLAS, torch
# peers. Everything lands in $OUT/results/ and is packed into $OUT/results.tgz.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FERROTUNE_COMMIT=$(cat .carry/commit) FERROTUNE_REQUIRE_GPU=1
R=$OUT/results; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
.carry/xtask info > $R/info.txt 2>&1
echo "=== GPU tests"
timeout 300 .carry/ferrotune_tests --test-threads=1 --nocapture gpu_ errors ptx public_wrappers gemm_ > $R/tests.txt 2>&1
echo "tests exit $?"; grep -E "test result|cases" $R/tests.txt
echo "=== compute-sanitizer"
for tool in memcheck racecheck synccheck; do
  FERROTUNE_TEST_SMALL=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 .carry/ferrotune_tests \
    --test-threads=1 --nocapture gpu_matches gpu_sum gpu_gemm_matches > $R/sanitizer-$tool.txt 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer-$tool.txt | tail -1)"
done
echo "=== elementwise bench"
timeout 300 .carry/xtask bench --json $R/elementwise-h100.json --markdown $R/elementwise-h100.md \
  --trace $R/elementwise-h100-trace.json > $R/bench.txt 2>&1
echo "bench exit $?"; grep -E "worst|ceiling" $R/bench.txt | head; tail -3 $R/bench.txt
echo "=== GEMM bench"
timeout 300 .carry/xtask bench --ops gemm --json $R/gemm-h100.json > $R/gemm.txt 2>&1
echo "gemm exit $?"; cat $R/gemm.txt
echo "=== torch"
timeout 240 python3 benches/torch_elementwise.py --json $R/torch-elementwise-h100.json > $R/torch.txt 2>&1
echo "torch exit $?"
tar -czf $OUT/results.tgz -C $OUT results
