#!/usr/bin/env bash
# Issues 12 and 11 (weight-streaming, long-K and short-K shapes on the Hopper path): the streaming tiles
# (64x128x64s8, 64x256x64s5: one consumer, one block per SM, a deep ring) and the paired tile
# (128x128x64s3, two blocks per SM: one epilogue beside the other main loop) against the tiles
# the plan picked before, on few-row, few-tile and long-K shapes, most of them not in the
# irregular suite. Run from an unpacked carry (`bash bench/prepare-carry.sh` here; on the
# device: `bash bench/device-stream.sh`). Parts (PARTS, default tests,sweep):
#   tests   the sm90 and Hopper split GPU tests with the plan's tiles, then with each streaming
#           tile forced (edges, K edges, strided batches, split shapes); memcheck on both forced
#   sweep   `bench --ops gemm --shape-suite irregular --shapes ...` (bf16, cuBLAS in the same
#           process, queued and single-call times) per (tile, K slices); a table ours/cuBLAS
# Every step is bounded by what is left of BUDGET seconds. Results in $OUT (at most 8 files).
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-300}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=${CARRY:-.carry}
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
PARTS=${PARTS:-tests,sweep}
OUT=${OUT:-/tmp/stream-out}; mkdir -p $OUT
X=$C/xtask; T=$C/ferrotune_tests
STILES=${STILES:-10 11 12}
python3 - "$OUT/device.json" <<'PY'
import json, subprocess, sys, datetime, os
q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv,noheader"],
                   capture_output=True, text=True).stdout.strip()
json.dump({"device_query": q, "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": os.environ.get("FERROTUNE_COMMIT", "unknown")}, open(sys.argv[1], "w"), indent=1)
print(q)
PY
if [[ $PARTS == *tests* ]]; then
  R=$OUT/tests.txt; : > $R
  timeout $(cap 120) $T --test-threads=1 sm90_ gpu_sm90_split > /tmp/t.txt 2>&1
  stamp "plan's tiles: exit $? $(grep 'test result' /tmp/t.txt)" | tee -a $R; grep -E "panicked|FAILED" /tmp/t.txt | head -5 | tee -a $R
  for t in $STILES; do
    FERROTUNE_SM90_TILE=$t timeout $(cap 90) $T --test-threads=1 sm90_edge sm90_k_edges sm90_strided \
      gpu_sm90_split_k_shapes gpu_sm90_split_k_is_deterministic > /tmp/t.txt 2>&1
    stamp "tile $t forced: exit $? $(grep 'test result' /tmp/t.txt)" | tee -a $R; grep -E "panicked|FAILED" /tmp/t.txt | head -5 | tee -a $R
    FERROTUNE_SM90_TILE=$t timeout $(cap 90) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 \
      sm90_strided gpu_sm90_split_k_is_deterministic > /tmp/m.txt 2>&1
    stamp "tile $t memcheck: exit $? $(grep -E 'ERROR SUMMARY' /tmp/m.txt | tail -1)" | tee -a $R
  done
fi
if [[ $PARTS == *sweep* ]]; then
  SH=${SWEEP_SHAPES:-64x4096x4096,48x4096x4096,64x11008x4096,64x14336x4096,96x4096x4096,128x8192x1024,128x4096x4096,128x14336x4096,256x256x65536,256x1024x16384,512x512x32768,1024x1024x16384,40x8192x8192,200x5000x3000}
  S=$OUT/sweep.txt; : > $S
  run() { # label, then env assignments
    local label=$1; shift
    [ $(left) -lt 20 ] && { echo "### $label: skipped (budget)" >> $S; return; }
    env "$@" timeout $(cap 60) $X bench --ops gemm --shape-suite irregular --shapes $SH --dtypes bf16 --warmup 3 \
      --iters 20 > /tmp/s.txt 2>&1
    stamp "$label: exit $?"
    { echo "### $label ($*)"; grep -E "^ *bf16" /tmp/s.txt; } >> $S
  }
  run default FERROTUNE_X=1
  run t9 FERROTUNE_SM90_TILE=9
  run t1 FERROTUNE_SM90_TILE=1
  for t in ${STILES/12/}; do
    run t$t FERROTUNE_SM90_TILE=$t
    for sp in 1 2 4 8; do run t$t-s$sp FERROTUNE_SM90_TILE=$t FERROTUNE_SM90_SPLIT=$sp; done
  done
  # The paired tile on short- and mid-K shapes with many tiles (the K = 768 class).
  SH=${PAIR_SHAPES:-8192x3072x768,512x3072x768,4096x1024x768,16384x1024x1024,2048x2048x2048,8192x8192x512,4096x4096x4096,3072x3072x1536}
  run pair-default FERROTUNE_X=1
  run pair-t12 FERROTUNE_SM90_TILE=12
  run pair-t1 FERROTUNE_SM90_TILE=1
  run pair-t0 FERROTUNE_SM90_TILE=0
  python3 - $S > $OUT/sweep-table.md <<'PY'
import re, sys, collections
cur=None; t=collections.OrderedDict(); cub=collections.defaultdict(list); labels=[]
for l in open(sys.argv[1]):
    if l.startswith('###'): cur=l.split()[1]; labels.append(cur); continue
    m=re.match(r'\s*bf16\s+(\d+)x\s*(\d+)x\s*(\d+) ours\s+([\d.]+) ms.*queued ([\d.]+|-)/([\d.]+|-) ms', l)
    if not m or not cur: continue
    s='%sx%sx%s'%m.groups()[:3]; single=float(m.group(4))
    q=float(m.group(5)) if m.group(5)!='-' else single
    t.setdefault(s,{})[cur]=min(single,q)
    if m.group(6)!='-': cub[s].append(float(m.group(6)))
print('| shape | cuBLAS queued ms (median over runs) | '+' | '.join(labels)+' |')
print('|'+'---|'*(len(labels)+2))
for s,row in t.items():
    c=sorted(cub[s])[len(cub[s])//2] if cub[s] else float('nan')
    best=min(row.values())
    cells=[('**%.4f**' if row.get(l)==best else '%.4f')%row[l] if l in row else '-' for l in labels]
    print('| %s | %.4f | %s |'%(s,c,' | '.join(cells)))
print('\nours = the better of single-call and queued medians; bold = fastest config of the row.')
PY
  cat $OUT/sweep-table.md
fi
stamp done
