#!/usr/bin/env bash
# Issue 12 (irregular GEMM shapes) on the device, from the binaries `bench/prepare-carry.sh`
# packed into the carry (cubins embedded: no JIT). Run from the repository root with this
# script, bench/gemm_join.py and the carry's bins.tar.xz in $CARRY (default .carry):
#   `bash .carry/device-irregular.sh` (the lead's combined run: PARTS=suite,torch, about 110 s).
# Parts (PARTS, default suite,torch; the helper's own runs add tests,explore):
#   torch    benches/torch_gemm.py (`x @ w.T`, eager and CUDA graph) on the suite's shapes, first
#            and alone on the GPU
#   tests    the small-M, plan, pack, Hopper split and GEMM GPU tests (a skip fails), with
#            compute-sanitizer memcheck on the small-M tests beside them
#   suite    `bench --ops gemm --shape-suite irregular` (bf16 and f16) against cuBLAS, joined with
#            torch by bench/gemm_join.py (best peer per row, each side's better of single-call and
#            queued time)
#   ksplit   the small-M K split: the heuristic against forced 1, 2, 4, 8 slices (bf16)
#   explore  ksplit, then A/B rows of the plan's choices (bf16) and shapes the suite does not hold
#   unaligned  odd-K small-M weights read in place (interleaved slabs) against the funnel/pack
#            path (FERROTUNE_SMALL_M_UNALIGNED=0), suite and unseen shapes; ncu on two rows
#   longk    long K on the Hopper split: slice counts and tiles (FERROTUNE_SM90_SPLIT/_TILE)
# WARMUP and ITERS (default 3 and 20) set the suite's and torch's calls per row.
# Every step is bounded by what is left of BUDGET seconds. Results in $OUT (at most 8 files):
# device.json, the suite JSONs, torch JSON, the joined markdown, tests, memcheck, explore.
set -uo pipefail
START=$(date +%s); BUDGET=${BUDGET:-115}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
C=${CARRY:-.carry}
if [ ! -x $C/xtask ]; then xz -dc $C/bins.tar.xz | tar -C $C -xf - || exit 1; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit 2>/dev/null || echo unknown) FERROTUNE_REQUIRE_GPU=1
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/ferrotune-nv-cache
PARTS=${PARTS:-suite,torch}
OUT=${OUT:-/tmp/irregular-out}; mkdir -p $OUT
J=bench/gemm_join.py; [ -f $C/gemm_join.py ] && J=$C/gemm_join.py
TB=benches/torch_gemm.py; [ -f $C/torch_gemm.py ] && TB=$C/torch_gemm.py
X=$C/xtask; T=$C/ferrotune_tests
DTS=${DTYPES:-bf16,f16}
SHAPES="1x4096x4096,8x4096x4096,16x11008x4096,1x14336x4096,1x4096x14336,33x8191x4099,64x4096x4096,1x8193x4099,8x3000x64,33x1023x777,1x4097x777,8x12288x4099,33x4096x64,4097x1023x777,8191x8193x64,128x8192x1024,256x256x65536,512x512x32768,1024x1024x16384,1000x3000x700,2047x2049x1025,3x5x7,1x1x4099,17x33x9000,4096x4096x4096,8192x3072x768"
python3 - "$OUT/device.json" <<'EOF'
import json, subprocess, sys, datetime, os
q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv,noheader"],
                   capture_output=True, text=True).stdout.strip()
json.dump({"device_query": q, "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": os.environ.get("FERROTUNE_COMMIT", "unknown")}, open(sys.argv[1], "w"), indent=1)
print(q)
EOF
if [[ $PARTS == *torch* ]] && [ -f $TB ]; then
  stamp "=== torch x @ w.T on the suite ($DTS), alone on the GPU"
  timeout $(cap 150) python3 $TB --shapes $SHAPES --dtypes $DTS --rotate --warmup ${WARMUP:-3} --iters ${ITERS:-20} \
    --json $OUT/torch-gemm-irregular-h100.json > /tmp/torch-gemm-irregular.txt 2>&1
  stamp "torch exit $?"; tail -2 /tmp/torch-gemm-irregular.txt | cut -c1-150
