#!/usr/bin/env bash
# The multi-GPU run, for nvidia-h200-x2 (issue 14), from an unpacked carry (.carry/xtask,
# .carry/ferrotune_tests; benches/torch_allreduce.py from the tree): topology, the multi-GPU tests, the
# multi-gpu bench (peer copies, NCCL all-reduce vs torch.distributed, data-parallel step 1 vs 2
# GPUs), device-parallel tuning of 8 GEMM shapes on 1 vs 2 GPUs (same profile content?) and a
# kill -9 / resume of a 2-GPU tuning run. Stays under 420 s (each step is cut to what is left).
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
BUDGET=420
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
echo "tests exit $?"; grep -E "^test |test result|panicked|skipped" "$R/tests.txt" | head -20

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
echo "=== kill -9 a 2-GPU run after 5 s, then resume"
left=$((BUDGET - SECONDS))
if [ $left -gt 30 ]; then
  "${TUNE[@]}" --devices 0,1 --profile $T/kill.toml > "$R/tune-kill-1.txt" 2>&1 &
  pid=$!; sleep 5; pkill -9 -P $pid; kill -9 $pid; wait $pid 2>/dev/null; sleep 1
  ls $T > "$R/tune-kill-files.txt"
  run_for 60 "$R/tune-kill-2.txt" "${TUNE[@]}" --devices 0,1 --profile $T/kill.toml --json $T/kill.json
fi
cp $T/*.toml "$R/" 2>/dev/null
python3 - "$T" "$OUT/multigpu-tune.json" "$R" $t1 $t2 $e1 $e2 <<'EOF'
import json, sys, os
try:
    import tomllib
except ImportError:  # python < 3.11: compare the entries' text without dates and timings
    tomllib = None
t, out, r, t1, t2, e1, e2 = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])
def took(log):  # the tuner's own wall time ("device-parallel tuning took X s on N devices")
    import re
    m = re.search(r"tuning took ([0-9.]+) s", open(log).read()) if os.path.exists(log) else None
    return float(m.group(1)) if m else None
k1, k2 = took(f"{r}/tune-1gpu.txt"), took(f"{r}/tune-2gpu.txt")
def entries(p):
    if not os.path.exists(p): return None
    if tomllib is None:
        skip = ("date", "mad_ms", "median_ms", "throughput_gbps", "tflops", "default_ms", "evaluations", "tool_version")
        blocks = open(p).read().split("[[entry]]")[1:]
        return [tuple([""] * 6 + ["\n".join(l for l in b.split("[[journal]]")[0].splitlines() if not l.split(" ")[0] in skip and "runners_up" not in l)]) for b in blocks]
    d = tomllib.load(open(p, "rb"))
    return [(e["op"], e["dtype"], e["layout"], tuple(e["shape"]), e["device"]["name"], e["build"], json.dumps(e["config"], sort_keys=True)) for e in d.get("entry", [])]
one, two = entries(f"{t}/one.toml"), entries(f"{t}/two.toml")
keys = lambda es: None if es is None else [x[:6] for x in es]
kill = json.load(open(f"{t}/kill.json")) if os.path.exists(f"{t}/kill.json") else None
files = open(f"{r}/tune-kill-files.txt").read().split() if os.path.exists(f"{r}/tune-kill-files.txt") else []
doc = {
  "commit": os.environ.get("FERROTUNE_COMMIT"), "shapes": 8,
  "one_gpu_s": t1, "two_gpu_s": t2, "exit": [e1, e2],
  "speedup": (t1 / t2) if t2 > 0 and e1 == 0 and e2 == 0 else None,
  "tuner_s": [k1, k2], "tuner_speedup": (k1 / k2) if k1 and k2 else None,
  "entries": [len(one or []), len(two or [])],
  "same_keys_and_device": keys(one) == keys(two) and one is not None,
  "same_configs": one == two and one is not None,
  "configs_that_differ": None if one is None or two is None else sum(a != b for a, b in zip(one, two)),
  "kill": None if kill is None else {
    "files_after_kill": files,
    "reused_from_journal": sum(s["reused"] for s in kill["shapes"]),
    "measured_after_resume": sum(s["measured"] for s in kill["shapes"]),
    "shapes_already_done": sum(1 for s in kill["shapes"] if s["existing"]),
  },
}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps(doc, indent=1))
EOF
tar -czf "$OUT/multigpu-logs.tgz" -C "$OUT" multigpu-logs && rm -rf "$R"
echo "total ${SECONDS} s"
