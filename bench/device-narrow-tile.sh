#!/usr/bin/env bash
# The narrow streaming tile (64 x 64, 13 stages, Hopper tile 12): correctness (every tile forced,
# compute-sanitizer memcheck and racecheck on the split tests), then the streaming-class shapes
# against cuBLAS: the heuristic, and tile 12 forced (FERROTUNE_SM90_TILE=12) unsplit and in 2,
# 4 and 8 slices (FERROTUNE_SM90_SPLIT). Results: $OUT/narrow-tile.tgz, $OUT/narrow-tile-summary.txt.
set -uo pipefail
bash bench/unpack-carry.sh || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} FERROTUNE_REQUIRE_GPU=1
export FERROTUNE_COMMIT=$(cat .carry/commit)
R=$OUT/narrow-tile; mkdir -p $R; S=$OUT/narrow-tile-summary.txt
X=.carry/xtask; T=.carry/ferrotune_tests
{ echo "commit $FERROTUNE_COMMIT, $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $S
timeout 200 $T --test-threads=1 sm90_every_tile_forced_through_the_path gpu_sm90_split > $R/tests.txt 2>&1
echo "tests exit $?: $(grep -E '^test result' $R/tests.txt)" | tee -a $S; grep -E "FAILED|panicked" $R/tests.txt | head -5 | tee -a $S
for tool in memcheck racecheck; do
  FERROTUNE_SM90_TILE=12 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $T --test-threads=1 \
    gpu_sm90_split_k_is_deterministic_and_reusable > $R/sanitizer-$tool.txt 2>&1
  echo "$tool (tile 12 forced) exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/sanitizer-$tool.txt | tr '\n' ' ')" | tee -a $S
done
SH=${SHAPES:-64x4096x4096,256x256x65536,512x512x32768,128x8192x1024,256x1024x16384,40x8192x8192,64x14336x4096,128x4096x8192,96x6144x6144,16x11008x4096,33x8191x4096,1024x1024x16384}
run() { # label, env...
  local l=$1; shift
  env "$@" timeout 60 $X bench --ops gemm --shape-suite irregular --shapes $SH --dtypes bf16 --warmup 3 --iters 20 \
    --json $R/suite-$l.json > $R/suite-$l.txt 2>&1
  echo "$l exit $?" | tee -a $S
}
run heur
run t12 FERROTUNE_SM90_TILE=12
for sp in 1 2 4 8; do run t12s$sp FERROTUNE_SM90_TILE=12 FERROTUNE_SM90_SPLIT=$sp; done
python3 - $R $S <<'PY'
import json, sys, glob
r, s = sys.argv[1], sys.argv[2]
labels = ["heur", "t12", "t12s1", "t12s2", "t12s4", "t12s8"]
rows, fam = {}, {}
for l in labels:
    try: d = json.load(open(f"{r}/suite-{l}.json"))
    except Exception: continue
    for x in d["rows"]:
        key = f"{x['m']}x{x['n']}x{x['k']}"
        cq = x.get("cublas_queued_ms") or (x.get("cublas") or {}).get("median_ms")
        oq = x.get("ours_queued_ms") or x["ours"]["median_ms"]
        rows.setdefault(key, {})[l] = (oq * 1e3, cq * 1e3 if cq else None, x["correct"])
        if l == "heur": fam[key] = x["family"][:60]
out = ["shape  (µs per call, queued; '!' = failed its check)  " + "  ".join(f"{l:>7}" for l in labels) + "   cuBLAS"]
for k, v in rows.items():
    cub = next((c for (_, c, _) in v.values() if c), 0.0)
    cells = [f"{v[l][0]:7.1f}{'' if v[l][2] else '!'}" if l in v else "      -" for l in labels]
    out.append(f"{k:>18} " + "  ".join(cells) + f"   {cub:7.1f}   {fam.get(k, '')}")
open(s, "a").write("\n".join(out) + "\n")
print("\n".join(out))
PY
tar -czf $OUT/narrow-tile.tgz -C $OUT narrow-tile && rm -rf $R
