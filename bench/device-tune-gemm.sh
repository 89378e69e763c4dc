#!/usr/bin/env bash
# GEMM autotuning on the GPU machine (see bench/NOTES.md, "Autotuner"), from .carry/xtask
# (bench/prepare-carry.sh): (a) tuned vs default (tile 0) on 10 shapes x 2 layouts, exhaustive,
# with the model-guided strategy replayed at a budget of 2 of 8 (25%); (b) the model strategy
# measured for real at that budget on 3 shapes; (c) injected fault / wrong answer / hang, then a
# kill -9 and resume. Everything lands in $OUT/tune-gemm/. PARTS=a,b,c picks parts.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
T=$OUT/tune-gemm; mkdir -p "$T"
PARTS=${PARTS:-a,b,c}
TEN=8192x8192x8192,4096x4096x4096,1000x3000x700,512x3072x768,8192x3072x768,256x4096x4096,4096x256x4096,2048x2048x512,128x8192x1024,3000x1000x5000
THREE=8192x8192x8192,256x4096x4096,2048x2048x512
if [[ $PARTS == *a* ]]; then
  echo "=== (a) tuned vs default, exhaustive, model replayed at budget 2"
  timeout 400 .carry/xtask tune --ops gemm --dtypes bf16 --layouts rc,rr --sizes $TEN --strategy exhaustive \
    --compare-model 2 --profile "$T/gemm-h100.toml" --json "$T/gemm-h100.json" > "$T/gemm-h100.log" 2>&1
  echo "exit $?"; sed -n '/op \/ shape/,$p' "$T/gemm-h100.log"
fi
if [[ $PARTS == *b* ]]; then
  echo "=== (b) model-guided, budget 2 (25% of 8 tiles), measured"
  timeout 200 .carry/xtask tune --ops gemm --dtypes bf16 --sizes $THREE --strategy model --budget 2 \
    --profile "$T/gemm-model.toml" --json "$T/gemm-model.json" > "$T/gemm-model.log" 2>&1
  echo "exit $?"; sed -n '/op \/ shape/,$p' "$T/gemm-model.log"
fi
if [[ $PARTS == *c* ]]; then
  echo "=== (c) fault (tile 3), wrong answer (tile 1), hang (tile 5)"
  FERROTUNE_TUNE_INJECT='fault@op=gemm,tile=3;wrong@op=gemm,tile=1;hang@op=gemm,tile=5' timeout 200 \
    .carry/xtask tune --ops gemm --dtypes bf16 --sizes 4096x4096x4096 --strategy exhaustive --candidate-timeout 10 \
    --profile "$T/gemm-fault.toml" --json "$T/gemm-fault.json" > "$T/gemm-fault.log" 2>&1
  echo "exit $?"; grep -E "FAILED|INVALID|TIMEOUT|workers started|4096x4096x4096" "$T/gemm-fault.log"
  echo "=== (c) kill -9 after 12 s, then resume"
  .carry/xtask tune --ops gemm --dtypes bf16,f16 --sizes 8192x8192x8192,4096x4096x4096 --strategy exhaustive \
    --profile "$T/gemm-resume.toml" > "$T/gemm-resume-1.log" 2>&1 &
  pid=$!; sleep 12; kill -9 $pid; wait $pid 2>/dev/null; sleep 2
  grep -c '^\[\[journal\]\]' "$T/gemm-resume.toml" > "$T/journal-count.txt"; echo "journal records: $(cat "$T/journal-count.txt")"
  timeout 200 .carry/xtask tune --ops gemm --dtypes bf16,f16 --sizes 8192x8192x8192,4096x4096x4096 --strategy exhaustive \
    --profile "$T/gemm-resume.toml" --json "$T/gemm-resume.json" > "$T/gemm-resume-2.log" 2>&1
  echo "exit $?"; grep -E "from the journal" "$T/gemm-resume-2.log"
fi
tar -czf "$OUT/tune-gemm.tgz" -C "$OUT" tune-gemm
