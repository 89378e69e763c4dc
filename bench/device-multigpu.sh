#!/usr/bin/env bash
# The multi-GPU run, for nvidia-h200-x2 (issue 14), from an unpacked carry (.carry/xtask,
# .carry/ferrotune_tests; benches/torch_allreduce.py from the tree): topology, the multi-GPU tests, the
# multi-gpu bench (peer copies, NCCL all-reduce vs torch.distributed, data-parallel step 1 vs 2
# GPUs), device-parallel tuning of 8 GEMM shapes on 1 vs 2 GPUs (same profile content? each
# GPU's timeline from the shared queue: start-up, shapes taken, idle tail, and each shape's time
# on 2 GPUs over its time on 1, which shows contention between the sessions) and a
# kill -9 mid-run / resume of a 24-shape 2-GPU tuning run against an uninterrupted one
# (bench/multigpu_tune.py, carried beside this script). Stays under $BUDGET s (default 420;
# each step is cut to what is left).
# Results: $OUT/multigpu.json, $OUT/multigpu-tune.json, $OUT/multigpu-logs.tgz.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0); nothing here calls cuMulticastCreate.
set -uo pipefail
cd "$(dirname "$0")/.."
C=.carry
if [ -f $C/bins.tar.xz ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf -; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 FERROTUNE_REQUIRE_GPU=1 FERROTUNE_REQUIRE_GPUS=2 FERROTUNE_REQUIRE_NCCL=1
export FERROTUNE_COMMIT=$(cat $C/commit 2>/dev/null || echo unknown)
export FERROTUNE_TORCH_ALLREDUCE=$PWD/benches/torch_allreduce.py
# The carry embeds cubins (no JIT); should a PTX ever be JIT-compiled, the cache keeps it.
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
R=$OUT/multigpu-logs; mkdir -p "$R"
BUDGET=${BUDGET:-420}
# The tuning summary script: carried beside this one, else the tree's.
PY=$C/multigpu_tune.py; [ -f $PY ] || PY=bench/multigpu_tune.py
# run_for SECONDS LOG CMD...: runs CMD with at most SECONDS (or what is left of the budget).
run_for() {
  local want=$1 log=$2; shift 2
  local left=$((BUDGET - SECONDS)); local t=$(( want < left ? want : left ))
  if [ "$t" -lt 8 ]; then echo "skipped (budget spent): $*" | tee -a "$log"; return 124; fi
  timeout -s KILL "$t" "$@" >> "$log" 2>&1
}

# cudarc loads NCCL as libnccl.so / .so.13 / .so.12 ...; torch's wheel ships libnccl.so.2: a
# private directory with a libnccl.so link to it goes first on the loader's path.
NCCL_DIR=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib'))" 2>/dev/null)
if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/libnccl.so.2" ]; then
  mkdir -p /tmp/ferrotune-nccl && ln -sf "$NCCL_DIR/libnccl.so.2" /tmp/ferrotune-nccl/libnccl.so
  export LD_LIBRARY_PATH=/tmp/ferrotune-nccl:$LD_LIBRARY_PATH FERROTUNE_NCCL_PATH=$NCCL_DIR/libnccl.so.2
fi
echo "NCCL: ${FERROTUNE_NCCL_PATH:-not found in the python site-packages}"
nvidia-smi topo -m > "$R/topo.txt" 2>&1; cat "$R/topo.txt"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv > "$R/nvidia-smi.txt" 2>&1
run_for 30 "$R/info.txt" $C/xtask info; grep -E "device [0-9]|->|NCCL" "$R/info.txt"

echo "=== multi-GPU tests"
run_for 150 "$R/tests.txt" $C/ferrotune_tests --test-threads=1 --nocapture multigpu
echo "tests exit $?"; grep -E "^test |test result|panicked|skipped|returned" "$R/tests.txt" | head -24

echo "=== one process per GPU (xtask ranks: id by env and by file, like torchrun)"
run_for 40 "$R/ranks.txt" $C/xtask ranks --world 2 --timeout 10
echo "ranks exit $?"; tail -4 "$R/ranks.txt"

echo "=== bench --ops multi-gpu"
run_for 90 "$R/bench.txt" $C/xtask bench --ops multi-gpu --json "$OUT/multigpu.json"
echo "bench exit $?"; grep -vE "^torch all-reduce" "$R/bench.txt" | tail -40

echo "=== device-parallel tuning: 8 GEMM shapes, 1 GPU vs 2"
SHAPES=4096x4096x4096,4096x4096x2048,2048x4096x4096,4096x2048x4096,2048x2048x8192,3072x3072x3072,8192x2048x2048,2048x8192x2048
T=/tmp/ferrotune-tune; rm -rf $T; mkdir -p $T
TUNE=($C/xtask tune --ops gemm --dtypes bf16 --layouts rc --sizes $SHAPES --strategy model --budget 32 --iters 10 --confirm-iters 30)
s=$SECONDS; run_for 100 "$R/tune-1gpu.txt" "${TUNE[@]}" --devices 0 --profile $T/one.toml --json $T/one.json; e1=$?; t1=$((SECONDS - s))
s=$SECONDS; run_for 60 "$R/tune-2gpu.txt" "${TUNE[@]}" --devices 0,1 --profile $T/two.toml --json $T/two.json; e2=$?; t2=$((SECONDS - s))
grep -E "device-parallel tuning took" "$R/tune-1gpu.txt" "$R/tune-2gpu.txt"

# kill -9 / resume needs a run that lasts: 24 shapes (12 sizes, bf16 and f16) on 2 GPUs. First
# uninterrupted (the reference profile), then again killed -9 with its workers (its own
# process group) once its part files hold 8 finished shapes and journalled candidates of
# unfinished ones, then resumed; the JSON says what was journalled at the kill, what the
# resume reused and measured, and whether the resumed profile equals the reference.
KSHAPES=$SHAPES,6144x4096x2048,4096x6144x2048,2048x2048x2048,1024x8192x4096
KTUNE=($C/xtask tune --ops gemm --dtypes bf16,f16 --layouts rc --sizes $KSHAPES --strategy model --budget 32 --iters 10 --confirm-iters 30 --devices 0,1)
KSHAPE_COUNT=24
echo "=== kill -9 mid-run and resume: $KSHAPE_COUNT GEMM shapes on 2 GPUs (uninterrupted reference first)"
run_for 90 "$R/tune-ref.txt" "${KTUNE[@]}" --profile $T/ref.toml --json $T/ref.json; er=$?
grep -E "device-parallel tuning took" "$R/tune-ref.txt"
left=$((BUDGET - SECONDS))
if [ $left -gt 60 ]; then
  s=$SECONDS
  set -m  # job control: the run gets its own process group (pgid = pid), its workers too
  "${KTUNE[@]}" --profile $T/kill.toml > "$R/tune-kill-1.txt" 2>&1 &
  pid=$!
  set +m
  python3 $PY watch $T/kill.toml $pid 8 3 60 > $T/watch.json; ready=$?
  running=false; kill -0 $pid 2>/dev/null && running=true
  kill -9 -- -$pid 2>/dev/null; killed_at=$((SECONDS - s))
  wait $pid 2>/dev/null; kst=$?
  sleep 1
  left_alive=$(pgrep -g $pid 2>/dev/null | wc -l)
  python3 $PY snapshot $T/kill.toml $T/at-kill.json
  finished_log=false; grep -q "device-parallel tuning took" "$R/tune-kill-1.txt" && finished_log=true
  echo "watch: $(cat $T/watch.json); running at the kill: $running; exit status $kst; processes of its group left: $left_alive"
  ls $T > "$R/tune-kill-files.txt"
  run_for 90 "$R/tune-kill-2.txt" "${KTUNE[@]}" --profile $T/kill.toml --json $T/kill.json; ek=$?
  grep -E "device-parallel tuning took|folded" "$R/tune-kill-2.txt"
  cat > $T/killinfo.json <<EOF2
{"shapes": $KSHAPE_COUNT, "reference_exit": $er, "watch": $(cat $T/watch.json), "watch_ready": $([ $ready = 0 ] && echo true || echo false),
 "running_at_kill": $running, "killed_after_s": $killed_at, "exit_status_of_killed": $kst,
 "finished_in_killed_log": $finished_log, "group_processes_left": $left_alive, "resume_exit": $ek}
EOF2
fi
cp $T/*.toml $T/at-kill.json "$R/" 2>/dev/null
python3 $PY summary "$T" "$R" "$OUT/multigpu-tune.json" $t1 $t2 $e1 $e2 8 $T/killinfo.json
tar -czf "$OUT/multigpu-logs.tgz" -C "$OUT" multigpu-logs && rm -rf "$R"
echo "total ${SECONDS} s"