fi
if [[ $PARTS == *tests* ]]; then
  timeout $(cap 140) compute-sanitizer --tool memcheck --error-exitcode 9 $T --test-threads=1 \
    gpu_small_m_odd_view_offsets gpu_small_m_split_k gpu_small_m_edge_shapes gpu_small_m_unaligned_rows > $OUT/irregular-sanitizer-memcheck.txt 2>&1 &
  SAN=$!
  stamp "=== GPU tests (small-M, pack, Hopper split, GEMM)"
  timeout $(cap 120) $T --test-threads=2 gemv:: pack:: gemm_sm90_split:: ${MORE_TESTS-gemm_sm90:: gpu_gemm_matches gpu_split_k} \
    > $OUT/irregular-tests.txt 2>&1
  stamp "tests exit $?"; grep -E "test result|panicked|FAILED|skipped" $OUT/irregular-tests.txt | head -20
  wait $SAN; stamp "memcheck exit $?: $(grep -E 'ERROR SUMMARY|test result' $OUT/irregular-sanitizer-memcheck.txt | tail -2 | tr '\n' ' ')"
fi
if [[ $PARTS == *suite* ]]; then
  for dt in ${DTS//,/ }; do
    stamp "=== irregular suite vs cuBLAS ($dt)"
    timeout $(cap 120) $X bench --ops gemm --shape-suite irregular --dtypes $dt --warmup ${WARMUP:-3} --iters ${ITERS:-20} \
      --json $OUT/gemm-irregular-$dt-h100.json > /tmp/gemm-irregular-$dt.txt 2>&1
    stamp "suite $dt exit $?"; grep -E "geomean" /tmp/gemm-irregular-$dt.txt
    if [ -f $OUT/torch-gemm-irregular-h100.json ]; then
      python3 $J $OUT/gemm-irregular-$dt-h100.json $OUT/torch-gemm-irregular-h100.json \
        --json /tmp/vs-peers-$dt.json --markdown /tmp/vs-peers-$dt.md > /dev/null 2>&1
      echo "join $dt exit $?"; grep -E "geomean" /tmp/vs-peers-$dt.md
      cat /tmp/vs-peers-$dt.md >> $OUT/gemm-irregular-vs-peers.md; echo >> $OUT/gemm-irregular-vs-peers.md
    fi
  done
fi
explore() { # label, shapes, then env assignments
  local label=$1 shapes=$2; shift 2
  [ $(left) -lt 15 ] && { echo "--- $label: skipped (budget)"; return; }
  env "$@" timeout $(cap 40) $X bench --ops gemm --shape-suite irregular --shapes $shapes --dtypes bf16 --warmup 3 \
    --iters 20 > /tmp/explore-$label.txt 2>&1
  echo "--- $label ($*): exit $?"; grep -E "^ *bf16" /tmp/explore-$label.txt | cut -c1-175
  { echo "### $label ($*)"; cat /tmp/explore-$label.txt; } >> $OUT/irregular-explore.txt
}
if [[ $PARTS == *explore* || $PARTS == *ksplit* ]]; then
  KS=33x1023x777,40x1023x777,1x1x4099,17x33x9000,5x2000x3001,24x999x1500,1x1024x4096,8x512x2048,3x700x30000
  explore ksplit-heur $KS
  for s in 1 2 4 8; do explore ksplit-$s $KS FERROTUNE_SMALL_M_KSPLIT=$s; done
fi
if [[ $PARTS == *explore* ]]; then
  # K split of the small-M family on few slabs (heuristic vs forced), the 64-row Hopper tile
  # against the 128-row split tile (FERROTUNE_SM90_TILE=1), small-M vs Hopper at 33-64 rows,
  # and shapes the suite does not hold.
  M64=64x4096x4096,33x8191x4099,48x4096x4096,64x11008x4096,40x8192x8192,64x16384x4096,50x3000x2999
  explore tile64 $M64
  explore tile128 $M64 FERROTUNE_SM90_TILE=1
  explore tile64-unsplit 64x16384x4096,64x32768x2048,60x24576x1536 FERROTUNE_SM90_TILE=9
  explore smallm-to64 $M64 FERROTUNE_SMALL_M_BESIDE_HOPPER=64
  explore unseen 1x11008x4097,7x5000x1001,24x2048x3333,1x3001x12289,5x12289x2049,40x1000x999,2x7777x5555,31x4099x4097
fi
if [[ $PARTS == *unaligned* ]]; then
  # Weights with rows that are not 16-byte aligned on the small-M family: read in place by
  # interleaved slabs with x from its shifted copies (default, up to 32 rows) against FERROTUNE_SMALL_M_UNALIGNED=0 (consecutive rows, two
  # loads and a funnel shift each, packed first above pack::MIN_MACS), on the suite's odd-K
  # small-M rows and shapes it does not hold; then Nsight Compute on two of them.
  UA=1x8193x4099,1x4097x777,8x12288x4099,1x11008x4097,2x4097x4099,4x5000x3001,16x4095x2049,24x14337x4095,32x5000x3001,1x2049x16385,33x1023x777,8x3000x65,33x8191x4099
  explore inplace $UA
  explore packed $UA FERROTUNE_SMALL_M_UNALIGNED=0
  if command -v ncu > /dev/null && [ $(left) -gt 40 ]; then
    for mode in 1 0; do
      FERROTUNE_SMALL_M_UNALIGNED=$mode timeout $(cap 30) ncu --kernel-name regex:ft_gemv --launch-count 2 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis $X bench --ops gemm --shape-suite irregular \
        --shapes 1x4097x777,1x8193x4099 --dtypes bf16 --warmup 0 --iters 1 > /tmp/ncu-$mode.txt 2>&1
      { echo "### ncu FERROTUNE_SMALL_M_UNALIGNED=$mode"; grep -vE "^==PROF==|^ *$" /tmp/ncu-$mode.txt | grep -E "ft_gemv|Duration|Throughput|Bandwidth|Hit Rate|Busy|Elapsed" ; } >> $OUT/irregular-explore.txt
    done
    stamp "ncu done"; grep -A12 "### ncu" $OUT/irregular-explore.txt | head -40
  fi
fi
if [[ $PARTS == *longk* ]]; then
  # Long K with few output tiles on the Hopper split: the built-in split against other slice
  # counts and the 64 x 128 tile (9) against the 128 x 128 (1); 64-row rows beside them.
  LK=256x256x65536,512x512x32768,384x384x40000,256x1024x32768,128x128x131072
  explore longk-heur $LK
  for sp in 16 64; do explore longk-s$sp $LK FERROTUNE_SM90_SPLIT=$sp; done
  explore longk-t9 $LK FERROTUNE_SM90_TILE=9
  explore longk-t9-s64 $LK FERROTUNE_SM90_TILE=9 FERROTUNE_SM90_SPLIT=64
  M64=64x4096x4096,48x4096x4096,64x8192x2048,40x6144x4096
  for sp in 6 8; do explore m64-s$sp $M64 FERROTUNE_SM90_SPLIT=$sp; done
  explore m64-smallm $M64 FERROTUNE_SMALL_M_BESIDE_HOPPER=64
  if command -v ncu > /dev/null && [ $(left) -gt 40 ]; then
    timeout $(cap 40) ncu --kernel-name regex:ft_gemm90 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis $X bench --ops gemm --shape-suite irregular \
      --shapes 256x256x65536 --dtypes bf16 --warmup 0 --iters 1 > /tmp/ncu-longk.txt 2>&1
    timeout $(cap 40) ncu --kernel-name regex:ft_gemm90 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis $X bench --ops gemm --shape-suite irregular \
      --shapes 64x4096x4096 --dtypes bf16 --warmup 0 --iters 1 >> /tmp/ncu-longk.txt 2>&1
    { echo "### ncu long K, 64 rows"; grep -vE "^==PROF==|^ *$" /tmp/ncu-longk.txt | grep -E "ft_gemm90|Duration|Throughput|Bandwidth|Hit Rate|Busy|Elapsed" ; } >> $OUT/irregular-explore.txt
    stamp "ncu long K done"; grep -A14 "### ncu long K" $OUT/irregular-explore.txt | head -30
  fi
fi
stamp "done"
