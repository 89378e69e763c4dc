#!/usr/bin/env bash
# Per-op kernel build ids on the H100, from a carry built by `bench/prepare-carry.sh`:
# the whole GPU test binary; the shipped elementwise profile re-tuned (5 ops x f32/bf16 at
# 32M elements, exhaustive) and checked (`profile validate --deny-warnings`, `explain`); a
# Clifford tune (f32, two shapes, every candidate verified in a CUDA worker); then
# Nsight Compute's kernel durations at 512x3072x768 bf16 (ours and cuBLAS's kernels in the
# same `bench` process), to split the small-problem gap between kernel and launch.
# TESTS=0 / CLIFFORD=0 / NCU=0 / NSYS=0 skip those steps. Every step is bounded by what is
# left of BUDGET seconds; results under $OUT (profile.tgz has everything).
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-560}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 10 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=.carry
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
R=$(mktemp -d); T=$C/ferrotune_tests; X=$C/xtask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
echo "commit $(cat $C/commit) date $(date -u +%FT%TZ)" >> $R/nvidia-smi.txt

if [ "${TESTS:-1}" = 1 ]; then
stamp "=== the whole GPU test binary"
timeout $(cap 240) $T --test-threads=4 > $R/all-tests.txt 2>&1
stamp "tests exit $?: $(grep 'test result' $R/all-tests.txt)"; grep -E "^test .*FAILED" $R/all-tests.txt | head
fi

stamp "=== the shipped elementwise profile, re-tuned"
# RESUME=path: a profile of an earlier, cut-off run of this step (its entries are kept).
[ -n "${RESUME:-}" ] && cp "$RESUME" $R/h100.toml
timeout $(cap 300) $X tune --ops add,axpy,gelu_erf,gelu_tanh,add_mul_gelu_erf --dtypes f32,bf16 \
  --sizes 33554432 --strategy exhaustive --profile $R/h100.toml --json $R/tune-h100.json > $R/tune-h100.log 2>&1
stamp "tune exit $?"; tail -4 $R/tune-h100.log
timeout $(cap 30) $X profile validate $R/h100.toml --deny-warnings > $R/validate.txt 2>&1; stamp "validate exit $?"; cat $R/validate.txt
for op in add gelu_erf; do
  timeout $(cap 20) $X profile explain --op $op --dtype bf16 --n 33554432 --profile $R/h100.toml >> $R/explain.txt 2>&1
done
stamp "explain: $(grep -c 'entry (' $R/explain.txt) of 2 from the profile"; head -6 $R/explain.txt
$X info > $R/info.txt 2>&1; grep "kernel builds (sm_90a)" $R/info.txt | cut -c1-400

if [ "${CLIFFORD:-1}" = 1 ]; then
stamp "=== Clifford configs tuned in CUDA workers (every candidate verified), then explained"
timeout $(cap 150) $X tune --ops clifford --dtypes f32 --clifford-shapes 2x4096x512,3x4096x777 --clifford-norm on \
  --strategy exhaustive --time-limit 120 --profile $R/clifford.toml --json $R/tune-clifford.json > $R/tune-clifford.log 2>&1
stamp "clifford tune exit $?"; tail -6 $R/tune-clifford.log
for sh in 2x4096x512 3x4096x777; do
  timeout $(cap 20) $X profile explain --op clifford --dtype f32 --shape $sh --profile $R/clifford.toml >> $R/explain-clifford.txt 2>&1
done
head -12 $R/explain-clifford.txt
fi

if [ "${NCU:-1}" = 1 ]; then
stamp "=== kernel durations at 512x3072x768 bf16 (ncu), ours and cuBLAS"
timeout $(cap 120) ncu --metrics gpu__time_duration.sum --kernel-name-base function \
  -k 'regex:ft_gemm|nvjet|sm90|cutlass|gemm|Kernel' --launch-skip 0 --launch-count 40 \
  $X bench --ops gemm --dtypes bf16 --shapes 512x3072x768,2048x2048x2048 --iters 5 --warmup 1 > $R/ncu-small.txt 2>&1
stamp "ncu exit $?"; grep -E "^\s+[a-zA-Z_0-9]+.*\(|gpu__time_duration" $R/ncu-small.txt | head -40
fi

if [ "${NSYS:-1}" = 1 ]; then
stamp "=== host side of one GEMM call at 512x3072x768 bf16 (nsys CUDA API summary)"
NS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
[ -z "$NS" ] && NS=nsys && echo "nsys not found on this machine"
timeout $(cap 90) $NS profile -t cuda --stats=false -o $R/gemm-small --force-overwrite true \
  $X bench --ops gemm --dtypes bf16 --shapes 512x3072x768 --iters 200 --warmup 20 > $R/nsys-bench.txt 2>&1
stamp "nsys exit $?"
timeout $(cap 60) $NS stats -r cuda_api_sum,cuda_gpu_kern_sum $R/gemm-small.nsys-rep > $R/nsys-stats.txt 2>&1
grep -E "cuLaunch|cuTensorMap|cuEvent|cuStreamSync|cuCtx|Kernel|nvjet|ft_gemm" $R/nsys-stats.txt | cut -c1-200 | head -24
rm -f $R/gemm-small.nsys-rep $R/gemm-small.sqlite
fi

tar -czf $OUT/profile.tgz -C $R . && cp $R/all-tests.txt $R/h100.toml $R/tune-h100.log $R/info.txt $R/nsys-stats.txt $OUT/ 2>/dev/null
stamp done
