#!/usr/bin/env bash
# Issue 12 item 6 (helper tunespace): every GEMM family as a point of the tuner's space, on the
# GPU, from the binaries `bench/prepare-carry.sh` packed into the carry (xtask and the test
# binary, PTX/cubins embedded). Run from the repository root with this script beside the
# carry's bins.tar.xz in $CARRY (default .carry):  `bash .carry/device-tunespace.sh`
# (about 150-200 s; BUDGET caps it, default 240).
# Parts (PARTS, default tune,explain,bench,tests):
#   tune     `xtask tune --ops gemm` (exhaustive, bf16 rc) on a decode GEMV 1x4096x4096 (small-M
#            K splits against the tiles and the Hopper tiles), 33x8191x4099 (small M, odd K:
#            pack on/off times small-M, Hopper, tiles) and 256x256x65536 (long K: the Hopper
#            in-kernel split against the mma.sync split-K): tuned vs the kernels' default and
#            the built-in plan (measured beside them), into a fresh profile
#   explain  `profile explain --op gemm` per shape, without a profile and with the tuned one:
#            the config, where it came from, the family the plan runs and why
#   bench    `bench --ops gemm` on the shapes (cuBLAS beside), without and with
#            FERROTUNE_PROFILE=the tuned profile: the path lines show the profile is used
#   tests    the GPU tests of the tuned points, the plan and the small-M family
# Results in $OUT (8 files): device.json, tunespace-h100.toml, tune.json, tune.log,
# explain.txt, bench-builtin.txt, bench-tuned.txt, tests.txt; a summary is printed last.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-240}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=${CARRY:-.carry}
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
unset FERROTUNE_PROFILE
PARTS=${PARTS:-tune,explain,bench,tests}
OUT=${OUT:-/tmp/tunespace-out}; mkdir -p $OUT
X=$C/xtask; T=$C/ferrotune_tests
SHAPES=${SHAPES:-1x4096x4096,33x8191x4099,256x256x65536}
PROFILE=$OUT/tunespace-h100.toml
EMPTY=/tmp/tunespace-no-profiles; mkdir -p $EMPTY
python3 - "$OUT/device.json" <<'EOF'
import json, subprocess, sys, datetime, os
q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv,noheader"],
                   capture_output=True, text=True).stdout.strip()
json.dump({"device_query": q, "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": os.environ.get("FERROTUNE_COMMIT", "unknown")}, open(sys.argv[1], "w"), indent=1)
print(q)
EOF
if [[ $PARTS == *tune* ]]; then
  stamp "=== tune (exhaustive, bf16 rc): $SHAPES"
  rm -f $PROFILE
  timeout $(cap 150) $X tune --ops gemm --dtypes bf16 --layouts rc --sizes $SHAPES --strategy exhaustive \
    --iters 20 --confirm-iters 100 --time-limit 45 --profile $PROFILE --json $OUT/tune.json > $OUT/tune.log 2>&1
  stamp "tune exit $?"; sed -n '/op \/ shape/,$p' $OUT/tune.log | cut -c1-220
fi
if [[ $PARTS == *explain* ]]; then
  stamp "=== profile explain: built-in, then the tuned profile"
  : > $OUT/explain.txt
  for s in ${SHAPES//,/ }; do
    for p in $EMPTY $PROFILE; do
      [ -e $p ] || continue
      echo "--- $s, profiles from $p" >> $OUT/explain.txt
      timeout $(cap 20) $X profile explain --op gemm --dtype bf16 --layout rc --shape $s --profile $p >> $OUT/explain.txt 2>&1
    done
  done
  grep -E "^---|from:|family:|path:" $OUT/explain.txt | cut -c1-260
fi
if [[ $PARTS == *bench* ]]; then
  stamp "=== bench --ops gemm without, then with the tuned profile"
  export FERROTUNE_BENCH_NO_SPLIT=1  # the split-K comparison rows: not this run's question
  FERROTUNE_PROFILE=$EMPTY timeout $(cap 60) $X bench --ops gemm --shapes $SHAPES --dtypes bf16 --warmup 5 --iters 50 \
    > $OUT/bench-builtin.txt 2>&1; stamp "built-in exit $?"
  if [ -f $PROFILE ]; then
    FERROTUNE_PROFILE=$PROFILE FERROTUNE_PROFILE_STRICT=1 timeout $(cap 60) $X bench --ops gemm --shapes $SHAPES \
      --dtypes bf16 --warmup 5 --iters 50 > $OUT/bench-tuned.txt 2>&1; stamp "tuned exit $?"
  fi
  for f in bench-builtin bench-tuned; do
    [ -f $OUT/$f.txt ] && { echo "--- $f"; grep -E -A1 "(1x 4096x 4096|33x 8191x 4099|256x  256x65536)" $OUT/$f.txt | cut -c1-200; }
  done
fi
if [[ $PARTS == *tests* ]]; then
  stamp "=== GPU tests: tuned family points, plan, small-M"
  timeout $(cap 120) $T --test-threads=2 tune_families tune_path gemv gemm_plan > $OUT/tests.txt 2>&1
  stamp "tests exit $?"; grep -E "test result|FAILED|panicked|skipped" $OUT/tests.txt | head -20
fi
stamp "=== summary"
python3 - "$OUT/tune.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no tune.json:", e); sys.exit(0)
print(f"{'shape':<28} {'default ms':>10} {'built-in ms':>11} {'tuned ms':>9}  tuned config")
for s in r.get("shapes", []):
    f = lambda v: "-" if v is None else f"{v:.4f}"
    print(f"{s.get('label',''):<28} {f(s.get('default_ms')):>10} {f(s.get('heuristic_ms')):>11} {f(s.get('tuned_ms')):>9}  {s.get('tuned_config')}")
EOF
ls -la $OUT
