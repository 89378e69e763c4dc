# The common start of a GPU-machine script (sourced, after `set -uo pipefail`): the time
# budget (BUDGET seconds from now; `left`, `cap N` for a step's timeout, `stamp` for a timed
# log line), the carry unpacked (`bash bench/unpack-carry.sh`), the environment (cuBLAS on
# the library path, NVLink multicast off, the carry's commit, GPU required), and R (a scratch
# directory holding device.txt: commit, date, GPU, driver, clocks), T (the test binary) and X
# (xtask).
START=$(date +%s); BUDGET=${BUDGET:-560}; PART=${PART:-check}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cap() { local want=$1 l; l=$(( $(left) - 10 )); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo $want; }
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
bash bench/unpack-carry.sh || exit 1
C=.carry
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export FERROTUNE_COMMIT=$(cat $C/commit) FERROTUNE_REQUIRE_GPU=1
R=$(mktemp -d); T=$C/ferrotune_tests; X=$C/xtask
{ echo "commit $FERROTUNE_COMMIT, $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader; } | tee $R/device.txt
