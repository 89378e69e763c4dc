#!/usr/bin/env bash
# One device call on the merged tree (H100), from a carry built by `bench/prepare-carry.sh`
# (cubins embedded: no JIT): the peers first (torch alone on the GPU), then the whole GPU test
# suite, then our benches — GEMM on the five Hopper shapes (bf16, f16, fused GELU), the
# irregular suite (bf16), Clifford (fwd, fwd+bwd, FCGP forward) and the GELU elementwise rows —
# each joined with its peer. Every step is bounded by what is left of BUDGET seconds.
# Results: $OUT/merged.tgz (everything) and the joined tables in $OUT.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-420}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 10 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
save() { tar -czf $OUT/merged.tgz -C $R . 2>/dev/null; }  # after every stage: a cut-off call keeps what ran
C=.carry
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache TRITON_CACHE_DIR=/tmp/triton-cache
R=$(mktemp -d); T=$C/ferrotune_tests; X=$C/xtask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/nvidia-smi.txt
GEMM_SHAPES=8192x8192x8192,4096x4096x4096,2048x2048x2048,8192x3072x768,512x3072x768
SUITE=1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768
CLIFFORD=4096x512,4096x777,4096x1024,8192x1024,16x100000

timeout 30 $X info > $R/info.txt 2>&1; stamp "info: $(grep kernels: $R/info.txt)"
stamp "=== torch peers (GEMM, suite, Clifford), alone on the GPU"
timeout $(cap 70) python3 benches/torch_gemm.py --shapes $GEMM_SHAPES --dtypes bf16,f16 --gelu 8192x3072x768,512x3072x768 \
  --json $R/torch-gemm-h100.json > $R/torch-gemm.txt 2>&1; stamp "torch gemm exit $?"
timeout $(cap 50) python3 benches/torch_gemm.py --shapes $SUITE --dtypes bf16 --rotate --warmup 3 --iters 20 \
  --json $R/torch-gemm-irregular-h100.json > $R/torch-gemm-irregular.txt 2>&1; stamp "torch suite exit $?"
timeout $(cap 70) python3 benches/torch_clifford.py --no-check --sizes 4096x512 --ops fwd,fwdbwd --impls eager,compile \
  --compile-mode per-shape --out $R/torch-clifford-h100.json > $R/torch-clifford.txt 2>&1; stamp "torch clifford exit $?"

save
stamp "=== the whole GPU test suite"
timeout $(cap 150) $T --test-threads=4 > $R/all-tests.txt 2>&1
stamp "tests exit $?"; grep -E "test result|panicked" $R/all-tests.txt | head -6; grep -E "^test .*FAILED" $R/all-tests.txt | head

save
stamp "=== bench --ops gemm (bf16, f16, fused GELU)"
FERROTUNE_BENCH_NO_SPLIT=1 timeout $(cap 60) $X bench --ops gemm --dtypes bf16,f16 --shapes $GEMM_SHAPES \
  --json $R/gemm-h100.json > $R/gemm.txt 2>&1; stamp "gemm exit $?"
python3 bench/gemm_join.py $R/gemm-h100.json $R/torch-gemm-h100.json --markdown $R/gemm-vs-peers-h100.md 2>&1 | tail -2
timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --dtypes bf16 --warmup 3 --iters 20 \
  --json $R/gemm-irregular-bf16-h100.json > $R/gemm-irregular-bf16.txt 2>&1; stamp "suite exit $?"
python3 bench/gemm_join.py $R/gemm-irregular-bf16-h100.json $R/torch-gemm-irregular-h100.json \
  --markdown $R/gemm-irregular-bf16-vs-peers.md 2>&1 | tail -1

save
stamp "=== Clifford"
timeout $(cap 50) $X bench --ops clifford --clifford-rows fwd,fwdbwd --shapes $CLIFFORD \
  --json $R/clifford-h100.json > $R/clifford-bench.txt 2>&1; stamp "clifford exit $?"
timeout $(cap 30) $X bench --ops clifford --clifford-rows fcgp_fwd --dtypes f32,bf16 --shapes 4096x512,4096x1024 \
  --json $R/clifford-fcgp-h100.json > $R/clifford-fcgp.txt 2>&1; stamp "fcgp exit $?"
python3 bench/clifford_join.py $R/clifford-h100.json $R/torch-clifford-h100.json --out $R/clifford-vs-torch-h100.md 2>&1 | tail -12

save
stamp "=== GELU elementwise rows (the host-maths rewrite changed the shared GELU)"
timeout $(cap 40) $X bench --ops copy,gelu_erf,gelu_tanh,add_mul_gelu_erf,add_mul_gelu_tanh --dtypes f32,f16,bf16 \
  --json $R/elementwise-gelu-h100.json > $R/elementwise-gelu.txt 2>&1; stamp "gelu exit $?"
tail -16 $R/elementwise-gelu.txt | cut -c1-120

tar -czf $OUT/merged.tgz -C $R .
cp $R/gemm-vs-peers-h100.md $R/gemm-irregular-bf16-vs-peers.md $R/clifford-vs-torch-h100.md $R/all-tests.txt $OUT/ 2>/dev/null
stamp "done"
