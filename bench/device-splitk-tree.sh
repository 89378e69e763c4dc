#!/usr/bin/env bash
# The Hopper split-K's join (radix-8 tree): correctness (the split GPU tests, compute-sanitizer
# memcheck and racecheck on the deterministic/reusable test), then the streaming-class shapes
# against cuBLAS with the heuristic's split and with 1-32 slices forced (FERROTUNE_SM90_SPLIT),
# to refit the split rule. Results: $OUT/splitk-tree.tgz (logs, one suite JSON per split),
# $OUT/splitk-tree-summary.txt.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} FERROTUNE_REQUIRE_GPU=1
export FERROTUNE_COMMIT=$(cat .carry/commit)
R=$OUT/splitk-tree; mkdir -p $R; S=$OUT/splitk-tree-summary.txt
X=.carry/xtask; T=.carry/ferrotune_tests
{ echo "commit $FERROTUNE_COMMIT, $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $S
timeout 150 $T --test-threads=1 gpu_sm90_split sm90_tf32_every_tile_and_the_split gpu_split_k > $R/tests.txt 2>&1
echo "tests exit $?: $(grep -E '^test result' $R/tests.txt)" | tee -a $S; grep -E "FAILED|panicked" $R/tests.txt | head -5 | tee -a $S
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
    gpu_sm90_split_k_is_deterministic_and_reusable > $R/sanitizer-$tool.txt 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/sanitizer-$tool.txt | tr '\n' ' ')" | tee -a $S
done
SH=${SHAPES:-64x4096x4096,256x256x65536,512x512x32768,1024x1024x16384,128x8192x1024,256x1024x16384,40x8192x8192,64x14336x4096,128x4096x8192,96x6144x6144}
for sp in heur ${SPLITS:-1 2 4 8 16 32}; do
  if [ $sp = heur ]; then e=(); else e=(FERROTUNE_SM90_SPLIT=$sp); fi
  env "${e[@]}" timeout 60 $X bench --ops gemm --shape-suite irregular --shapes $SH --dtypes bf16 --warmup 3 --iters 20 \
    --json $R/suite-$sp.json > $R/suite-$sp.txt 2>&1
  echo "split $sp exit $?" | tee -a $S
done
python3 - $R $S <<'PY'
import json, sys, os, glob
r, s = sys.argv[1], sys.argv[2]
rows = {}
for f in sorted(glob.glob(f"{r}/suite-*.json")):
    sp = f.split("suite-")[1][:-5]
    try: d = json.load(open(f))
    except Exception as e: continue
    for x in d["rows"]:
        key = f"{x['m']}x{x['n']}x{x['k']}"
        cq = x.get("cublas_queued_ms") or (x.get("cublas") or {}).get("median_ms")
        oq = x.get("ours_queued_ms") or x["ours"]["median_ms"]
        rows.setdefault(key, {})[sp] = (oq * 1e3, cq * 1e3 if cq else None, x["correct"])
out = []
sps = ["heur", "1", "2", "4", "8", "16", "32"]
out.append("shape (µs, queued per call: ours by split; cuBLAS)  " + "  ".join(f"{p:>7}" for p in sps) + "   cuBLAS")
for k, v in rows.items():
    cub = next((c for (_, c, _) in v.values() if c), None)
    cells = [f"{v[p][0]:7.1f}{'' if v[p][2] else '!'}" if p in v else "      -" for p in sps]
    out.append(f"{k:>18} " + "  ".join(cells) + f"   {cub:7.1f}" if cub else "")
open(s, "a").write("\n".join(out) + "\n")
print("\n".join(out))
PY
tar -czf $OUT/splitk-tree.tgz -C $OUT splitk-tree && rm -rf $R
