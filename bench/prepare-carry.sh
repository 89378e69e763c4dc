#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust toolchain) into .carry/: the release xtask
# binary and the integration-test binary, both with the PTX embedded.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add rust-src --toolchain nightly >/dev/null
# ptxas for the cubins (without them every process on the GPU machine JIT-compiles the PTX,
# which takes minutes there).
python3 -m pip install --quiet --disable-pip-version-check nvidia-cuda-nvcc
export FERROTUNE_CUBIN=1  # ptxas-assembled cubins ride along: no JIT on the GPU machine
log=$(mktemp)
cargo build --release -p xtask 2>&1 | tee "$log"
if grep -qE "cubins not built|GPU kernels not built" "$log"; then
  echo "prepare-carry: the kernels or their cubins were not built (see the warning above); refusing the carry" >&2
  exit 1
fi
test_bin=$(cargo test --release --no-run -p ferrotune-testkit --message-format=json 2>/dev/null \
  | python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "ferrotune_tests":
        print(m["executable"])')
mkdir -p .carry
cp "${CARGO_TARGET_DIR:-target}/release/xtask" .carry/xtask
cp "$test_bin" .carry/ferrotune_tests
git rev-parse --short=12 HEAD > .carry/commit 2>/dev/null || echo unknown > .carry/commit
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then echo "$(cat .carry/commit)-dirty" > .carry/commit; fi
# The binaries embed the PTX text (tens of MB, highly compressible) and the carry limit is
# 64 MiB: ship them as one xz archive; `bench/unpack-carry.sh` restores them on the device.
tar -C .carry -cf - xtask ferrotune_tests | xz -T2 -4 > .carry/bins.tar.xz
rm .carry/xtask .carry/ferrotune_tests
ls -la .carry
